//! `engram selftest --backend B`: checks that a device computes what transformers computes, in
//! a minute or so ([`engram_bench::selftest`] says which checks); each check is printed as it
//! starts and ends, and the command fails naming every check that failed.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::bench::print_line;

/// Arguments of `engram selftest`.
#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// The backend to check: cpu, wgpu, cuda[:N].
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// The repository's test fixtures (tiny checkpoints with transformers' references).
    #[arg(long, default_value = "tests/fixtures")]
    pub fixtures: PathBuf,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs `engram selftest`.
pub fn run(a: SelftestArgs) -> Result<()> {
    let check = engram_bench::Selftest {
        backend: a.backend,
        fixtures: a.fixtures,
        json: a.json,
    };
    engram_bench::selftest(&check, &mut print_line)
}
