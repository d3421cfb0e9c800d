//! Generated queries against real ones (Chroma's generative benchmarking): are the questions QA
//! generation wrote like the questions people actually ask of these documents? Both sets are
//! embedded with one sentence encoder and compared by cosine similarity:
//!
//! - **query–document**: each query against the document that answers it — generated questions
//!   that copy their document's words sit closer to it than real ones do;
//! - **query–query**: each generated query against its nearest real query, beside each real
//!   query against its nearest *other* real query (how close real queries are to each other: the
//!   baseline), and generated against real queries about the same document;
//! - **divergence**: the Jensen–Shannon divergence (base 2: 0 for the same distribution, 1 for
//!   disjoint ones) between the two query–document histograms ([`HISTOGRAM_BINS`] bins over
//!   [-1, 1]) and the two-sample Kolmogorov–Smirnov statistic of the raw values — both checked
//!   against SciPy in the tests.
//!
//! Everything here works on unit-length embeddings (cosine = dot product), as
//! [`crate::rag::BertEncoder::encode`] gives them.

use serde::{Deserialize, Serialize};

/// Bins of the query–document histograms, over [-1, 1] (0.05 wide).
pub const HISTOGRAM_BINS: usize = 40;

/// A set of embedded queries and, where known, the index of the document each one asks about
/// (into the document embeddings given alongside).
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedQueries<'a> {
    /// Unit-length query embeddings.
    pub queries: &'a [Vec<f32>],
    /// Each query's document, if known.
    pub documents: &'a [Option<usize>],
}

/// A distribution in a few numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Values.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

/// [`Summary`] of `values`; `None` when there are none.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Some(Summary {
        n,
        mean,
        std: var.sqrt(),
        median,
        min: sorted[0],
        max: sorted[n - 1],
    })
}

/// Counts of `values` in [`HISTOGRAM_BINS`] equal bins over [-1, 1], binned as NumPy's
/// `histogram` bins them (edges `-1 + i·0.05`, a value on an edge in the bin it opens, the last
/// bin closed); values outside [-1, 1] (a cosine a rounding past 1) clamp to the end bins.
pub fn histogram(values: &[f64]) -> Vec<usize> {
    let bins = HISTOGRAM_BINS;
    let step = 2.0 / bins as f64;
    let edge = |i: usize| i as f64 * step - 1.0;
    let mut counts = vec![0; bins];
    for &v in values {
        let mut i = (((v + 1.0) * (bins as f64 / 2.0)).floor().max(0.0) as usize).min(bins - 1);
        if v < edge(i) && i > 0 {
            i -= 1;
        } else if i + 1 < bins && v >= edge(i + 1) {
            i += 1;
        }
        counts[i] += 1;
    }
    counts
}

/// Jensen–Shannon divergence, base 2, between two histograms (each normalized to sum 1);
/// `None` when either is empty.
pub fn js_divergence(p: &[usize], q: &[usize]) -> Option<f64> {
    let (sp, sq) = (p.iter().sum::<usize>(), q.iter().sum::<usize>());
    if sp == 0 || sq == 0 {
        return None;
    }
    let kl = |a: f64, m: f64| if a > 0.0 { a * (a / m).log2() } else { 0.0 };
    let mut js = 0.0;
    for (&a, &b) in p.iter().zip(q) {
        let (a, b) = (a as f64 / sp as f64, b as f64 / sq as f64);
        let m = (a + b) / 2.0;
        js += 0.5 * kl(a, m) + 0.5 * kl(b, m);
    }
    Some(js.max(0.0))
}

/// The two-sample Kolmogorov–Smirnov statistic: the largest gap between the two empirical
/// distribution functions; `None` when either sample is empty.
pub fn ks_statistic(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    Some(d)
}

/// What the comparison found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryComparison {
    /// Generated queries.
    pub generated: usize,
    /// Real queries.
    pub real: usize,
    /// Cosine of each generated query with its document.
    pub generated_query_document: Option<Summary>,
    /// Cosine of each real query with its document (those that name one).
    pub real_query_document: Option<Summary>,
    /// Cosine of each generated query with its nearest real query.
    pub generated_to_nearest_real: Option<Summary>,
    /// Cosine of each real query with its nearest other real query (the baseline of the line
    /// above).
    pub real_to_nearest_real: Option<Summary>,
    /// Cosine of generated and real queries about the same document (every such pair).
    pub same_document: Option<Summary>,
    /// Jensen–Shannon divergence (base 2) of the query–document histograms.
    pub js_divergence: Option<f64>,
    /// Kolmogorov–Smirnov statistic of the query–document cosines.
    pub ks_statistic: Option<f64>,
    /// The query–document histogram of the generated queries ([`histogram`]).
    pub generated_histogram: Vec<usize>,
    /// The query–document histogram of the real queries.
    pub real_histogram: Vec<usize>,
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64) * (*y as f64))
        .sum()
}

/// Cosine of each query that names a document with that document.
fn query_document(q: &EmbeddedQueries, docs: &[Vec<f32>]) -> Vec<f64> {
    q.queries
        .iter()
        .zip(q.documents)
        .filter_map(|(e, d)| d.map(|d| dot(e, &docs[d])))
        .collect()
}

