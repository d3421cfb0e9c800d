//! The GPU compile work, shown: while CubeCL compiles kernels a live line on the terminal
//! ("compiling GPU kernels: 120, 34 s — cached for next time"), plain lines every
//! [`PLAIN_EVERY`] in batch logs; at the end of the command one summary line
//! ([`engram_model::kernel_cache::summary`]) and any kernel-cache warning, once.

use std::io::IsTerminal;
use std::time::Duration;

use engram_model::kernel_cache::{self, CompileActivity, CompileSummary};
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

fn live_text(a: &CompileActivity) -> String {
    let cached = match kernel_cache::state().and_then(|s| s.database.as_ref()) {
        Some(_) => "cached for next time",
        None => "no kernel cache",
    };
    format!(
        "compiling GPU kernels: {}, {:.0} s — {cached}",
        a.compiled,
        a.since_first.unwrap_or_default().as_secs_f64()
    )
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
                b.set_message(live_text(&a));
            } else if a.since_last.is_none_or(|d| d >= IDLE)
                && let Some(b) = bar.take()
            {
                b.finish_and_clear();
                shown = a.compiled;
            }
        } else if busy && last_plain.is_none_or(|t| t.elapsed() >= PLAIN_EVERY) {
            eprintln!("{}", live_text(&a));
            last_plain = Some(std::time::Instant::now());
        }
    }
}

/// The end-of-command line, where a GPU backend was used: `None` otherwise.
pub fn summary_line() -> Option<String> {
    kernel_cache::state()?;
    Some(describe(&kernel_cache::summary()))
}

/// `s` for people.
pub fn describe(s: &CompileSummary) -> String {
    let seconds = s
        .compile_seconds
        .map_or(String::new(), |t| format!(" in {t:.1} s"));
    let loaded = s
        .kernels_loaded
        .map_or(String::new(), |n| format!(", {n} loaded from the cache"));
    let cache = s.cache.as_ref().map_or("no kernel cache".to_string(), |p| {
        format!("cache {}", p.display())
    });
    format!(
        "GPU kernels: {} compiled{seconds}{loaded}, {} autotune decisions ({cache})",
        s.kernels_compiled, s.autotune_decisions
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_reads_as_a_sentence() {
        let s = CompileSummary {
            kernels_compiled: 463,
            compile_seconds: Some(93.04),
            kernels_loaded: Some(2),
            autotune_decisions: 36,
            cache: Some("/c/engram-0.1.0.db".into()),
        };
        assert_eq!(
            describe(&s),
            "GPU kernels: 463 compiled in 93.0 s, 2 loaded from the cache, 36 autotune \
             decisions (cache /c/engram-0.1.0.db)"
        );
        let none = CompileSummary::default();
        assert_eq!(
            describe(&none),
            "GPU kernels: 0 compiled, 0 autotune decisions (no kernel cache)"
        );
    }
}
