//! A corpus experiment's verified facts, made ready before any cell is planned: reused when
//! their settings hold, else generated (progress bars per stage), with one line saying which.

use anyhow::{Context, Result};
use engram_experiments::Experiment;
use engram_experiments::{FactsReady, prepare_facts};
use engram_io::Stop;
use engram_qa::QaError;

use crate::progress::Bars;
use crate::signals::{self, ExitStatus};

/// Builds or reuses the facts of `exp` (`rebuild`: also over a fact file of other settings).
pub fn prepare(exp: &Experiment, rebuild: bool, stop: &Stop, bars: &Bars) -> Result<()> {
    let ready = match prepare_facts(exp, rebuild, stop, bars) {
        Ok(r) => r,
        Err(engram_experiments::ExperimentError::Qa(e @ QaError::Stopped { signal, .. })) => {
            eprintln!("{e}");
            return Err(ExitStatus(signals::exit_status(signal)).into());
        }
        Err(e) => {
            return Err(e).context(format!(
                "building the verified facts of {}",
                exp.path.display()
            ));
        }
    };
    match ready {
        FactsReady::Reused { path, kept } => eprintln!(
            "facts: {kept} verified facts in {} (same QA settings: reused)",
            path.display()
        ),
        FactsReady::Built(s) => {
            let m = &s.manifest;
            let dropped: Vec<String> = m
                .dropped_by_reason
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            eprintln!(
                "facts: {} of {} pairs kept from {} documents → {} (dropped: {}; every check in {})",
                m.kept,
                m.pairs,
                m.documents,
                s.facts.display(),
                if dropped.is_empty() {
                    "none".to_string()
                } else {
                    dropped.join(", ")
                },
                s.dir.join("checks.jsonl").display()
            );
        }
    }
    Ok(())
}
