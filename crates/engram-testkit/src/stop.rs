//! A run stopped part-way: a progress sink that requests a stop after so many steps.

use std::sync::atomic::{AtomicU64, Ordering};

use engram_io::{Progress, Stop};

/// Asks its [`Stop`] to stop (signal 10) once `after` steps were reported done.
pub struct StopAfter {
    after: u64,
    seen: AtomicU64,
    stop: Stop,
}

impl StopAfter {
    /// Stops after `after` steps.
    pub fn new(after: u64) -> Self {
        Self {
            after,
            seen: AtomicU64::new(0),
            stop: Stop::new(),
        }
    }

    /// The stop to hand the run beside this progress.
    pub fn stop(&self) -> &Stop {
        &self.stop
    }
}

impl Progress for StopAfter {
    fn advance(&self, n: u64) {
        if self.seen.fetch_add(n, Ordering::SeqCst) + n >= self.after {
            self.stop.request(10);
        }
    }
}
