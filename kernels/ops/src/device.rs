//! Choosing the compute backend at run time by name. GPU backends exist only in builds with the
//! matching cargo feature (`cuda`, `wgpu`).

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor};

use crate::error::{DeviceError, Result};

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
/// cuda, wgpu, cpu). A GPU backend's first device sets up the kernel cache
/// ([`crate::kernel_cache::configure`]).
pub fn device_from_name(name: &str) -> Result<Device> {
    let unknown = |why: &str| DeviceError::UnknownBackend {
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
    if kind == "auto" {
        return device_from_name(available_backends()[0]);
    }
    if backend_kind(&kind) == "wgpu" {
        // Before the kernel cache, whose database the compiler names.
        env_setting(name, WGPU_COMPILER_VAR, wgpu_compiler_setting)?;
    }
    if is_gpu_backend(&kind) {
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        env_setting(
            name,
            crate::compile_ahead::THREADS_VAR,
            crate::compile_ahead::threads_setting,
        )?;
        // CubeCL's kernel cache and compile counting, set before its first device exists.
        crate::kernel_cache::configure();
    }
    match kind.as_str() {
        "cpu" | "flex" => Ok(Device::flex()),
        "wgpu" | "vulkan" => {
            #[cfg(feature = "wgpu")]
            crate::compile_ahead::turn_on();
            wgpu_device(index).ok_or_else(|| unknown("built without the `wgpu` feature"))
        }
        "cuda" => {
            // Before the device opens: its properties say whether it has TF32.
            let allowed = env_setting(name, TF32_VAR, tf32_setting)?;
            set_tf32_allowed(allowed);
            let _ahead = env_setting(
                name,
                crate::compile_ahead::CUDA_VAR,
                crate::compile_ahead::cuda_setting,
            )?;
            #[cfg(feature = "cuda")]
            crate::compile_ahead::turn_on_cuda(_ahead);
            cuda_device(index.unwrap_or(0))
                .ok_or_else(|| unknown("built without the `cuda` feature"))
        }
        _ => Err(unknown("not a backend name")),
    }
}

/// What the environment variable `var` asks of backend `name`, as `read` reads its value (`None`
/// when unset); a value `read` refuses is an error of that backend, with `read`'s reason.
fn env_setting<T>(
    name: &str,
    var: &str,
    read: impl FnOnce(Option<&str>) -> std::result::Result<T, String>,
) -> Result<T> {
    read(std::env::var(var).ok().as_deref()).map_err(|reason| DeviceError::Device {
        backend: name.into(),
        reason,
    })
}

/// [`device_from_name`], then opened with one tiny operation, so that a backend that cannot
/// start fails here with a named reason — no CUDA driver, no `libdevice`, no wgpu adapter —
/// instead of panicking in the middle of a model load.
pub fn open_device(name: &str) -> Result<Device> {
    let device = device_from_name(name)?;
    let kind = backend_kind(name);
    if kind == "cuda" {
        // The driver first, outside Burn: a missing libcuda.so.1 panics on the fusion runner
        // thread, and what reaches this thread is only a follow-on panic that names no driver.
        let index = name
            .split_once(':')
            .and_then(|(_, i)| i.parse().ok())
            .unwrap_or(0);
        cuda_driver(index).map_err(|reason| DeviceError::Device {
            backend: name.into(),
            reason,
        })?;
        if cuda_compiler() == Some("nvrtc") {
            nvrtc_ready().map_err(|reason| DeviceError::Device {
                backend: name.into(),
                reason,
            })?;
        } else {
            find_libdevice().map_err(|looked| DeviceError::Device {
                backend: name.into(),
                reason: format!(
                    "libdevice.10.bc not found (looked in {looked}): set CUDA_PATH to a directory \
                     holding nvvm/libdevice/libdevice.10.bc (the CUDA bundle's launcher sets it; \
                     PyPI nvidia-cuda-nvcc-cu12 ships the file)"
                ),
            })?;
        }
    }
    let ran = quietly(|| Tensor::<1>::ones([4], &device).sum().into_scalar::<f32>());
    match ran {
        Ok(4.0) => {
            #[cfg(feature = "wgpu")]
            if matches!(kind.as_str(), "wgpu" | "vulkan") {
                crate::settle::at_exit(&device);
            }
            if matches!(kind.as_str(), "wgpu" | "vulkan" | "cuda") {
                crate::kernel_cache::note_device_opened();
            }
            Ok(device)
        }
        Ok(v) => Err(DeviceError::Device {
            backend: name.into(),
            reason: format!("the sum of four ones came out as {v}"),
        }),
        Err(panic) => Err(DeviceError::Device {
            backend: name.into(),
            reason: explain_panic(&kind, &panic_text(panic.as_ref())),
        }),
    }
}

/// Runs `f`, catching a panic without printing it (backends panic where they cannot start;
/// the caller turns the panic into a named error).
fn quietly<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    ran
}

