//! What engram's libraries share with the outside world, and nothing else.
//!
//! Start here: [`atomic`] writes files and directories so that an interrupted run never leaves
//! a half-written file under its final name (every record, adapter, checkpoint and rendered
//! table goes through it); [`progress`] is the interface through which libraries say what they
//! are doing — the `engram` binary turns it into progress bars and log lines, tests pass
//! [`progress::Quiet`]; [`host`] names the machine in files other processes read; [`error_text`] writes an error
//! and its causes on one line, each once; [`stop`] carries a signal's request
//! to stop into long work, which ends at its next safe point. No library below the binary prints.

mod atomic;
mod error_text;
mod host;
mod progress;
mod stop;

pub use atomic::{AtomicError, replace_dir, sibling, unique_sibling, write_file, write_jsonl};
pub use error_text::error_text;
pub use host::hostname;
pub use progress::{Progress, Quiet, or_quiet};
pub use stop::Stop;