/// For each of `from`, the largest cosine with one of `to` (skipping the same index when
/// `leave_one_out`, for a set against itself).
fn nearest(from: &[Vec<f32>], to: &[Vec<f32>], leave_one_out: bool) -> Vec<f64> {
    from.iter()
        .enumerate()
        .filter_map(|(i, f)| {
            to.iter()
                .enumerate()
                .filter(|(j, _)| !(leave_one_out && *j == i))
                .map(|(_, t)| dot(f, t))
                .max_by(f64::total_cmp)
        })
        .collect()
}

/// Compares `generated` with `real` queries over the document embeddings `docs` (see the module
/// docs).
pub fn compare_queries(
    docs: &[Vec<f32>],
    generated: EmbeddedQueries,
    real: EmbeddedQueries,
) -> QueryComparison {
    let qd_gen = query_document(&generated, docs);
    let qd_real = query_document(&real, docs);
    let mut same = Vec::new();
    for (g, gd) in generated.queries.iter().zip(generated.documents) {
        for (r, rd) in real.queries.iter().zip(real.documents) {
            if gd.is_some() && gd == rd {
                same.push(dot(g, r));
            }
        }
    }
    let (hg, hr) = (histogram(&qd_gen), histogram(&qd_real));
    QueryComparison {
        generated: generated.queries.len(),
        real: real.queries.len(),
        generated_query_document: summarize(&qd_gen),
        real_query_document: summarize(&qd_real),
        generated_to_nearest_real: summarize(&nearest(generated.queries, real.queries, false)),
        real_to_nearest_real: summarize(&nearest(real.queries, real.queries, true)),
        same_document: summarize(&same),
        js_divergence: js_divergence(&hg, &hr),
        ks_statistic: ks_statistic(&qd_gen, &qd_real),
        generated_histogram: hg,
        real_histogram: hr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn hand_worked_cases() {
        let s = summarize(&[3.0, 1.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.min, s.max),
            (4, 2.5, 2.5, 1.0, 4.0)
        );
        assert!((s.std - 1.25f64.sqrt()).abs() < 1e-12);
        assert!(summarize(&[]).is_none());

        let h = histogram(&[-1.0, -0.99, 0.0, 0.999, 1.0, 7.0]);
        assert_eq!((h[0], h[20], h[39]), (2, 1, 3));
        assert_eq!(js_divergence(&h, &h), Some(0.0));
        // Disjoint supports: 1 bit.
        let (mut p, mut q) = (vec![0; 4], vec![0; 4]);
        p[0] = 5;
        q[3] = 2;
        assert!((js_divergence(&p, &q).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(js_divergence(&p, &[0; 4]), None);

        assert_eq!(ks_statistic(&[1.0, 2.0], &[1.0, 2.0]), Some(0.0));
        assert_eq!(ks_statistic(&[1.0, 2.0], &[3.0, 4.0]), Some(1.0));
        assert_eq!(ks_statistic(&[1.0, 2.0, 3.0, 4.0], &[2.5]), Some(0.5));
    }

    #[test]
    fn queries_about_the_same_document_compare_as_built() {
        let docs = vec![unit(&[1.0, 0.0, 0.0]), unit(&[0.0, 1.0, 0.0])];
        let gen_q = vec![unit(&[1.0, 0.0, 0.0]), unit(&[0.0, 1.0, 1.0])];
        let gen_d = [Some(0), Some(1)];
        let real_q = vec![
            unit(&[1.0, 1.0, 0.0]),
            unit(&[0.0, 0.0, 1.0]),
            unit(&[1.0, 0.0, 1.0]),
        ];
        let real_d = [Some(0), Some(1), None];
        let c = compare_queries(
            &docs,
            EmbeddedQueries {
                queries: &gen_q,
                documents: &gen_d,
            },
            EmbeddedQueries {
                queries: &real_q,
                documents: &real_d,
            },
        );
        let r = 0.5f64.sqrt();
        assert_eq!((c.generated, c.real), (2, 3));
        let g = c.generated_query_document.unwrap();
        assert!((g.mean - (1.0 + r) / 2.0).abs() < 1e-6, "{g:?}");
        let q = c.real_query_document.unwrap();
        assert_eq!(q.n, 2);
        assert!((q.mean - r / 2.0).abs() < 1e-6, "{q:?}");
        // Generated [1,0,0] is nearest to real [1,1,0] or [1,0,1] (both √½); [0,1,1]/√2 to
        // [0,0,1] (√½) and [1,0,1]/√2 (½).
        let n = c.generated_to_nearest_real.unwrap();
        assert!((n.mean - r).abs() < 1e-6, "{n:?}");
        // Same document: doc 0 ([1,0,0] with [1,1,0]: √½), doc 1 ([0,1,1] with [0,0,1]: √½).
        let s = c.same_document.unwrap();
        assert_eq!(s.n, 2);
        assert!((s.mean - r).abs() < 1e-6);
        assert_eq!(c.generated_histogram.iter().sum::<usize>(), 2);
        assert_eq!(c.real_histogram.iter().sum::<usize>(), 2);
        assert!(c.js_divergence.unwrap() > 0.0 && c.ks_statistic.unwrap() > 0.0);
    }
}
