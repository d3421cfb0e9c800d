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
        if crate::is_cpu(device) {
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

    /// Launches since [`LaunchCounter::start`] by kernel (named as CubeCL's profiler shortens
    /// kernel type names: `ElemwiseFuse`, `Matmul…`), most launched first.
    pub fn by_kernel(&self) -> Vec<(String, u64)> {
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        {
            self.inner.by_kernel()
        }
        #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
        {
            Vec::new()
        }
    }

    /// Launches since [`LaunchCounter::start`] of the kernels whose name (as in
    /// [`LaunchCounter::by_kernel`]) contains `part`: a count that launches by other threads'
    /// work on the device (the counter sees every stream) do not disturb.
    pub fn launched_named(&self, part: &str) -> u64 {
        launched_named(&self.by_kernel(), part)
    }

    /// The kernels launched since [`LaunchCounter::start`], in launch order (named as in
    /// [`LaunchCounter::by_kernel`]): where a step's ops fused and where they did not.
    pub fn sequence(&self) -> Vec<String> {
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        {
            self.inner.sequence()
        }
        #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
        {
            Vec::new()
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
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use cubecl_runtime::config::{TypeNameFormatLevel, type_name_format};
    use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};

    /// The launches seen, in order.
    #[derive(Default)]
    struct Count(AtomicU64, Mutex<Vec<&'static str>>);

    impl LaunchObserver for Count {
        fn launched(&self, kernel: &'static str) {
            self.0.fetch_add(1, Ordering::Relaxed);
            self.1
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(kernel);
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

        pub(super) fn sequence(&self) -> Vec<String> {
            self.count
                .1
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|name| type_name_format(name, TypeNameFormatLevel::Short))
                .collect()
        }

        pub(super) fn by_kernel(&self) -> Vec<(String, u64)> {
            let mut tally: HashMap<String, u64> = HashMap::new();
            for name in self.sequence() {
                *tally.entry(name).or_default() += 1;
            }
            let mut out: Vec<_> = tally.into_iter().collect();
            out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            out
        }
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;
    use burn::tensor::{Tensor, TensorData};

    #[test]
    fn counts_the_kernels_a_wgpu_computation_launches() {
        // One observer at a time (CubeCL's is process-wide): counting tests take turns.
        let _g = crate::testing::train_lock();
        let device = crate::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
        let counter = LaunchCounter::start(&device).unwrap();
        let x: Tensor<1> = Tensor::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0], [3]), &device);
        let y = (x.clone() * x).sum().into_data();
        assert!(counter.launched() > 0, "no launch seen computing {y:?}");
        let tally = counter.by_kernel();
        assert_eq!(
            tally.iter().map(|(_, n)| n).sum::<u64>(),
            counter.launched()
        );
        let sequence = counter.sequence();
        assert_eq!(sequence.len() as u64, counter.launched());
        for (name, n) in &tally {
            assert_eq!(sequence.iter().filter(|s| *s == name).count() as u64, *n);
        }
        assert_eq!(counter.launched_named(""), counter.launched());
        assert_eq!(counter.launched_named("no kernel is named this"), 0);
        assert!(
            tally
                .iter()
                .all(|(name, _)| !name.is_empty() && !name.contains("::"))
        );
        drop(counter);
        assert!(LaunchCounter::start(&Device::flex()).is_none());
        assert!(LaunchCounter::start(&Device::flex().autodiff()).is_none());
    }
}

/// Launches of the kernels whose name contains `part` in a by-kernel count
/// ([`LaunchCounter::by_kernel`]).
pub fn launched_named(launches: &[(String, u64)], part: &str) -> u64 {
    launches
        .iter()
        .filter(|(k, _)| k.contains(part))
        .map(|(_, n)| n)
        .sum()
}
