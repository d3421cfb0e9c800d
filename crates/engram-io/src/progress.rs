//! How a library says what it is doing without printing: it reports tasks (a bar of known
//! length, or a spinner), their advance and status, and notes worth keeping (an epoch's loss, a
//! log line) to a [`Progress`]. The `engram` binary draws them with indicatif; a sweep gives
//! each cell's tasks a [`Progress::subtask`] under its own bar; tests and scripts pass [`Quiet`].

/// Receives a library's progress. Every method has a do-nothing default, so a reporter
/// implements only what it shows.
pub trait Progress: Sync {
    /// A task begins: `total` steps (`None`: unknown, a spinner), described by `label`. It
    /// replaces the task this reporter showed before.
    fn begin(&self, label: &str, total: Option<u64>) {
        let _ = (label, total);
    }

    /// A task counted in bytes (a download) begins; shown as [`Progress::begin`] unless the
    /// reporter formats bytes.
    fn begin_bytes(&self, label: &str, total: Option<u64>) {
        self.begin(label, total);
    }

    /// Steps already done (a resumed run starts part of the way in).
    fn set_position(&self, done: u64) {
        let _ = done;
    }

    /// `n` more steps done.
    fn advance(&self, n: u64) {
        let _ = n;
    }

    /// A short status beside the task (loss, tokens/s).
    fn status(&self, text: &str) {
        let _ = text;
    }

    /// A line worth keeping (an epoch's summary, a log line), shown above any bars.
    fn note(&self, text: &str) {
        let _ = text;
    }

    /// The task is over; its bar goes away.
    fn end(&self) {}

    /// A reporter for a task nested under this one (a cell's training under a sweep's bar).
    fn subtask(&self) -> Box<dyn Progress + '_> {
        Box::new(Quiet)
    }
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Progress for Quiet {}

/// The reporter to use for an optional one: `progress`, or [`Quiet`].
pub fn or_quiet(progress: Option<&dyn Progress>) -> &dyn Progress {
    progress.unwrap_or(&Quiet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records what it is told.
    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl Progress for Log {
        fn begin(&self, label: &str, total: Option<u64>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("begin {label} {total:?}"));
        }
        fn advance(&self, n: u64) {
            self.0.lock().unwrap().push(format!("advance {n}"));
        }
    }

    #[test]
    fn defaults_do_nothing_and_reporters_see_what_they_implement() {
        let log = Log::default();
        let p: &dyn Progress = &log;
        p.begin("answering", Some(3));
        p.status("ignored");
        p.advance(2);
        p.end();
        p.subtask().begin("nested, quiet by default", None);
        assert_eq!(
            *log.0.lock().unwrap(),
            vec!["begin answering Some(3)", "advance 2"]
        );
        or_quiet(None).advance(1);
    }
}
