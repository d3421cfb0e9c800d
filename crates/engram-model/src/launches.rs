//! Counting the GPU kernels a piece of work launches: CubeCL (the runtime under Burn's wgpu and
//! cuda backends) calls an observer on every launch it issues, on the issuing thread. With
//! Burn's fusion, many tensor ops become one kernel, so this is the figure that decides a small
//! step's speed on a GPU. The CPU backend launches no kernels: there the count is `None`.

use burn::tensor::Device;

/// Counts kernel launches while it lives (process-wide, every device; one counter at a time).
pub struct LaunchCounter {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    inner: imp::Counting,
}

impl LaunchCounter {
    /// Starts counting the launches of work on `device`: `None` on the CPU backend (which
    /// launches no kernels) and where no GPU backend is compiled in.
    pub fn start(device: &Device) -> Option<Self> {
        if device.clone().inner() == Device::flex() {
            return None;
        }
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        {
            Some(Self {
                inner: imp::Counting::start(),
            })
        }
        #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
        {
            None
        }
    }

    /// Kernels launched since [`LaunchCounter::start`].
    pub fn launched(&self) -> u64 {
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        {
            self.inner.launched()
        }
        #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
        {
            0
        }
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod imp {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};

    #[derive(Default)]
    struct Count(AtomicU64);

    impl LaunchObserver for Count {
        fn launched(&self, _kernel: &'static str) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) struct Counting {
        count: Arc<Count>,
        _guard: LaunchObservation,
    }

    impl Counting {
        pub(super) fn start() -> Self {
            let count = Arc::new(Count::default());
            let guard = LaunchObservation::new(count.clone());
            Self {
                count,
                _guard: guard,
            }
        }

        pub(super) fn launched(&self) -> u64 {
            self.count.0.load(Ordering::Relaxed)
        }
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;
    use burn::tensor::{Tensor, TensorData};

    #[test]
    fn counts_the_kernels_a_wgpu_computation_launches() {
        let device = crate::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
        let counter = LaunchCounter::start(&device).unwrap();
        let x: Tensor<1> = Tensor::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0], [3]), &device);
        let y = (x.clone() * x).sum().into_data();
        assert!(counter.launched() > 0, "no launch seen computing {y:?}");
        drop(counter);
        assert!(LaunchCounter::start(&Device::flex()).is_none());
        assert!(LaunchCounter::start(&Device::flex().autodiff()).is_none());
    }
}