/// The text of a caught panic.
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// What a backend's start-up panic means, and what to do about it.
fn explain_panic(kind: &str, msg: &str) -> String {
    let lower = msg.to_ascii_lowercase();
    if kind == "cuda" && (lower.contains("dynamically load") || lower.contains("libcuda")) {
        return format!(
            "the CUDA driver (libcuda.so.1) could not be loaded: install the NVIDIA driver, and \
             run where the GPU is visible ({msg})"
        );
    }
    if kind == "cuda" {
        return format!("the CUDA device did not start: {msg}");
    }
    if lower.contains("adapter") {
        return format!(
            "no wgpu adapter: install a Vulkan driver (the GPU vendor's, or Mesa's software one: \
             apt-get install mesa-vulkan-drivers), or pick an adapter with \
             CUBECL_WGPU_DEFAULT_DEVICE ({msg})"
        );
    }
    msg.to_string()
}

/// The compiler that turns CubeCL kernels into PTX in this process: `llvm` (pliron → LLVM, needs
/// only `libdevice.10.bc`) or `nvrtc` (CUDA C++ through NVRTC, needs `libnvrtc` and the CUDA
/// headers; it keeps Hopper's TMA and async-copy matmuls, which the LLVM path hides). Chosen by
/// `CUBECL_CUDA_COMPILER` (engram's patch of cubecl-cuda); `None` in a build without `cuda`.
#[cfg(feature = "cuda")]
pub fn cuda_compiler() -> Option<&'static str> {
    Some(match cubecl_cuda::CudaBackend::selected() {
        cubecl_cuda::CudaBackend::Cpp => "nvrtc",
        cubecl_cuda::CudaBackend::Llvm => "llvm",
    })
}

/// The compiler that turns CubeCL kernels into PTX (`None`: built without `cuda`).
#[cfg(not(feature = "cuda"))]
pub fn cuda_compiler() -> Option<&'static str> {
    None
}

/// The variable that keeps f32 matmuls on CUDA in f32: `ENGRAM_TF32=off`. By default (`on`)
/// cubek-matmul runs them on TF32 tensor cores (10 mantissa bits) wherever the device has them,
/// as PyTorch does with `torch.backends.cuda.matmul.allow_tf32 = True`; bf16 and f16 matmuls are
/// not affected.
pub const TF32_VAR: &str = "ENGRAM_TF32";

/// What a value of [`TF32_VAR`] asks for: `true` (TF32 allowed) when unset, empty, `on`, `1`,
/// `true` or `yes`; `false` for `off`, `0`, `false` or `no`; any other value is named.
pub fn tf32_setting(value: Option<&str>) -> std::result::Result<bool, String> {
    switch_setting(TF32_VAR, value, true)
}

/// What a value of the on/off variable `var` asks for: `default` when unset or empty, `true` for
/// `on`, `1`, `true` or `yes`, `false` for `off`, `0`, `false` or `no` (any case); any other
/// value is named, with the variable.
pub fn switch_setting(
    var: &str,
    value: Option<&str>,
    default: bool,
) -> std::result::Result<bool, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") => Ok(default),
        Some("on" | "1" | "true" | "yes") => Ok(true),
        Some("off" | "0" | "false" | "no") => Ok(false),
        Some(_) => Err(format!(
            "{var}={}: use on or off",
            value.unwrap_or_default()
        )),
    }
}

