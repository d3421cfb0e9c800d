//! The per-fact view: which facts each method answers right at each size, and which it loses
//! (right at one size, wrong at the next larger one) as the number of facts grows; and each
//! LoRA cell's training curve (its loss per epoch).

use std::collections::BTreeMap;

use crate::cells::Method;
use crate::record::{CellRecord, CellStatus};

/// Facts shown in the Markdown grid (the CSV has every fact).
const GRID_ROWS: usize = 200;

/// A fact's outcome in one cell.
fn mark(rec: &CellRecord, id: &str) -> &'static str {
    if rec.status == CellStatus::Na {
        return "NA";
    }
    match rec.questions.iter().find(|q| q.id == id) {
        None => "",
        Some(q) => match q.correct {
            Some(true) => "✓",
            Some(false) => "✗",
            None => "?",
        },
    }
}

/// Fact ids in sample order: the smallest sample's facts first (samples are nested).
fn fact_order(records: &[&CellRecord]) -> Vec<String> {
    let mut by_size: Vec<&&CellRecord> = records.iter().collect();
    by_size.sort_by_key(|r| r.cell.facts);
    let mut seen = std::collections::BTreeSet::new();
    let mut order = Vec::new();
    for r in by_size {
        for q in &r.questions {
            if seen.insert(q.id.clone()) {
                order.push(q.id.clone());
            }
        }
    }
    order
}

fn done(records: &[CellRecord]) -> Vec<&CellRecord> {
    let mut v: Vec<&CellRecord> = records
        .iter()
        .filter(|r| r.status != CellStatus::Failed)
        .collect();
    v.sort_by_key(|r| (r.cell.method, r.cell.replicate, r.cell.facts));
    v
}

/// A method's label: `LoRA r=8`, and ` rep1` for a further replicate.
fn method_label(method: Method, replicate: usize) -> String {
    match replicate {
        0 => method.header(),
        k => format!("{} rep{k}", method.header()),
    }
}

/// A cell's column label: `n10 LoRA r=8`, `n10 LoRA r=8 rep1`.
fn label(r: &CellRecord) -> String {
    format!(
        "n{} {}",
        r.cell.facts,
        method_label(r.cell.method, r.cell.replicate)
    )
}

/// CSV: one row per fact, one column per cell (`n10 LoRA r=8`), ✓ / ✗ / NA / empty (not in
/// that sample).
pub fn csv(records: &[CellRecord]) -> String {
    let recs = done(records);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["fact".to_string()];
    header.extend(recs.iter().map(|r| label(r)));
    w.write_record(&header).expect("in-memory csv");
    for id in fact_order(&recs) {
        let mut row = vec![id.clone()];
        row.extend(recs.iter().map(|r| mark(r, &id).to_string()));
        w.write_record(&row).expect("in-memory csv");
    }
    String::from_utf8(w.into_inner().expect("flush")).expect("utf-8")
}

/// Markdown: per method, facts lost and gained between consecutive sizes (among facts in both
/// samples), then the full grid.
pub fn markdown(records: &[CellRecord]) -> String {
    let recs = done(records);
    let mut by_method: BTreeMap<(Method, usize), Vec<&CellRecord>> = BTreeMap::new();
    for r in &recs {
        by_method
            .entry((r.cell.method, r.cell.replicate))
            .or_default()
            .push(r);
    }
    let mut s = String::from("# Per-fact view\n\n## Facts lost as the number of facts grows\n\n");
    s.push_str("Among the facts of the smaller sample: answered right there, wrong at the larger size (lost), or the reverse (gained).\n\n");
    s.push_str("| Method | Sizes | Lost | Gained | Lost facts |\n|---|---|---:|---:|---|\n");
    for (&(m, rep), rs) in &by_method {
        let name = method_label(m, rep);
        for pair in rs.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.status == CellStatus::Na || b.status == CellStatus::Na {
                continue;
            }
            let (mut lost, mut gained) = (Vec::new(), 0);
            for q in &a.questions {
                let before = q.correct == Some(true);
                let after = b
                    .questions
                    .iter()
                    .find(|x| x.id == q.id)
                    .is_some_and(|x| x.correct == Some(true));
                if before && !after {
                    lost.push(q.id.clone());
                } else if !before && after {
                    gained += 1;
                }
            }
            let shown = if lost.len() > 8 {
                format!("{} …", lost[..8].join(", "))
            } else {
                lost.join(", ")
            };
            s.push_str(&format!(
                "| {name} | {} → {} | {} | {gained} | {shown} |\n",
                a.cell.facts,
                b.cell.facts,
                lost.len()
            ));
        }
    }
    let order = fact_order(&recs);
    s.push_str(
        "\n## Every fact\n\n✓ right, ✗ wrong, NA not applicable, empty: not in that sample.",
    );
    if order.len() > GRID_ROWS {
        s.push_str(&format!(
            " The first {GRID_ROWS} of {} facts (all of them in per_fact.csv).",
            order.len()
        ));
    }
    s.push_str("\n\n| Fact |");
    for r in &recs {
        s.push_str(&format!(" {} |", label(r)));
    }
    s.push_str("\n|---|");
    for _ in &recs {
        s.push_str(":-:|");
    }
    s.push('\n');
    for id in order.iter().take(GRID_ROWS) {
        s.push_str(&format!("| {id} |"));
        for r in &recs {
            s.push_str(&format!(" {} |", mark(r, id)));
        }
        s.push('\n');
    }
    s.push_str(&curves(&recs));
    s
}

/// Each LoRA cell's mean loss per epoch (records that keep it), its memorization curve where it
/// has one (`eval_every`), with its health ([`crate::health`]): the training curves behind the
/// table's `diverged` and `collapsed`.
fn curves(recs: &[&CellRecord]) -> String {
    type Row<'a> = (String, &'a Vec<f64>, &'a Vec<(usize, f64)>, String);
    let rows: Vec<Row> = recs
        .iter()
        .filter_map(|r| match &r.metrics.method {
            Some(crate::record::MethodMetrics::Lora {
                epoch_losses,
                curve,
                ..
            }) if !epoch_losses.is_empty() => {
                let health = match crate::health::health_of(r) {
                    crate::health::Health::Fine => "fine".to_string(),
                    h => format!("{}: {}", h.kind(), h.why()),
                };
                Some((label(r), epoch_losses, curve, health))
            }
            _ => None,
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let with_curves = rows.iter().any(|r| !r.2.is_empty());
    let (said, column, rule) = if with_curves {
        (
            ", its greedy exact match on a fixed sample of the trained (rephrased) questions at the epochs `eval_every` asked (epoch: exact match)",
            " Exact match during training |",
            "---|",
        )
    } else {
        ("", "", "")
    };
    let mut s = format!(
        "\n## Training curves\n\nEach LoRA cell's mean loss per epoch{said}, and how its training went.\n\n| Cell | Loss per epoch |{column} Training |\n|---|---|{rule}---|\n"
    );
    for (name, losses, curve, health) in rows {
        let text: Vec<String> = losses.iter().map(|l| format!("{l:.3}")).collect();
        let em = match (with_curves, curve.is_empty()) {
            (false, _) => String::new(),
            (true, true) => " — |".to_string(),
            (true, false) => {
                let points: Vec<String> =
                    curve.iter().map(|(e, m)| format!("{e}: {m:.2}")).collect();
                format!(" {} |", points.join(", "))
            }
        };
        s.push_str(&format!(
            "| {name} | {} |{em} {health} |\n",
            text.join(", ")
        ));
    }
    s
}
