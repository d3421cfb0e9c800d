//! A request to stop long work at its next safe point: a signal (Ctrl-C, a scheduler's
//! preemption or time-limit warning) or a caller that wants the work to end. The binary turns
//! signals into a request (it registers [`Stop::flag`] with its signal handlers); libraries
//! only ask [`Stop::requested`] between units of work — an optimizer step, a generation batch,
//! a cell — and end with their own "stopped" error, leaving what they had saved (an epoch
//! checkpoint, finished records) in place for a rerun to resume from.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A shared stop request; clones share it. Holds the number of the signal that asked (any
/// non-zero number for a request that is not a signal).
#[derive(Clone, Default)]
pub struct Stop(Arc<AtomicUsize>);

impl Stop {
    /// A handle nobody has asked to stop yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the work to stop; `signal` (non-zero) says why. The first request is kept.
    pub fn request(&self, signal: usize) {
        let _ = self
            .0
            .compare_exchange(0, signal.max(1), Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The signal number of the request, if stopping was asked for.
    pub fn requested(&self) -> Option<usize> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// The shared cell itself, for signal handlers that store a number in it (a handler may
    /// overwrite an earlier request's number; [`Stop::requested`] then says the newest).
    pub fn flag(&self) -> Arc<AtomicUsize> {
        self.0.clone()
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stop({:?})", self.requested())
    }
}

/// Every handle compares equal: a stop request is not part of any configuration that holds
/// one (configurations compare by what they compute).
impl PartialEq for Stop {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_first_request() {
        let s = Stop::new();
        let c = s.clone();
        assert_eq!(c.requested(), None);
        s.request(12);
        s.request(2);
        assert_eq!(c.requested(), Some(12));
        let z = Stop::new();
        z.request(0);
        assert_eq!(z.requested(), Some(1));
    }
}