/// The variable that picks the compiler for a wgpu device on a Vulkan adapter (engram's patch of
/// cubecl-wgpu): `spirv` (the default in a build with the `vulkan` feature; kept by the kernel
/// cache, and able to use cooperative matrices) or `wgsl` (what a build without `vulkan` runs,
/// compiled again by the driver in every process), for a driver that mishandles CubeCL's SPIR-V.
/// Read once per process; Metal and DX12 adapters run WGSL either way.
pub const WGPU_COMPILER_VAR: &str = "CUBECL_WGPU_COMPILER";

/// What a value of [`WGPU_COMPILER_VAR`] asks for: `"spirv"` when unset, empty or `spirv`,
/// `"wgsl"` for `wgsl` (any case); any other value is named.
pub fn wgpu_compiler_setting(value: Option<&str>) -> std::result::Result<&'static str, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "spirv") => Ok("spirv"),
        Some("wgsl") => Ok("wgsl"),
        Some(_) => Err(format!(
            "{WGPU_COMPILER_VAR}={}: use spirv or wgsl",
            value.unwrap_or_default()
        )),
    }
}

/// Whether this process's wgpu devices on Vulkan adapters are asked to run WGSL
/// ([`WGPU_COMPILER_VAR`]`=wgsl`) where the build would compile SPIR-V.
pub fn wgpu_wgsl_forced() -> bool {
    cfg!(feature = "vulkan")
        && wgpu_compiler_setting(std::env::var(WGPU_COMPILER_VAR).ok().as_deref()) == Ok("wgsl")
}

/// Whether this process's CUDA devices run f32 matmuls on TF32 tensor cores ([`TF32_VAR`]);
/// `None` in a build without `cuda`.
pub fn cuda_tf32() -> Option<bool> {
    cfg!(feature = "cuda")
        .then(|| tf32_setting(std::env::var(TF32_VAR).ok().as_deref()).unwrap_or(true))
}

/// Passes the TF32 setting to engram's cubecl-cuda (read when a device opens).
#[cfg(feature = "cuda")]
fn set_tf32_allowed(allowed: bool) {
    cubecl_cuda::set_tf32_allowed(allowed);
}

/// Nothing to pass in a build without `cuda`.
#[cfg(not(feature = "cuda"))]
fn set_tf32_allowed(_allowed: bool) {}

/// Whether NVRTC can compile here: `libnvrtc` loads and the CUDA headers its kernels include are
/// under `$CUDA_PATH/include` (or a toolkit's). The error names what is missing and where to get it.
#[cfg(feature = "cuda")]
fn nvrtc_ready() -> std::result::Result<(), String> {
    let loaded = quietly(|| {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvrtcVersion writes two ints through the pointers it is given; cudarc loads
        // libnvrtc on this first call and panics (caught here) when it cannot.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
    });
    match loaded {
        Ok(cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS) => {}
        Ok(e) => return Err(format!("NVRTC did not answer: {e:?}")),
        Err(panic) => {
            return Err(format!(
                "CUBECL_CUDA_COMPILER=nvrtc, but libnvrtc could not be loaded ({}): install the \
                 CUDA toolkit or PyPI nvidia-cuda-nvrtc-cu12 and put its lib directory on \
                 LD_LIBRARY_PATH (a libnvrtc.so.13 needs a libnvrtc.so link to it), or use the \
                 LLVM compiler (CUBECL_CUDA_COMPILER=llvm)",
                panic_text(panic.as_ref())
            ));
        }
    }
    toolkit_file(cuda_path(), &CUDA_ROOTS, "include/cuda_fp16.h")
        .map(|_| ())
        .map_err(|looked| {
            format!(
                "CUBECL_CUDA_COMPILER=nvrtc, but the CUDA headers are missing (looked for \
                 {looked}): NVRTC compiles CUDA C++ that includes them (the CUDA bundle carries \
                 them; PyPI nvidia-cuda-runtime-cu12 and nvidia-cuda-cccl-cu12 ship them)"
            )
        })
}

