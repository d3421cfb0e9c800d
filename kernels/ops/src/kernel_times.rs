//! Where a piece of GPU work spends its device time: each kernel launch's window as the device
//! stamped it ([`crate::LaunchCounter::start_timed`] takes them), summed by kernel, and the
//! device's busy time against the span from the first kernel's start to the last one's end.
//! A span much longer than the busy time is a device waiting for the host to issue work (too
//! many small launches); a busy device with a low MFU is slow kernels.

use std::collections::HashMap;

/// One timed launch.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedLaunch {
    /// The kernel, named as [`crate::LaunchCounter::by_kernel`] names it.
    pub kernel: String,
    /// When the device started it, in seconds after the first timed launch started; `None`
    /// where the measurement carries no place on the device's timeline (a length the profiling
    /// logger read first).
    pub start_s: Option<f64>,
    /// How long it ran, in seconds.
    pub seconds: f64,
}

/// The device time of one kernel's launches.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelTime {
    /// The kernel.
    pub kernel: String,
    /// Its timed launches.
    pub launches: u64,
    /// Their device time in all, in seconds.
    pub seconds: f64,
}

/// The timed launches of a piece of work, in launch order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelTimes {
    /// Each timed launch.
    pub launches: Vec<TimedLaunch>,
    /// Whether every window was stamped by the device (CUDA's events, Vulkan's timestamp
    /// queries); `false` when any was timed by the host around a blocking submit, which
    /// includes the submit and waits for the kernel: then lengths are upper bounds and
    /// kernels did not overlap the host's work.
    pub device_clock: bool,
    /// Launches whose measurement came back empty (a window the device did not stamp).
    pub untimed: u64,
}

impl KernelTimes {
    /// The launches' lengths summed, in seconds.
    pub fn kernel_seconds(&self) -> f64 {
        self.launches.iter().map(|l| l.seconds).sum()
    }

    /// Seconds in which at least one timed kernel ran (overlapping windows counted once);
    /// `None` when a launch has no place on the timeline.
    pub fn busy_seconds(&self) -> Option<f64> {
        let mut windows = self.windows()?;
        windows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut busy, mut reach) = (0.0, f64::NEG_INFINITY);
        for (start, end) in windows {
            if end <= reach {
                continue;
            }
            busy += end - start.max(reach);
            reach = end;
        }
        Some(busy)
    }

    /// Seconds from the first timed kernel's start to the last one's end; `None` when a launch
    /// has no place on the timeline or nothing was timed.
    pub fn span_seconds(&self) -> Option<f64> {
        let windows = self.windows()?;
        let first = windows.iter().map(|w| w.0).min_by(f64::total_cmp)?;
        let last = windows.iter().map(|w| w.1).max_by(f64::total_cmp)?;
        Some(last - first)
    }

    /// Device time by kernel, the most time first.
    pub fn by_kernel(&self) -> Vec<KernelTime> {
        let mut tally: HashMap<&str, (u64, f64)> = HashMap::new();
        for l in &self.launches {
            let t = tally.entry(&l.kernel).or_default();
            t.0 += 1;
            t.1 += l.seconds;
        }
        let mut out: Vec<KernelTime> = tally
            .into_iter()
            .map(|(kernel, (launches, seconds))| KernelTime {
                kernel: kernel.to_string(),
                launches,
                seconds,
            })
            .collect();
        out.sort_by(|a, b| {
            b.seconds
                .total_cmp(&a.seconds)
                .then_with(|| a.kernel.cmp(&b.kernel))
        });
        out
    }

    /// Each launch's `(start, end)`, when all have a start.
    fn windows(&self) -> Option<Vec<(f64, f64)>> {
        self.launches
            .iter()
            .map(|l| l.start_s.map(|s| (s, s + l.seconds)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(kernel: &str, start: f64, seconds: f64) -> TimedLaunch {
        TimedLaunch {
            kernel: kernel.into(),
            start_s: Some(start),
            seconds,
        }
    }

    #[test]
    fn busy_time_counts_overlaps_once_and_the_span_includes_the_gaps() {
        let times = KernelTimes {
            launches: vec![
                launch("MatmulEntry", 0.0, 2.0),
                // Inside the first window: adds nothing to the busy time.
                launch("ElemwiseFuse", 0.5, 1.0),
                // Overlaps the first's end by one.
                launch("MatmulEntry", 1.0, 3.0),
                // After a gap of 2.
                launch("CastElement", 6.0, 0.5),
            ],
            device_clock: true,
            untimed: 0,
        };
        assert_eq!(times.kernel_seconds(), 6.5);
        assert_eq!(times.busy_seconds(), Some(4.5));
        assert_eq!(times.span_seconds(), Some(6.5));
        let by = times.by_kernel();
        assert_eq!(
            by.iter()
                .map(|k| (k.kernel.as_str(), k.launches, k.seconds))
                .collect::<Vec<_>>(),
            vec![
                ("MatmulEntry", 2, 5.0),
                ("ElemwiseFuse", 1, 1.0),
                ("CastElement", 1, 0.5)
            ]
        );
    }

    #[test]
    fn a_launch_off_the_timeline_leaves_busy_and_span_unknown() {
        let mut times = KernelTimes {
            launches: vec![launch("MatmulEntry", 0.0, 1.0)],
            device_clock: false,
            untimed: 0,
        };
        times.launches.push(TimedLaunch {
            kernel: "MatmulEntry".into(),
            start_s: None,
            seconds: 2.0,
        });
        assert_eq!(times.kernel_seconds(), 3.0);
        assert_eq!(times.busy_seconds(), None);
        assert_eq!(times.span_seconds(), None);
        assert_eq!(KernelTimes::default().span_seconds(), None);
        assert_eq!(KernelTimes::default().busy_seconds(), Some(0.0));
    }
}
