//! Counting the GPU kernels a piece of work launches: CubeCL (the runtime under Burn's wgpu and
//! cuda backends) calls an observer on every launch it issues, on the issuing thread. With
//! Burn's fusion, many tensor ops become one kernel, so this is the figure that decides a small
//! step's speed on a GPU. The CPU backend launches no kernels: there the count is `None`.
//! A timed counter ([`LaunchCounter::start_timed`]) also has each launch's window stamped by
//! the device, without waiting for it, and reads them back when asked ([`KernelTimes`]).

use burn::tensor::Device;

use crate::kernel_times::KernelTimes;

/// Counts kernel launches while it lives (process-wide, every device; one counter at a time).
pub struct LaunchCounter {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    inner: imp::Counting,
}

impl LaunchCounter {
    /// Starts counting the launches of work on `device`: `None` on the CPU backend (which
    /// launches no kernels) and where no GPU backend is compiled in.
    pub fn start(device: &Device) -> Option<Self> {
        Self::open(device, false)
    }

    /// [`LaunchCounter::start`], each launch also timed on the device (CubeCL's deferred
    /// profiling: CUDA events, Vulkan timestamp queries; the host does not wait for a kernel
    /// to end) until [`LaunchCounter::kernel_times`] reads the windows back. Timing costs the
    /// issuing thread a round trip to CubeCL's device thread per launch, so time a step of its
    /// own, not the steps a throughput figure is taken over.
    pub fn start_timed(device: &Device) -> Option<Self> {
        Self::open(device, true)
    }

    fn open(device: &Device, timed: bool) -> Option<Self> {
        if crate::is_cpu(device) {
            return None;
        }
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        {
            Some(Self {
                inner: imp::Counting::start(timed),
            })
        }
        #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
        {
            let _ = timed;
            None
        }
    }