#[cfg(not(feature = "cuda"))]
fn nvrtc_ready() -> std::result::Result<(), String> {
    Err("built without the `cuda` feature".into())
}

/// Toolkit locations cubecl-llvm falls back to when `CUDA_PATH` is unset.
const CUDA_ROOTS: [&str; 4] = ["/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda", "/usr"];

/// Where `libdevice.10.bc` lies under a CUDA root.
const LIBDEVICE: &str = "nvvm/libdevice/libdevice.10.bc";

/// Where cubecl-llvm will find `libdevice.10.bc` (it links it into kernels that call math
/// functions: exp, SiLU, softmax): under `$CUDA_PATH`, else the first of [`CUDA_ROOTS`] with an
/// `nvvm/libdevice` directory. The error lists where it looked.
pub fn find_libdevice() -> std::result::Result<PathBuf, String> {
    toolkit_file(cuda_path(), &CUDA_ROOTS, LIBDEVICE)
}

/// `$CUDA_PATH`, where set.
fn cuda_path() -> Option<PathBuf> {
    std::env::var_os("CUDA_PATH").map(PathBuf::from)
}

/// The file `rel` under the CUDA root: `cuda_path`, else the first of `roots` that has `rel`'s
/// directory (as CubeCL picks its root). The error names the file looked for, or where.
fn toolkit_file(
    cuda_path: Option<PathBuf>,
    roots: &[&str],
    rel: &str,
) -> std::result::Result<PathBuf, String> {
    let dir = Path::new(rel).parent().unwrap_or(Path::new(""));
    let root = match cuda_path {
        Some(p) => Some(p),
        None => roots
            .iter()
            .map(Path::new)
            .find(|r| r.join(dir).is_dir())
            .map(Path::to_path_buf),
    };
    match root {
        Some(r) if r.join(rel).is_file() => Ok(r.join(rel)),
        Some(r) => Err(format!(
            "{} (from CUDA_PATH or the toolkit found)",
            r.join(rel).display()
        )),
        None => Err(format!(
            "CUDA_PATH is unset and none of {} has {}",
            roots.join(", "),
            dir.display()
        )),
    }
}

/// Whether `device` is the CPU backend (`flex`), with or without autodiff: where tensor ops run
/// on the host one pass each and no kernel is launched.
pub fn is_cpu(device: &Device) -> bool {
    device.clone().inner() == Device::flex()
}

/// The backend a device name asks for, lower-case, without its index, by the name
/// [`available_backends`] gives it: `cuda:1` → `cuda`, the aliases [`device_from_name`] takes
/// to theirs (`flex` → `cpu`, `vulkan` → `wgpu`), and `auto` → the one it opens (the first
/// compiled in), so that `auto` on a CUDA build gets CUDA's driver checks, label and tolerances.
pub fn backend_kind(name: &str) -> String {
    let kind = name.split(':').next().unwrap_or(name).to_ascii_lowercase();
    match kind.as_str() {
        "auto" => available_backends()[0].to_string(),
        "flex" => "cpu".to_string(),
        "vulkan" => "wgpu".to_string(),
        _ => kind,
    }
}

/// Whether a device name asks for a GPU backend (`cuda`, `wgpu`, their aliases, or `auto` in a
/// build that has one): where kernels are compiled, cached and warmed up.
pub fn is_gpu_backend(name: &str) -> bool {
    matches!(backend_kind(name).as_str(), "cuda" | "wgpu")
}

