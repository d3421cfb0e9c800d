//! `engram table`: render a results directory as the memorization table (Markdown, CSV), an SVG
//! plot and the per-fact view.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use engram_experiments::Reference;
use engram_experiments::render_dir;

/// Where `--compare paper` looks for EnronQA's published Table 5.
pub const PAPER_TABLE: &str = "configs/paper/enronqa-table5.csv";

/// Arguments of `engram table`.
#[derive(Args, Debug)]
pub struct TableArgs {
    /// The results directory (e.g. results/smoke).
    pub results: PathBuf,
    /// Reference values beside the measured ones: `paper` (EnronQA Table 5, from
    /// configs/paper/enronqa-table5.csv) or a CSV in the table's layout.
    #[arg(long)]
    pub compare: Option<String>,
    /// Compare two methods on the same facts: the paired difference of their accuracies with
    /// its interval and the exact sign test over facts, at every fact count (methods by slug or header:
    /// lora-r8, rag, long-context, "LoRA r=64").
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub paired: Option<Vec<String>>,
}

/// Runs `engram table`.
pub fn run(a: TableArgs) -> Result<()> {
    let reference = match a.compare.as_deref() {
        None => None,
        Some(spec) => {
            let path = PathBuf::from(if spec == "paper" { PAPER_TABLE } else { spec });
            if !path.is_file() {
                if spec == "paper" {
                    bail!(
                        "{PAPER_TABLE} is missing: engram does not ship the paper's Table 5 values; \
                         transcribe them from arXiv 2505.00263 §6 into that file (columns: facts, \
                         Long Context, RAG, LoRA r=8, …) or pass --compare FILE"
                    );
                }
                bail!("--compare {spec}: no such file");
            }
            Some(Reference::read(&path)?)
        }
    };
    let r = render_dir(&a.results, reference.as_ref())
        .with_context(|| format!("rendering {}", a.results.display()))?;
    for c in &r.corrupt {
        eprintln!("warning: {c} — not used (rerun the sweep to run the cell again)");
    }
    if let Some(why) = &r.plan_unreadable {
        eprintln!(
            "warning: {why} — records of an earlier configuration are not marked (a sweep of \
             the experiment writes it again)"
        );
    }
    println!("{}", r.markdown);
    for f in &r.files {
        eprintln!("wrote {}", f.display());
    }
    if let Some(names) = &a.paired {
        let (first, second) = (
            r.table.method_named(&names[0])?,
            r.table.method_named(&names[1])?,
        );
        let rows = r.table.paired_rows(first, second);
        if rows.is_empty() {
            bail!(
                "{} and {} have no fact count where both have judged answers",
                first.header(),
                second.header()
            );
        }
        println!(
            "\n{} − {} (same facts; 95 % bootstrap interval over the facts; the exact sign test over the facts each did better on, McNemar's with one run each)\n",
            first.header(),
            second.header()
        );
        println!(
            "| Facts | Difference [95 %] | {0} better | {1} better | Pairs of runs | Sign test p |",
            first.header(),
            second.header()
        );
        println!("|---:|---:|---:|---:|---:|---:|");
        for (n, p) in rows {
            println!(
                "| {n} | {} | {} | {} | {} | {} |",
                engram_experiments::difference_text(&p),
                p.first_better,
                p.second_better,
                p.pairs,
                engram_experiments::p_text(p.p_value)
            );
        }
    }
    Ok(())
}
