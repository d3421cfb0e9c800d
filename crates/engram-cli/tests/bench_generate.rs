//! `engram bench generate` on the real SmolLM2 GGUF beside a real llama.cpp (PyPI `xllamacpp`,
//! run by `tests/peers/llamacpp_generate_bench.py` with the Python that
//! `ENGRAM_TEST_PEER_PYTHON` names; `scripts/test.sh` makes one).

mod common;

use common::{engram, run};

/// `engram bench generate` on SmolLM2 (one timed repeat, 2 peer threads) with `args` after.
fn bench(args: &[&str]) -> (bool, String, String) {
    run(engram()
        .args(["bench", "generate", "--model", "smollm2-135m-instruct"])
        .args(["--repeats", "1", "--threads", "2"])
        .args(args))
}

/// The figures of the row that starts with `batch` and `engine`: prefill and decode tokens/s.
fn row(out: &str, batch: usize, engine: &str) -> Option<(f64, f64)> {
    out.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix(&batch.to_string())?;
        let rest = rest.trim_start().strip_prefix(engine)?;
        let mut nums = rest.split_whitespace().map(|w| w.parse::<f64>());
        Some((nums.next()?.ok()?, nums.next()?.ok()?))
    })
}

/// The range of `a / b` printed to ± `q`, for `a` and `b` printed to ± `h` each.
fn rounded_quotient_range(a: f64, b: f64, h: f64, q: f64) -> (f64, f64) {
    (
        (a - h) / (b + h) - q,
        (a + h) / (b - h).max(f64::MIN_POSITIVE) + q,
    )
}

#[test]
fn rounding_ranges_hold_the_true_ratio_and_no_other() {
    // The case that failed a CI run: 41.8 over a peer printed as 0.7, shown as 58.20×.
    let (lo, hi) = rounded_quotient_range(41.8, 0.7, 0.05, 0.005);
    assert!(lo <= 58.20 && 58.20 <= hi, "[{lo}, {hi}]");
    // A ratio column that printed the inverse, or a ratio off by a tenth, is out of range.
    assert!(!(lo..=hi).contains(&(0.7 / 41.8)));
    let (lo, hi) = rounded_quotient_range(120.0, 60.0, 0.05, 0.005);
    assert!(
        (lo..=hi).contains(&2.0) && !(lo..=hi).contains(&2.2),
        "[{lo}, {hi}]"
    );
}

#[test]
fn llama_cpp_is_measured_on_the_same_file_beside_both_matmul_modes() {
    let Ok(python) = std::env::var("ENGRAM_TEST_PEER_PYTHON") else {
        eprintln!("SKIPPED: ENGRAM_TEST_PEER_PYTHON (a Python with xllamacpp) is not set");
        return;
    };
    let (ok, out, err) = bench(&[
        "--batch",
        "1,3",
        "--new-tokens",
        "4",
        "--matmul",
        "exact,q8",
        "--peer",
        "llama.cpp",
        "--peer-python",
        &python,
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("SIMD"), "the machine line: {out}");
    for batch in [1, 3] {
        for engine in ["engram exact", "engram q8", "llama.cpp"] {
            let (prefill, decode) =
                row(&out, batch, engine).unwrap_or_else(|| panic!("{engine} {batch}: {out}"));
            assert!(prefill > 0.0 && decode > 0.0, "{engine} {batch}: {out}");
        }
    }
    assert!(!out.contains("not measured"), "{out}");
    // The peer's ratio column is engram's figure over the peer's: the printed figures are
    // rounded (decode to 0.1 tok/s, the ratio to 0.01), so the ratio must lie in the range
    // their rounding allows — wide when the peer is slow (0.7 ± 0.05 is ±7 %), tight otherwise.
    let (_, ours) = row(&out, 1, "engram exact").unwrap();
    let (_, theirs) = row(&out, 1, "llama.cpp").unwrap();
    let ratio = out
        .lines()
        .find(|l| l.trim_start().starts_with("1  llama.cpp"))
        .and_then(|l| l.split_whitespace().nth(5))
        .and_then(|w| w.trim_end_matches('x').parse::<f64>().ok())
        .unwrap();
    let (lo, hi) = rounded_quotient_range(ours, theirs, 0.05, 0.005);
    assert!(
        lo <= ratio && ratio <= hi,
        "{ratio} not in [{lo}, {hi}]: {out}"
    );
    // Greedy agreement: every row of a batch counted against engram exact's tokens and
    // llama.cpp's (whose ids the script read back from the server).
    let column = |engine: &str, batch: usize, field: usize| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{batch}  {engine}")))
            .and_then(|l| l.split_whitespace().nth(field).map(str::to_owned))
            .unwrap_or_else(|| panic!("{engine} {batch}: {out}"))
    };
    for batch in [1, 3] {
        let of = format!("/{batch}");
        assert_eq!(
            column("engram exact", batch, 5),
            format!("{batch}/{batch}"),
            "{out}"
        );
        assert!(column("engram exact", batch, 6).ends_with(&of), "{out}");
        assert!(column("engram q8", batch, 6).ends_with(&of), "{out}");
        assert!(column("llama.cpp", batch, 6).ends_with(&of), "{out}");
    }
    // The log-probability drift of llama.cpp's 12 greedy tokens of the batch of 3, each scored
    // by engram after the same tokens: llama.cpp's Q8 activations and engram's q8 both move
    // them from engram exact's (f32) values, by a fraction of a nat, never by nothing.
    let drift = out
        .lines()
        .find(|l| l.starts_with("log-probabilities of llama.cpp's 12 greedy tokens (3 prompts)"))
        .unwrap_or_else(|| panic!("no drift line: {out}"));
    let maxima: Vec<f64> = drift
        .split("max ")
        .skip(1)
        .map(|w| w.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(maxima.len(), 2, "llama.cpp's and q8's: {drift}");
    assert!(
        maxima.iter().all(|&m| m > 0.0 && m < 1.0),
        "{maxima:?}: {drift}"
    );
}

#[test]
fn a_peer_that_cannot_run_is_named_and_the_rest_is_measured() {
    let (ok, out, err) = bench(&[
        "--batch",
        "1",
        "--new-tokens",
        "2",
        "--peer",
        "transformers,llama.cpp",
        "--peer-python",
        "/nonexistent/python",
    ]);
    assert!(ok, "{err}");
    assert!(row(&out, 1, "engram exact").is_some(), "{out}");
    for peer in ["transformers", "llama.cpp"] {
        assert!(
            out.contains(&format!("{peer} not measured: running /nonexistent/python")),
            "{out}"
        );
    }
}