/// What to call the device opened from `backend` in reports: the name it gives itself (else the
/// backend's name), with the kernel compiler on CUDA (`NVIDIA H200, nvrtc`) and TF32 where it
/// is turned off (`NVIDIA H200, llvm, TF32 off`), and on wgpu (`llvmpipe (LLVM 15.0.6, 256
/// bits), spirv`).
pub fn device_label(device: &Device, backend: &str) -> String {
    let name = device_name(device).unwrap_or_else(|| backend.to_string());
    match cuda_compiler() {
        Some(compiler) if backend_kind(backend) == "cuda" => match cuda_tf32() {
            Some(false) => format!("{name}, {compiler}, TF32 off"),
            _ => format!("{name}, {compiler}"),
        },
        _ => match wgpu_compiler(device) {
            Some(compiler) => format!("{name}, {compiler}"),
            None => name,
        },
    }
}

/// The compiler CubeCL picked for a wgpu device's kernels: `spirv` on a Vulkan adapter in a build
/// with the `vulkan` feature (kept by the kernel cache), `msl` on Metal where built in, else
/// `wgsl` (compiled again by the driver in every process). `None` on other backends.
#[cfg(feature = "wgpu")]
pub fn wgpu_compiler(device: &Device) -> Option<&'static str> {
    let name = cube_client(device, |c| c.name())?;
    name.strip_prefix("wgpu<")?.strip_suffix('>')
}

/// The compiler of a wgpu device's kernels (`None`: built without `wgpu`).
#[cfg(not(feature = "wgpu"))]
pub fn wgpu_compiler(_device: &Device) -> Option<&'static str> {
    None
}

/// The device for an error message: the CPU backend's `cpu`, else the name the device gives
/// itself (`NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
pub fn describe(device: &Device) -> String {
    if is_cpu(device) {
        return "cpu".into();
    }
    device_name(device).unwrap_or_else(|| "of this backend".into())
}

/// The name the device gives itself (`NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`), where
/// the backend reports one.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub fn device_name(device: &Device) -> Option<String> {
    device.identity().map(|i| i.name)
}

/// The name the device gives itself, where the backend reports one (none in a CPU-only build).
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub fn device_name(_device: &Device) -> Option<String> {
    None
}

/// The most bytes `device` holds in one buffer: CubeCL's largest memory page, past which an
/// allocation fails whatever memory is free (llvmpipe's Vulkan limit; a quarter of a CUDA
/// device's memory). `None` on the CPU backend.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub fn max_buffer_bytes(device: &Device) -> Option<u64> {
    cube_properties(device, |p| p.memory.max_page_size)
}

/// `read` of the properties CubeCL gives `device` (which opens it); `None` on the CPU backend.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn cube_properties<T>(
    device: &Device,
    read: impl FnOnce(&cubecl::ir::DeviceProperties) -> T,
) -> Option<T> {
    cube_client(device, |c| read(c.properties()))
}

/// `read` of `device`'s CubeCL client (which opens the device); `None` on the CPU backend.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn cube_client<T>(
    device: &Device,
    read: impl FnOnce(&cubecl_runtime::client::Client) -> T,
) -> Option<T> {
    match device.clone().without_autodiff().as_dispatch() {
        burn::backend::DispatchDevice::Cube(d) => Some(read(&d.client())),
        _ => None,
    }
}

/// The most bytes a device holds in one buffer (a build without a GPU backend has no limit).
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub fn max_buffer_bytes(_device: &Device) -> Option<u64> {
    None
}

/// The memory a backend's device has in all, in bytes: a CUDA device's (the driver's
/// `cuDeviceTotalMem`, without opening the device), a wgpu device's (the device is opened to
/// learn which adapter it is, then its largest device-local Vulkan heap is read:
/// [`crate::vulkan_memory`]), the machine's for the CPU backend (`MemTotal`); `None` wherever it
/// cannot be told (no driver, no Vulkan loader, two adapters of one name and different sizes).
/// `auto` is the backend it opens ([`backend_kind`]).
pub fn device_memory(name: &str) -> Option<u64> {
    let lower = name.to_ascii_lowercase();
    let (kind, index) = match lower.split_once(':') {
        Some((k, i)) => (k, i.parse::<usize>().ok()?),
        None => (lower.as_str(), 0),
    };
    match backend_kind(kind).as_str() {
        "cpu" => {
            let text = std::fs::read_to_string("/proc/meminfo").ok()?;
            meminfo_total(&text)
        }
        "cuda" => cuda_memory(index),
        "wgpu" => wgpu_memory(name),
        _ => None,
    }
}

