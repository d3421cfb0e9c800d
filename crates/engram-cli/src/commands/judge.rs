//! `engram judge`: score an answers file (from `engram answer`) with an offline judge or an LLM
//! judge, writing one verdict per answer (with the judge's name and raw output) as JSONL; with
//! `--calibrate LABELS.jsonl`, score human-labelled answers instead and report each judge's
//! agreement with the labels (the chosen judge's and the offline judges').

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use engram_judge::{
    Calibration, Judge, JudgeFlags, JudgeItem, LabelledAnswer, Verdict, calibrate_with_offline,
    read_answers, read_labels, write_verdicts,
};

/// Arguments of `engram judge`.
#[derive(Args, Debug)]
pub struct JudgeArgs {
    /// Answers (JSONL from `engram answer`).
    #[arg(
        long,
        required_unless_present = "calibrate",
        conflicts_with = "calibrate"
    )]
    pub answers: Option<PathBuf>,
    /// Human-labelled answers (JSONL: id, question, gold, answer, label = correct|incorrect):
    /// judge them and report agreement, precision/recall of "correct", Cohen's kappa and the
    /// confusion matrix — for this judge and for the offline judges — beside the verdicts
    /// (`OUT` with the extension `.calibration.json`).
    #[arg(long, value_name = "LABELS")]
    pub calibrate: Option<PathBuf>,
    /// Where to write the verdicts (JSONL).
    #[arg(long)]
    pub out: PathBuf,
    /// A judge preset (`configs/judges/*.toml`, as sweeps use them) instead of the flags below
    /// (each of which is then an error: the preset sets it; `--cache` applies to a preset that
    /// names no cache).
    #[arg(long, conflicts_with_all = [
        "judge", "f1_threshold", "recall_threshold", "base_url", "judge_model", "api_key_env",
        "prompt", "verdict_format", "concurrency",
    ])]
    pub preset: Option<PathBuf>,
    /// The persistent judge cache (also for a preset that names none).
    #[arg(long, default_value = "results/judge-cache.jsonl")]
    pub cache: PathBuf,
    #[command(flatten, next_help_heading = "Judge (without --preset)")]
    pub flags: JudgeFlags,
}

/// Runs `engram judge`.
pub fn run(a: JudgeArgs) -> Result<()> {
    let labels = match &a.calibrate {
        Some(path) => Some(read_labels(path)?),
        None => None,
    };
    let items = match (&labels, &a.answers) {
        (Some(labels), _) => labels.iter().map(LabelledAnswer::item).collect(),
        (None, Some(answers)) => read_answers(answers)?,
        (None, None) => unreachable!("clap requires --answers or --calibrate"),
    };
    let (preset, base) = match &a.preset {
        Some(path) => crate::judge_arg::preset_file(path)?,
        None => (a.flags.preset(&a.cache), PathBuf::from(".")),
    };
    let judge = preset.build(&base, &a.cache)?;
    let verdicts = judge_all(judge.as_ref(), &items)?;
    write_verdicts(&a.out, &verdicts)?;
    let judged = verdicts.iter().filter(|v| v.correct.is_some()).count();
    let correct = verdicts.iter().filter(|v| v.correct == Some(true)).count();
    let followed = verdicts.iter().filter(|v| v.follow_up.is_some()).count();
    println!(
        "{}: {correct}/{} correct ({} without a verdict, {followed} after a follow-up) → {}",
        judge.name(),
        verdicts.len(),
        verdicts.len() - judged,
        a.out.display()
    );
    if let Some(labels) = labels {
        let rows = calibrate_with_offline(&judge.name(), &labels, &verdicts)?;
        let path = a.out.with_extension("calibration.json");
        engram_io::write_file(&path, serde_json::to_string_pretty(&rows)?.as_bytes())?;
        print_calibration(&rows, &path);
    }
    Ok(())
}

/// The judge's verdicts, its notes printed as they come (also when it fails).
fn judge_all(judge: &dyn Judge, items: &[JudgeItem]) -> Result<Vec<Verdict>> {
    for note in judge.notes() {
        eprintln!("{note}");
    }
    let verdicts = judge.judge(items);
    for note in judge.notes() {
        eprintln!("{note}");
    }
    Ok(verdicts?)
}

fn print_calibration(rows: &[Calibration], path: &Path) {
    let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    println!(
        "{:<40} {:>9} {:>9} {:>9} {:>7} {:>7}   label correct → judged c/i/none   label incorrect → c/i/none",
        "judge", "verdicts", "agreement", "precision", "recall", "kappa"
    );
    for r in rows {
        let c = &r.confusion;
        println!(
            "{:<40} {:>9} {:>9.3} {:>9} {:>7} {:>7}   {:>3} / {:>3} / {:>3}                   {:>3} / {:>3} / {:>3}",
            r.judge,
            format!("{}/{}", r.verdicts, r.answers),
            r.agreement,
            opt(r.precision),
            opt(r.recall),
            opt(r.kappa),
            c.correct_correct,
            c.correct_incorrect,
            c.correct_none,
            c.incorrect_correct,
            c.incorrect_incorrect,
            c.incorrect_none,
        );
    }
    println!(
        "(no verdict counts as incorrect in every figure) → {}",
        path.display()
    );
}
