//! The memorization curves as a picture (`curves.svg`): for every LoRA cell whose record has a
//! curve (`eval_every`), the greedy exact match on its sample of trained questions against the
//! epoch, one panel per fact count, one colour per rank (its replicates share it).

use std::collections::BTreeMap;

use plotters::prelude::*;

use crate::cells::Method;
use crate::record::{CellRecord, CellStatus, MethodMetrics};

/// One cell's curve: (facts, rank, replicate, points).
type Curve<'a> = (usize, usize, usize, &'a [(usize, f64)]);

/// Renders the curves of `records` as an SVG document, `None` when no record has one.
pub fn svg(records: &[CellRecord]) -> Option<String> {
    let curves: Vec<Curve> = records
        .iter()
        .filter(|r| r.status == CellStatus::Done)
        .filter_map(|r| match (&r.cell.method, &r.metrics.method) {
            (Method::Lora { rank }, Some(MethodMetrics::Lora { curve, .. }))
                if !curve.is_empty() =>
            {
                Some((r.cell.facts, *rank, r.cell.replicate, curve.as_slice()))
            }
            _ => None,
        })
        .collect();
    if curves.is_empty() {
        return None;
    }
    let mut out = String::new();
    {
        let sizes = distinct(&curves, |c| c.0);
        let width = 40 + 380 * sizes.len() as u32;
        let root = SVGBackend::with_string(&mut out, (width, 400)).into_drawing_area();
        draw(&root, &sizes, &curves).expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    Some(out)
}

/// The distinct values of `key` over `curves`, ascending.
fn distinct(curves: &[Curve], key: impl Fn(&Curve) -> usize) -> Vec<usize> {
    let set: std::collections::BTreeSet<usize> = curves.iter().map(key).collect();
    set.into_iter().collect()
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    sizes: &[usize],
    curves: &[Curve],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let ranks = distinct(curves, |c| c.1);
    let color =
        |rank: usize| Palette99::pick(ranks.iter().position(|&r| r == rank).unwrap_or(0)).to_rgba();
    let last_epoch = curves
        .iter()
        .flat_map(|c| c.3.iter().map(|p| p.0))
        .max()
        .unwrap_or(1);
    for (panel, &n) in root.split_evenly((1, sizes.len())).iter().zip(sizes) {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{n} facts: exact match on trained questions"),
                ("sans-serif", 15),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0f64..last_epoch as f64 + 0.5, 0f64..1.02f64)?;
        chart
            .configure_mesh()
            .x_desc("epoch")
            .y_desc("exact match")
            .y_label_formatter(&|y| format!("{y:.1}"))
            .draw()?;
        let mut labelled = BTreeMap::new();
        for &(facts, rank, replicate, points) in curves {
            if facts != n {
                continue;
            }
            let c = color(rank);
            // Replicates nudged apart so that equal curves stay visible.
            let dx = 0.08 * replicate as f64;
            let pts: Vec<(f64, f64)> = points.iter().map(|&(e, m)| (e as f64 + dx, m)).collect();
            let series = chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?;
            if labelled.insert(rank, ()).is_none() {
                series
                    .label(format!("LoRA r={rank}"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                    });
            }
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()?;
    }
    Ok(())
}
