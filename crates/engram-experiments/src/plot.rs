//! The table as a picture: accuracy against the number of facts (log scale), one line per
//! method / rank, each point with its 95 % interval as a bar, as SVG (plotters' SVG backend; no
//! font or bitmap libraries involved).

use plotters::prelude::*;

use crate::table::{Entry, Table};

/// Renders `table` as an SVG document.
pub fn svg(table: &Table) -> String {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (760, 460)).into_drawing_area();
        draw(&root, table).expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    out
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    table: &Table,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let lo = table.sizes.first().copied().unwrap_or(1).max(1) as f64;
    let hi = table.sizes.last().copied().unwrap_or(10).max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("Accuracy vs facts: {}", table.experiment),
            ("sans-serif", 18),
        )
        .margin(14)
        .x_label_area_size(42)
        .y_label_area_size(52)
        .build_cartesian_2d((lo / 1.25..hi * 1.25).log_scale(), 0f64..1.02f64)?;
    chart
        .configure_mesh()
        .x_desc("facts (log scale)")
        .y_desc("accuracy")
        .x_label_formatter(&|x| format!("{:.0}", x))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()?;
    for (i, &m) in table.methods.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = table
            .sizes
            .iter()
            .filter_map(|&n| match table.entries.get(&(n, m)) {
                Some(Entry::Accuracy { value, .. }) => Some((n as f64, *value)),
                _ => None,
            })
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(m.header())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        // The intervals, nudged sideways per method so that bars at one size stay apart.
        let nudge = 1.0 + 0.012 * (i as f64 - (table.methods.len() as f64 - 1.0) / 2.0);
        let bars: Vec<(f64, f64, f64)> = table
            .sizes
            .iter()
            .filter_map(|&n| match table.entries.get(&(n, m)) {
                Some(Entry::Accuracy {
                    interval: Some(iv), ..
                }) => Some((n as f64 * nudge, iv.low, iv.high)),
                _ => None,
            })
            .collect();
        chart.draw_series(bars.iter().map(|&(x, lo, hi)| {
            PathElement::new(vec![(x, lo), (x, hi)], color.mix(0.7).stroke_width(2))
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}
