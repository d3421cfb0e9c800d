//! CPU training gives the same bits on machines whose caches differ. gemm, under Burn's CPU
//! backend, used to size its K blocks from the L1 data cache the machine reports, and the block
//! depth decides the order of each output's sums; engram's patched gemm-common
//! (`vendor/gemm-common/ENGRAM-PATCH.md`) fixes it. Here two "machines" are two processes told
//! of different L1 caches (`GEMM_COMMON_L1D`): Zen 4's 32 KiB 8-way and Zen 5's 48 KiB 12-way.

mod common;

use common::{engram, run};

/// The per-epoch losses (as written, every bit) of a short CPU training run on the tiny
/// fixture with `env` set.
fn losses(env: &[(&str, &str)]) -> Vec<String> {
    let out = tempfile::tempdir().unwrap();
    let mut c = engram();
    c.current_dir(engram_testkit::repo())
        .env_remove("GEMM_KC")
        .env_remove("GEMM_COMMON_L1D");
    for (k, v) in env {
        c.env(k, v);
    }
    let (ok, _, err) = run(c
        .args([
            "train",
            "--backend",
            "cpu",
            "--model",
            "tests/fixtures/tiny-f32",
            "--facts",
            "tests/fixtures/facts/synthetic-20.jsonl",
            "--rank",
            "8",
            "--epochs",
            "2",
            "--lr",
            "1e-2",
            "--batch-size",
            "8",
            "--no-checkpoints",
            "--out",
        ])
        .arg(out.path()));
    assert!(ok, "{err}");
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join(engram_lora::TRAIN_RECORD)).unwrap())
            .unwrap();
    rec["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["loss"].to_string())
        .collect()
}

const ZEN4: (&str, &str) = ("GEMM_COMMON_L1D", "32768,8");
const ZEN5: (&str, &str) = ("GEMM_COMMON_L1D", "49152,12");

#[test]
fn cpu_training_is_bit_identical_whatever_l1_cache_the_machine_reports() {
    // The parameter matters: with gemm's own choice the two caches give other bits.
    let auto4 = losses(&[ZEN4, ("GEMM_KC", "auto")]);
    let auto5 = losses(&[ZEN5, ("GEMM_KC", "auto")]);
    assert_ne!(
        auto4, auto5,
        "the L1 cache changed nothing: the test tests nothing"
    );
    // Fixed (the default), both give the same bits, which are what a 32 KiB 8-way L1 gave.
    let fixed4 = losses(&[ZEN4]);
    let fixed5 = losses(&[ZEN5]);
    assert_eq!(fixed4, fixed5);
    assert_eq!(fixed4, auto4);
    assert_eq!(fixed4, losses(&[]));
}