/// The memory of the wgpu device `name` opens: the Vulkan heap of the physical device that has
/// the opened adapter's name (the machine's memory for a software adapter), else CubeCL's figure
/// where it gives one (its SPIR-V build; Metal).
#[cfg(feature = "wgpu")]
fn wgpu_memory(name: &str) -> Option<u64> {
    let device = device_from_name(name).ok()?;
    let opened = quietly(|| {
        cube_properties(&device, |p| {
            (p.identity.name.clone(), p.memory.max_memory())
        })
    });
    let (adapter, told) = opened.ok().flatten()?;
    let host = device_memory("cpu");
    crate::vulkan_memory::vulkan_devices()
        .ok()
        .and_then(|devices| crate::vulkan_memory::memory_of(&devices, &adapter, host))
        .or(told)
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_memory(_name: &str) -> Option<u64> {
    None
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(feature = "cuda")]
fn cuda_memory(index: usize) -> Option<u64> {
    use cudarc::driver::result;
    // cudarc loads the driver on first use and panics when it is missing.
    let bytes = quietly(|| {
        result::init().ok()?;
        let dev = result::device::get(index as std::ffi::c_int).ok()?;
        // SAFETY: `dev` was returned by `device::get`.
        unsafe { result::device::total_mem(dev) }.ok()
    });
    bytes.ok().flatten().map(|b| b as u64)
}

#[cfg(not(feature = "cuda"))]
fn cuda_memory(_index: usize) -> Option<u64> {
    None
}

/// Whether the CUDA driver loads, initializes and has device `index`; the reason if not.
#[cfg(feature = "cuda")]
fn cuda_driver(index: usize) -> std::result::Result<(), String> {
    use cudarc::driver::result;
    let checked = quietly(|| -> std::result::Result<(), String> {
        result::init().map_err(|e| format!("the CUDA driver did not initialize ({e:?})"))?;
        let count = result::device::get_count()
            .map_err(|e| format!("the CUDA driver lists no devices ({e:?})"))?;
        if index as std::ffi::c_int >= count {
            return Err(format!(
                "there is no CUDA device {index}: the driver sees {count} \
                 (CUDA_VISIBLE_DEVICES may hide some)"
            ));
        }
        Ok(())
    });
    match checked {
        Ok(r) => r,
        Err(panic) => Err(explain_panic("cuda", &panic_text(panic.as_ref()))),
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_driver(_index: usize) -> std::result::Result<(), String> {
    Ok(())
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
    fn libdevice_is_found_or_the_places_looked_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let e = toolkit_file(Some(tmp.path().to_path_buf()), &CUDA_ROOTS, LIBDEVICE).unwrap_err();
        assert!(e.contains("nvvm/libdevice/libdevice.10.bc"), "{e}");
        let e = toolkit_file(None, &["/nonexistent-a", "/nonexistent-b"], LIBDEVICE).unwrap_err();
        assert!(
            e.contains("CUDA_PATH is unset") && e.contains("/nonexistent-b"),
            "{e}"
        );
        let dir = tmp.path().join("nvvm/libdevice");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libdevice.10.bc"), b"BC").unwrap();
        let found = toolkit_file(Some(tmp.path().to_path_buf()), &CUDA_ROOTS, LIBDEVICE).unwrap();
        assert_eq!(found, dir.join("libdevice.10.bc"));
    }

    #[test]
    fn auto_is_the_kind_of_backend_it_opens() {
        assert_eq!(backend_kind("CUDA:1"), "cuda");
        assert_eq!(backend_kind("wgpu"), "wgpu");
        assert_eq!(backend_kind("auto"), available_backends()[0]);
        assert_ne!(backend_kind("auto"), "auto");
        assert_eq!(backend_kind("Flex"), "cpu");
        assert_eq!(backend_kind("vulkan:0"), "wgpu");
        assert!(is_gpu_backend("cuda:1") && is_gpu_backend("VULKAN") && is_gpu_backend("wgpu"));
        assert!(!is_gpu_backend("cpu") && !is_gpu_backend("flex") && !is_gpu_backend("tpu"));
        assert_eq!(is_gpu_backend("auto"), available_backends()[0] != "cpu");
    }

    #[test]
    fn the_tf32_setting_is_on_unless_turned_off_and_a_bad_value_is_named() {
        for on in [
            None,
            Some(""),
            Some("on"),
            Some("1"),
            Some("TRUE"),
            Some(" yes "),
        ] {
            assert_eq!(tf32_setting(on), Ok(true), "{on:?}");
        }
        for off in ["off", "0", "false", "No", "OFF"] {
            assert_eq!(tf32_setting(Some(off)), Ok(false), "{off}");
        }
        assert_eq!(
            tf32_setting(Some("maybe")),
            Err("ENGRAM_TF32=maybe: use on or off".into())
        );
        // Only a CUDA build has TF32 to turn off.
        assert_eq!(cuda_tf32().is_some(), cfg!(feature = "cuda"));
    }

    #[test]
    fn the_wgpu_compiler_is_spirv_unless_wgsl_is_asked_for_and_a_bad_value_is_named() {
        for spirv in [None, Some(""), Some("spirv"), Some(" SPIRV ")] {
            assert_eq!(wgpu_compiler_setting(spirv), Ok("spirv"), "{spirv:?}");
        }
        for wgsl in ["wgsl", "WGSL", " wgsl "] {
            assert_eq!(wgpu_compiler_setting(Some(wgsl)), Ok("wgsl"), "{wgsl}");
        }
        assert_eq!(
            wgpu_compiler_setting(Some("glsl")),
            Err("CUBECL_WGPU_COMPILER=glsl: use spirv or wgsl".into())
        );
    }

    #[test]
    fn memory_totals_are_read() {
        assert_eq!(
            meminfo_total("MemTotal:       24576000 kB\nMemFree: 1 kB\n"),
            Some(24_576_000 * 1024)
        );
        assert_eq!(meminfo_total("nothing"), None);
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(device_memory("cpu").is_some_and(|b| b > 1 << 20));
        }
        if !cfg!(feature = "wgpu") {
            assert_eq!(device_memory("wgpu"), None);
        }
        assert_eq!(device_memory("auto"), device_memory(&backend_kind("auto")));
    }

    /// The wgpu device's memory is its Vulkan adapter's (llvmpipe here, a software adapter: the
    /// machine's memory), the same figure however the device is named.
    #[cfg(feature = "wgpu")]
    #[test]
    fn a_wgpu_devices_memory_is_its_vulkan_heap() {
        let Some(bytes) = device_memory("wgpu") else {
            panic!(
                "no memory figure for wgpu: {:?}",
                crate::vulkan_memory::vulkan_devices()
            );
        };
        let name = device_name(&device_from_name("wgpu").unwrap()).unwrap();
        let devices = crate::vulkan_memory::vulkan_devices().unwrap();
        let listed = devices.iter().find(|d| d.name == name);
        let Some(listed) = listed else {
            panic!("{name} is not among {devices:?}")
        };
        let machine = device_memory("cpu").expect("MemTotal");
        if listed.software {
            assert_eq!(bytes, machine);
        } else {
            assert!(
                bytes > 256 << 20 && bytes == listed.local_heap,
                "{listed:?}: {bytes}"
            );
        }
        assert_eq!(device_memory("WGPU"), Some(bytes));
    }

    #[test]
    fn the_cpu_device_opens() {
        assert!(open_device("cpu").is_ok());
        assert!(
            explain_panic(
                "cuda",
                "Unable to dynamically load the \"cuda\" shared library"
            )
            .contains("install the NVIDIA driver")
        );
        assert!(explain_panic("wgpu", "No possible adapter available").contains("Vulkan"));
    }

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