    /// The device time of the launches timed since [`LaunchCounter::start_timed`] (empty for a
    /// counter that does not time), in launch order. Waits for the device to reach the last
    /// one; each call reads the windows that arrived since the last call.
    pub fn kernel_times(&self) -> KernelTimes {
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        {
            self.inner.kernel_times()
        }
        #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
        {
            KernelTimes::default()
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
    use std::sync::{Arc, Mutex, MutexGuard};

    use cubecl_environment::time::Instant;
    use cubecl_runtime::config::{TypeNameFormatLevel, type_name_format};
    use cubecl_runtime::logging::{
        Duration, LaunchObservation, LaunchObserver, ProfileDuration, TimingMethod, TimingRequest,
    };

    use crate::kernel_times::{KernelTimes, TimedLaunch};

    /// A launch's measurement as it arrived: unread (the device stamps it as it runs), or a
    /// length the profiling logger read first.
    enum Measured {
        Pending(ProfileDuration),
        Length(Duration, TimingMethod),
    }

    /// The launches seen, in order, and (timed) their measurements.
    struct Count {
        launched: AtomicU64,
        names: Mutex<Vec<&'static str>>,
        timed: bool,
        measured: Mutex<Vec<(&'static str, Measured)>>,
    }

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    impl LaunchObserver for Count {
        fn launched(&self, kernel: &'static str) {
            self.launched.fetch_add(1, Ordering::Relaxed);
            lock(&self.names).push(kernel);
        }

        fn timing(&self) -> TimingRequest {
            if self.timed {
                TimingRequest::Deferred
            } else {
                TimingRequest::None
            }
        }

        fn profiled(&self, kernel: &'static str, profile: ProfileDuration) {
            lock(&self.measured).push((kernel, Measured::Pending(profile)));
        }

        fn timed(&self, kernel: &'static str, duration: Duration, method: TimingMethod) {
            lock(&self.measured).push((kernel, Measured::Length(duration, method)));
        }
    }

    pub(super) struct Counting {
        count: Arc<Count>,
        /// Before any window it times opened: the timeline's origin (CubeCL places device
        /// stamps on the host's clock).
        origin: Instant,
        _guard: LaunchObservation,
    }

    impl Counting {
        pub(super) fn start(timed: bool) -> Self {
            let count = Arc::new(Count {
                launched: AtomicU64::new(0),
                names: Mutex::new(Vec::new()),
                timed,
                measured: Mutex::new(Vec::new()),
            });
            let origin = Instant::now();
            let guard = LaunchObservation::new(count.clone());
            Self {
                count,
                origin,
                _guard: guard,
            }
        }

        /// Reads back the measurements taken so far (blocking until the device stamped them),
        /// placing each on the timeline of the earliest one's start.
        pub(super) fn kernel_times(&self) -> KernelTimes {
            let measured = std::mem::take(&mut *lock(&self.count.measured));
            let mut device_clock = true;
            let mut untimed = 0;
            // (kernel, start after the counter started, length)
            let mut read = Vec::with_capacity(measured.len());
            for (kernel, m) in measured {
                let kernel = type_name_format(kernel, TypeNameFormatLevel::Short);
                match m {
                    Measured::Pending(profile) => {
                        device_clock &= profile.timing_method() == TimingMethod::Device;
                        match cubecl_environment::future::block_on(profile.resolve()) {
                            Some(ticks) => read.push((
                                kernel,
                                Some(ticks.start_duration_since(self.origin).as_secs_f64()),
                                ticks.duration().as_secs_f64(),
                            )),
                            None => untimed += 1,
                        }
                    }
                    Measured::Length(d, method) => {
                        device_clock &= method == TimingMethod::Device;
                        read.push((kernel, None, d.as_secs_f64()));
                    }
                }
            }
            let first = read
                .iter()
                .filter_map(|r| r.1)
                .min_by(f64::total_cmp)
                .unwrap_or(0.0);
            KernelTimes {
                launches: read
                    .into_iter()
                    .map(|(kernel, start, seconds)| TimedLaunch {
                        kernel,
                        start_s: start.map(|s| s - first),
                        seconds,
                    })
                    .collect(),
                device_clock,
                untimed,
            }
        }

        pub(super) fn launched(&self) -> u64 {
            self.count.launched.load(Ordering::Relaxed)
        }

        pub(super) fn sequence(&self) -> Vec<String> {
            lock(&self.count.names)
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
        // A counter that does not time has no times.
        assert!(counter.kernel_times().launches.is_empty());
        drop(counter);
        assert!(LaunchCounter::start(&Device::flex()).is_none());
        assert!(LaunchCounter::start_timed(&Device::flex()).is_none());
        assert!(LaunchCounter::start(&Device::flex().autodiff()).is_none());
    }

    #[test]
    fn times_each_launch_of_a_wgpu_computation() {
        let _g = crate::testing::train_lock();
        let device = crate::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
        let x: Tensor<2> = Tensor::ones([256, 256], &device);
        // Once untimed first: the first launches compile their kernels.
        let work = || (x.clone().matmul(x.clone()) + 1.0).sum().into_data();
        work();
        let counter = LaunchCounter::start_timed(&device).unwrap();
        let y = work();
        let times = counter.kernel_times();
        assert_eq!(y.try_to_vec::<f32>().unwrap(), vec![257.0 * 256.0 * 256.0]);
        // Each launch timed is one counted, with a length; the product's among them. (The
        // observer is the process's: other tests' launches may be counted too, and those that
        // land after the read are counted without their measurement, so this is a bound.)
        assert!(times.launches.len() as u64 + times.untimed <= counter.launched());
        let mut counted = counter.sequence();
        for l in &times.launches {
            let at = counted.iter().position(|k| *k == l.kernel);
            counted.remove(at.unwrap_or_else(|| panic!("{} timed, not counted", l.kernel)));
        }
        assert!(
            times.launches.iter().any(|l| l.kernel.contains("Matmul")),
            "{times:?}"
        );
        assert!(times.launches.iter().all(|l| l.seconds > 0.0), "{times:?}");
        // Placed on one timeline that starts at the first launch: the device was busy for no
        // longer than the span, and no less than the longest kernel.
        let (busy, span) = (times.busy_seconds().unwrap(), times.span_seconds().unwrap());
        let longest = times.launches.iter().map(|l| l.seconds).fold(0.0, f64::max);
        assert!(longest <= busy + 1e-9 && busy <= span + 1e-9, "{times:?}");
        assert!(times.launches.iter().any(|l| l.start_s == Some(0.0)));
        assert_eq!(
            times.by_kernel().iter().map(|k| k.launches).sum::<u64>(),
            times.launches.len() as u64
        );
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
