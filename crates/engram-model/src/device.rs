//! Choosing the compute backend at run time by name. GPU backends exist only in builds with the
//! matching cargo feature (`cuda`, `wgpu`).

use burn::tensor::Device;

use crate::error::{ModelError, Result};

/// Backends compiled into this build, in the order `auto` tries them.
pub fn available_backends() -> Vec<&'static str> {
    let mut v = Vec::new();
    if cfg!(feature = "cuda") {
        v.push("cuda");
    }
    if cfg!(feature = "wgpu") {
        v.push("wgpu");
    }
    v.push("cpu");
    v
}

/// A device from a backend name: `cpu` (Burn's flex backend), `wgpu` (default adapter; set
/// `CUBECL_WGPU_DEFAULT_DEVICE` to pick one), `cuda` / `cuda:N`, or `auto` (the first compiled in:
/// cuda, wgpu, cpu).
pub fn device_from_name(name: &str) -> Result<Device> {
    let unknown = |why: &str| ModelError::UnknownBackend {
        name: name.to_string(),
        hint: format!(
            "{why}; this build has: {}, auto",
            available_backends().join(", ")
        ),
    };
    let lower = name.to_ascii_lowercase();
    let (kind, index) = match lower.split_once(':') {
        Some((k, i)) => (
            k.to_string(),
            Some(
                i.parse::<usize>()
                    .map_err(|_| unknown("bad device index"))?,
            ),
        ),
        None => (lower.clone(), None),
    };
    match kind.as_str() {
        "auto" => device_from_name(available_backends()[0]),
        "cpu" | "flex" => Ok(Device::flex()),
        "wgpu" | "vulkan" => {
            wgpu_device(index).ok_or_else(|| unknown("built without the `wgpu` feature"))
        }
        "cuda" => cuda_device(index.unwrap_or(0))
            .ok_or_else(|| unknown("built without the `cuda` feature")),
        _ => Err(unknown("not a backend name")),
    }
}

#[cfg(feature = "wgpu")]
fn wgpu_device(index: Option<usize>) -> Option<Device> {
    use burn::tensor::DeviceKind;
    Some(Device::wgpu(match index {
        Some(i) => DeviceKind::DiscreteGpu(i),
        None => DeviceKind::DefaultDevice,
    }))
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_device(_index: Option<usize>) -> Option<Device> {
    None
}

#[cfg(feature = "cuda")]
fn cuda_device(index: usize) -> Option<Device> {
    Some(Device::cuda(index))
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_index: usize) -> Option<Device> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_backend_is_named() {
        let e = device_from_name("tpu").unwrap_err().to_string();
        assert!(e.contains("`tpu`") && e.contains("cpu"), "{e}");
        assert!(device_from_name("cpu").is_ok());
        if !cfg!(feature = "cuda") {
            let e = device_from_name("cuda").unwrap_err().to_string();
            assert!(e.contains("without the `cuda` feature"), "{e}");
        }
    }
}
