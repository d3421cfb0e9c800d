//! How the binary shows what the libraries report ([`engram_io::Progress`]): indicatif bars in
//! one group, nested tasks as further bars under the first, notes printed above them — or, with
//! bars off (`--no-progress`, or stderr not a terminal), notes as plain lines on stderr.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use engram_io::Progress;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The terminal's one group of bars: every reporter's, and the live compile line's
/// ([`crate::compile_line`]), so that they draw together instead of over each other.
pub fn terminal() -> &'static MultiProgress {
    static GROUP: std::sync::OnceLock<MultiProgress> = std::sync::OnceLock::new();
    GROUP.get_or_init(MultiProgress::new)
}

/// A reporter that draws indicatif bars.
pub struct Bars {
    group: MultiProgress,
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// Bars on stderr (`draw = false`, or stderr not a terminal — a Slurm job's output file,
    /// nohup, CI: notes only, as plain lines).
    pub fn new(draw: bool) -> Self {
        let group = if draw && std::io::stderr().is_terminal() {
            terminal().clone()
        } else {
            MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
        };
        Self {
            group,
            bar: Mutex::new(None),
        }
    }

    fn start(&self, bar: ProgressBar) {
        let bar = self.group.add(bar);
        if let Some(old) = self.bar.lock().expect("bar lock").replace(bar) {
            old.finish_and_clear();
        }
    }

    fn with(&self, f: impl FnOnce(&ProgressBar)) {
        if let Some(bar) = self.bar.lock().expect("bar lock").as_ref() {
            f(bar);
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("valid template")
        .progress_chars("=> ")
}

impl Progress for Bars {
    fn begin(&self, label: &str, total: Option<u64>) {
        let bar = match total {
            Some(n) => ProgressBar::new(n).with_style(style(
                "{prefix} [{bar:30}] {pos}/{len} {msg} elapsed {elapsed} eta {eta}",
            )),
            None => {
                let b = ProgressBar::new_spinner().with_style(style("{spinner} {prefix} {msg}"));
                b.enable_steady_tick(Duration::from_millis(120));
                b
            }
        };
        bar.set_prefix(label.to_string());
        self.start(bar);
    }

    fn begin_bytes(&self, label: &str, total: Option<u64>) {
        let bar = ProgressBar::new(total.unwrap_or(0)).with_style(style(
            "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        ));
        bar.set_prefix(label.to_string());
        self.start(bar);
    }

    fn set_position(&self, done: u64) {
        self.with(|b| {
            b.set_position(done);
            b.reset_eta();
        });
    }

    fn advance(&self, n: u64) {
        self.with(|b| b.inc(n));
    }

    fn status(&self, text: &str) {
        self.with(|b| b.set_message(text.to_string()));
    }

    fn note(&self, text: &str) {
        if self.group.is_hidden() {
            eprintln!("{text}");
        } else {
            let _ = self.group.println(text);
        }
    }

    fn end(&self) {
        if let Some(bar) = self.bar.lock().expect("bar lock").take() {
            bar.finish_and_clear();
        }
    }

    fn subtask(&self) -> Box<dyn Progress + '_> {
        Box::new(Bars {
            group: self.group.clone(),
            bar: Mutex::new(None),
        })
    }
}
