//! The GPU compile work, shown: while CubeCL compiles kernels a live line on the terminal
//! ("compiling GPU kernels: 120, 34 s — cached for next time"), plain lines every
//! [`PLAIN_EVERY`] in batch logs; at the end of the command one summary line (the
//! [`engram_model::kernel_cache::summary`]) and any kernel-cache warning, once.

use std::io::IsTerminal;
use std::time::Duration;

use engram_model::kernel_cache;
use indicatif::{ProgressBar, ProgressStyle};

/// How often the watcher looks at the counts.
const POLL: Duration = Duration::from_millis(250);
/// Without a new kernel for this long, the live line goes away.
const IDLE: Duration = Duration::from_secs(2);
/// How often batch logs get a plain line while kernels are compiled.
const PLAIN_EVERY: Duration = Duration::from_secs(15);

/// Starts the watcher thread (it lives as long as the process).
pub fn watch() {
    let terminal = std::io::stderr().is_terminal();
    let _ = std::thread::Builder::new()
        .name("compile-line".into())
        .spawn(move || watcher(terminal));
}

fn watcher(terminal: bool) {
    let mut bar: Option<ProgressBar> = None;
    let mut shown = 0u64;
    let mut last_plain = None::<std::time::Instant>;
    loop {
        std::thread::sleep(POLL);
        for w in kernel_cache::take_warnings() {
            match &bar {
                Some(b) => b.println(format!("warning: {w}")),
                None => eprintln!("warning: {w}"),
            }
        }
        let a = kernel_cache::activity();
        let busy = a.since_last.is_some_and(|d| d < IDLE) && a.compiled > shown;
        if terminal {
            if busy {
                let b = bar.get_or_insert_with(|| {
                    let b = crate::progress::terminal()
                        .add(ProgressBar::new_spinner())
                        .with_style(
                            ProgressStyle::with_template("{spinner} {msg}")
                                .expect("valid template"),
                        );
                    b.enable_steady_tick(Duration::from_millis(120));
                    b
                });
                b.set_message(a.live_line());
            } else if a.since_last.is_none_or(|d| d >= IDLE)
                && let Some(b) = bar.take()
            {
                b.finish_and_clear();
                shown = a.compiled;
            }
        } else if busy && last_plain.is_none_or(|t| t.elapsed() >= PLAIN_EVERY) {
            eprintln!("{}", a.live_line());
            last_plain = Some(std::time::Instant::now());
        }
    }
}

/// The end-of-command line, where a GPU backend was used: `None` otherwise, and where one was
/// asked for but never opened (`--backend cuda` in a build without it, a machine without the
/// driver: the error says so, and a line of zeros before it would only hide it).
pub fn summary_line() -> Option<String> {
    // No GPU backend asked for: not even the summary's database read.
    kernel_cache::state()?;
    let summary = kernel_cache::summary();
    kernel_cache::worth_a_summary(&summary).then(|| summary.to_string())
}
