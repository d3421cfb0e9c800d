//! `engram bench corpus`: how fast a folder becomes a corpus on this machine — documents/s
//! reading mail and deduplicating with MinHash ([`engram_bench::corpus`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::print_line;

/// Arguments of `engram bench corpus`.
#[derive(Args, Debug)]
pub struct CorpusBenchArgs {
    /// The folder to read.
    #[arg(long, default_value = "../shared/data/enron-emails/maildir")]
    pub dir: PathBuf,
    /// Synthetic documents for the MinHash pass.
    #[arg(long, default_value_t = 100_000)]
    pub synthetic: usize,
    /// Words per synthetic document (each between half and all of it).
    #[arg(long, default_value_t = 200)]
    pub words: usize,
}

/// Runs `engram bench corpus`.
pub fn run(a: CorpusBenchArgs) -> Result<()> {
    let bench = engram_bench::CorpusBench {
        dir: a.dir,
        synthetic: a.synthetic,
        words: a.words,
    };
    engram_bench::corpus(&bench, &mut print_line)
}
