//! The generated-vs-real comparison as a picture: the two query–document cosine histograms of
//! [`crate::rag::query_compare`] as step lines (share of queries per bin), with the divergence
//! in the caption. SVG through plotters' SVG backend (no font or bitmap libraries).

use plotters::prelude::*;

use crate::rag::query_compare::{HISTOGRAM_BINS, QueryComparison};

/// Renders `c` as an SVG document.
pub fn svg(c: &QueryComparison) -> String {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (760, 440)).into_drawing_area();
        draw(&root, c).expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    out
}

/// A histogram as the corner points of its steps, heights as shares of its total.
fn steps(counts: &[usize]) -> Vec<(f64, f64)> {
    let total = counts.iter().sum::<usize>().max(1) as f64;
    let width = 2.0 / HISTOGRAM_BINS as f64;
    let mut pts = vec![(-1.0, 0.0)];
    for (i, &n) in counts.iter().enumerate() {
        let (lo, hi) = (-1.0 + i as f64 * width, -1.0 + (i + 1) as f64 * width);
        let y = n as f64 / total;
        pts.push((lo, y));
        pts.push((hi, y));
    }
    pts.push((1.0, 0.0));
    pts
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    c: &QueryComparison,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let (g, r) = (steps(&c.generated_histogram), steps(&c.real_histogram));
    let top = g.iter().chain(&r).map(|p| p.1).fold(0.05, f64::max) * 1.1;
    let figure = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.3}"));
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "Query–document cosine: generated vs real (JS divergence {}, KS {})",
                figure(c.js_divergence),
                figure(c.ks_statistic)
            ),
            ("sans-serif", 16),
        )
        .margin(14)
        .x_label_area_size(42)
        .y_label_area_size(52)
        .build_cartesian_2d(-1f64..1f64, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("cosine similarity of a query with its document")
        .y_desc("share of queries")
        .x_label_formatter(&|x| format!("{x:.1}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()?;
    let series = [
        (format!("generated ({})", c.generated), g, BLUE.to_rgba()),
        (format!("real ({})", c.real), r, RED.to_rgba()),
    ];
    for (label, pts, color) in series {
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
