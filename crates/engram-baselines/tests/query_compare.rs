//! The figures of the generated-vs-real query comparison against NumPy and SciPy
//! (`tests/fixtures/query-compare/scipy.json`, made by `tests/peers/query_compare_reference.py`):
//! 40-bin histograms over [-1, 1], the Jensen–Shannon divergence (base 2), the two-sample
//! Kolmogorov–Smirnov statistic, mean, standard deviation and median, on seeded samples that are
//! alike, shifted, disjoint, tied and small.

use engram_baselines::rag::query_compare::{histogram, js_divergence, ks_statistic, summarize};
use serde_json::Value;

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn counts(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

#[test]
fn the_comparison_figures_match_scipy() {
    let path = engram_testkit::fixture("query-compare/scipy.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cases = fixture["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 5);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let (a, b) = (floats(&c["a"]), floats(&c["b"]));
        let (ha, hb) = (histogram(&a), histogram(&b));
        assert_eq!(ha, counts(&c["hist_a"]), "{name}: histogram a");
        assert_eq!(hb, counts(&c["hist_b"]), "{name}: histogram b");
        let js = js_divergence(&ha, &hb).unwrap();
        let want = c["js_divergence"].as_f64().unwrap();
        assert!((js - want).abs() < 1e-9, "{name}: JS {js} vs SciPy {want}");
        let ks = ks_statistic(&a, &b).unwrap();
        let want = c["ks_statistic"].as_f64().unwrap();
        assert!((ks - want).abs() < 1e-12, "{name}: KS {ks} vs SciPy {want}");
        let s = summarize(&a).unwrap();
        for (got, key) in [(s.mean, "mean_a"), (s.std, "std_a"), (s.median, "median_a")] {
            let want = c[key].as_f64().unwrap();
            assert!(
                (got - want).abs() < 1e-12,
                "{name}: {key} {got} vs NumPy {want}"
            );
        }
    }
}
