//! The table's statistics against SciPy and statsmodels on fixed inputs
//! (`tests/fixtures/stats/reference.json`, made by `tests/peers/make_stats_fixture.py`).

use engram_experiments::{BOOTSTRAP_RESAMPLES, Z95, bootstrap, mcnemar_exact, wilson};
use serde_json::Value;

fn reference() -> Value {
    let path = engram_testkit::fixture("stats/reference.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn wilson_intervals_are_scipy_s() {
    for case in reference()["wilson_95"].as_array().unwrap() {
        let (k, n) = (num(case, "correct") as usize, num(case, "n") as usize);
        let got = wilson(k, n, Z95).unwrap();
        for (g, w) in [(got.low, num(case, "low")), (got.high, num(case, "high"))] {
            assert!((g - w).abs() < 1e-12, "{k}/{n}: {got:?} vs SciPy {case}");
        }
    }
}

#[test]
fn mcnemar_p_values_are_statsmodels_s() {
    for case in reference()["mcnemar_exact"].as_array().unwrap() {
        let (b, c) = (
            num(case, "only_first") as usize,
            num(case, "only_second") as usize,
        );
        let (got, want) = (mcnemar_exact(b, c), num(case, "p_value"));
        assert!(
            (got - want).abs() <= 1e-12 + 1e-9 * want,
            "b {b}, c {c}: {got} vs statsmodels {want}"
        );
    }
}

#[test]
fn the_bootstrap_lands_where_scipy_s_does() {
    // Both draw at random, so they agree within Monte-Carlo noise, not to the bit.
    for case in reference()["bootstrap_percentile_95"].as_array().unwrap() {
        let x: Vec<f64> = case["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let got = bootstrap(std::slice::from_ref(&x), BOOTSTRAP_RESAMPLES, 11).unwrap();
        let step = 1.0 / x.len() as f64;
        for (g, w) in [(got.low, num(case, "low")), (got.high, num(case, "high"))] {
            assert!(
                (g - w).abs() <= step + 1e-9,
                "n {}: {got:?} vs SciPy [{}, {}]",
                x.len(),
                num(case, "low"),
                num(case, "high")
            );
        }
    }
}
