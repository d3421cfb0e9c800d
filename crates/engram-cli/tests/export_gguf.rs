//! `engram export --format gguf` proven with the real llama.cpp: a random rank-8 adapter on every
//! linear layer of SmolLM2-135M-Instruct (the README's model, a Q4_1 GGUF) exported as llama.cpp's
//! LoRA adapter GGUF, loaded by llama.cpp's server (`tests/peers/llamacpp_lora_greedy.py`, PyPI
//! `xllamacpp`, with the Python `ENGRAM_TEST_PEER_PYTHON` names; `scripts/test.sh` makes one)
//! with `--lora`: its greedy tokens' log-probabilities match engram's own with the adapter
//! attached, and differ from the base model's by far more than that — so the adapter is applied,
//! and applied as engram applies it (q and k included, whose rows llama.cpp holds permuted).
//! The same adapter folded into the base by `engram merge --gguf f16` gives llama.cpp, without
//! `--lora`, engram's adapted model again; merged as Q8_0 and Q4_K_M, the file holds llama.cpp's
//! mix of types and llama.cpp reads it as engram does.

mod common;

use std::path::Path;
use std::process::Command;

use burn::tensor::Device;
use common::{engram, run};
use engram_checkpoint::Checkpoint;
use engram_lora::PeftAdapter;
use engram_model::{Llama, LoraConfig, WeightDType};

/// How far engram's log-probabilities of llama.cpp's greedy tokens may sit from llama.cpp's on
/// the same Q4_1 file, on average and at most: engram dequantizes the weights exactly, llama.cpp
/// multiplies them with 8-bit activations. Measured over these 12 tokens: base 0.066 mean /
/// 0.129 at most, with the F32 adapter 0.103 / 0.264, while the adapter's own effect is 3.8 nats
/// (mean) and an export without llama.cpp's q/k row permutation is off by 1.01 mean / 3.1 at
/// most — so the test fails on a wrong layout.
const MEAN_GAP: f32 = 0.15;
const MAX_GAP: f32 = 0.4;
/// The same for the F16 adapter, whose products llama.cpp runs in f16 (measured 0.135 mean,
/// 0.53 at most).
const F16_MEAN_GAP: f32 = 0.2;
const F16_MAX_GAP: f32 = 0.8;
/// The same for merged files, llama.cpp against engram on the same file (mean, largest):
/// engram's values are the file's exactly (its writer is byte for byte llama.cpp's quantizer,
/// its reader gguf-py's dequantizer), llama.cpp multiplies Q8_0 weights with 8-bit activations
/// and K-quants with its 8-bit `Q8_K` ones. On this random adapter's model, far from the
/// published one (its effect is 3.8 nats), measured: Q8_0 0.099 / 0.46, Q4_K_M 0.32 / 0.70;
/// an unpermuted q/k layout is off by 1.0 mean.
const Q8_0_GAP: (f32, f32) = (0.2, 0.8);
const Q4_K_M_GAP: (f32, f32) = (0.5, 1.2);
/// Tokens generated.
const NEW: usize = 12;

/// llama.cpp's greedy tokens and their log-probabilities after `prompt`, with `lora` applied.
fn llama_cpp(
    python: &str,
    gguf: &Path,
    prompt: &Path,
    lora: Option<&Path>,
) -> (Vec<u32>, Vec<f32>) {
    let script = engram_testkit::repo().join("tests/peers/llamacpp_lora_greedy.py");
    let mut c = Command::new(python);
    c.arg(script).arg(gguf).arg(prompt).arg(NEW.to_string());
    if let Some(l) = lora {
        c.arg("--lora").arg(l);
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "llama.cpp: {}",
        err.lines().last().unwrap_or("")
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let ids = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32);
    let lps = v["logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap() as f32);
    (ids.collect(), lps.collect())
}

/// engram's log-probabilities of `tokens` following `prompt` (teacher-forced).
fn engram_logprobs(model: &Llama, prompt: &[u32], tokens: &[u32]) -> Vec<f32> {
    let mut ids = prompt.to_vec();
    ids.extend_from_slice(&tokens[..tokens.len() - 1]);
    let logits = engram_testkit::logits(model, &ids);
    let vocab = logits.len() / ids.len();
    tokens
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            let row = &logits[(prompt.len() - 1 + i) * vocab..][..vocab];
            let max = row.iter().copied().fold(f32::MIN, f32::max);
            let lse = max + row.iter().map(|x| (x - max).exp()).sum::<f32>().ln();
            row[t as usize] - lse
        })
        .collect()
}

/// The mean and the largest |a − b|.
fn gap(a: &[f32], b: &[f32]) -> (f32, f32) {
    let d: Vec<f32> = a.iter().zip(b).map(|(x, y)| (x - y).abs()).collect();
    (
        d.iter().sum::<f32>() / d.len() as f32,
        d.iter().copied().fold(0.0, f32::max),
    )
}

#[test]
fn llama_cpp_applies_the_exported_adapter_as_engram_does() {
    let Ok(python) = std::env::var("ENGRAM_TEST_PEER_PYTHON") else {
        eprintln!("SKIPPED: ENGRAM_TEST_PEER_PYTHON (a Python with xllamacpp) is not set");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ckpt = Checkpoint::open("smollm2-135m-instruct").unwrap();
    let gguf = engram_checkpoint::model_store::find("smollm2-135m-instruct")
        .and_then(|m| m.cached())
        .expect("opened above, so cached");
    let base = Llama::load(&ckpt, WeightDType::F32, &Device::flex()).unwrap();
    // Random factors under rsLoRA's scaling (alpha / √r, 2.8 × alpha / r here): the alpha
    // llama.cpp is given must make its alpha / r that scaling.
    // Seeded draws from the CPU backend's process-wide generator, which the other tests here
    // draw from too: under the lock, or the adapter differs from run to run.
    let random = {
        let _rng = engram_testkit::train_lock();
        engram_testkit::random_adapters(base.clone(), 8, 11)
    };
    let config = LoraConfig::new(8)
        .with_dropout(0.0)
        .with_init_seed(3)
        .with_rslora(true);
    let adapter = PeftAdapter::from_model(&random, &config, None);
    let adapted = adapter.apply(base.clone()).unwrap();
    let adapter_dir = dir.path().join("adapter");
    adapter.save(&adapter_dir).unwrap();

    let out = dir.path().join("adapter.gguf");
    let export = |dtype: &str, force: bool| {
        let mut c = engram();
        c.args(["export", "--model", "smollm2-135m-instruct", "--adapter"])
            .arg(&adapter_dir)
            .args(["--dtype", dtype, "--out"])
            .arg(&out);
        if force {
            c.arg("--force");
        }
        run(&mut c)
    };
    let (ok, _, err) = export("f32", false);
    assert!(ok, "{err}");
    // An existing file is not replaced without --force.
    let (ok, _, err) = export("f32", false);
    assert!(!ok && err.contains("--force"), "{err}");

    let prompt_ids: Vec<u32> = vec![1, 504, 3575, 282, 4649, 314, 253, 1345, 2743, 28];
    let prompt = dir.path().join("prompt.json");
    std::fs::write(&prompt, serde_json::to_string(&prompt_ids).unwrap()).unwrap();
    let (t_base, lp_base) = llama_cpp(&python, &gguf, &prompt, None);
    let (t_lora, lp_lora) = llama_cpp(&python, &gguf, &prompt, Some(&out));
    assert_eq!((t_base.len(), t_lora.len()), (NEW, NEW));

    // The comparison itself holds on the base model...
    let (m_base, d_base) = gap(&engram_logprobs(&base, &prompt_ids, &t_base), &lp_base);
    assert!(
        d_base < MAX_GAP && m_base < MEAN_GAP,
        "base: engram vs llama.cpp {m_base} mean, {d_base} max"
    );
    // ...and with the adapter, llama.cpp's tokens are engram's own, as likely to the same
    // tolerance.
    let (m_lora, d_lora) = gap(&engram_logprobs(&adapted, &prompt_ids, &t_lora), &lp_lora);
    assert!(
        d_lora < MAX_GAP && m_lora < MEAN_GAP,
        "adapter: engram vs llama.cpp {m_lora} mean, {d_lora} max"
    );
    // The adapter changes what the model says by far more than that.
    assert_ne!(t_lora, t_base);
    let (effect, _) = gap(&engram_logprobs(&adapted, &prompt_ids, &t_base), &lp_base);
    assert!(effect > 5.0 * MEAN_GAP, "the adapter's effect {effect}");
    eprintln!(
        "engram vs llama.cpp, mean/max |Δ log p| in nats: base {m_base:.3}/{d_base:.3}, with the adapter {m_lora:.3}/{d_lora:.3}; the adapter's own effect {effect:.3}"
    );

    // F16, as llama.cpp's converter writes by default: the same within the tolerance.
    let (ok, _, err) = export("f16", true);
    assert!(ok, "{err}");
    let (t16, lp16) = llama_cpp(&python, &gguf, &prompt, Some(&out));
    let (m16, d16) = gap(&engram_logprobs(&adapted, &prompt_ids, &t16), &lp16);
    assert!(
        d16 < F16_MAX_GAP && m16 < F16_MEAN_GAP,
        "f16 adapter: engram vs llama.cpp {m16} mean, {d16} max"
    );

    // The adapter folded into the base as one GGUF file (adapted weights F16, the rest Q4_1 as
    // stored), loaded by llama.cpp without --lora: engram's adapted model again.
    let merged = dir.path().join("merged.gguf");
    let merge = |ty: &str| {
        let (ok, _, err) = run(engram()
            .args(["merge", "--force", "--model", "smollm2-135m-instruct"])
            .args(["--gguf", ty, "--adapter"])
            .arg(&adapter_dir)
            .arg("--out")
            .arg(&merged));
        assert!(ok, "{err}");
    };
    merge("f16");
    let (tm, lpm) = llama_cpp(&python, &merged, &prompt, None);
    let (mm, dm) = gap(&engram_logprobs(&adapted, &prompt_ids, &tm), &lpm);
    eprintln!("merged GGUF: engram vs llama.cpp {mm:.3} mean, {dm:.3} max");
    assert!(
        dm < MAX_GAP && mm < MEAN_GAP,
        "merged: engram vs llama.cpp {mm} mean, {dm} max"
    );

    // Quantized merges: the file holds llama.cpp's Q4_K_M mix (SmolLM2's 576-wide rows fall
    // back to 32-weight blocks), and llama.cpp on the file agrees with engram on the same file
    // (within its 8-bit activations' error); how far quantization moved the model from the
    // adapted f32 one is measured and printed.
    let mut gaps = Vec::new();
    for (ty, (mean_tol, max_tol), checks) in [
        (
            "Q8_0",
            Q8_0_GAP,
            &[
                ("blk.4.attn_q.weight", "Q8_0"),
                ("blk.4.ffn_down.weight", "Q8_0"),
            ][..],
        ),
        (
            "q4_k_m",
            Q4_K_M_GAP,
            &[
                ("blk.4.attn_q.weight", "Q5_0"),
                ("blk.0.attn_v.weight", "Q8_0"),
                ("blk.4.ffn_down.weight", "Q4_K"),
                ("blk.5.ffn_down.weight", "Q6_K"),
            ][..],
        ),
    ] {
        merge(ty);
        let f = engram_checkpoint::gguf::GgufFile::open(&merged).unwrap();
        for (name, want) in checks {
            let got = engram_checkpoint::gguf::ggml_type_name(f.tensors[*name].type_id);
            assert_eq!(got, *want, "{ty}: {name}");
        }
        let own = Llama::load(
            &Checkpoint::open(merged.to_str().unwrap()).unwrap(),
            WeightDType::F32,
            &Device::flex(),
        )
        .unwrap();
        let (tq, lpq) = llama_cpp(&python, &merged, &prompt, None);
        let (ms, ds) = gap(&engram_logprobs(&own, &prompt_ids, &tq), &lpq);
        let (mq, dq) = gap(&engram_logprobs(&adapted, &prompt_ids, &tq), &lpq);
        eprintln!(
            "merged {ty}: llama.cpp vs engram on the same file {ms:.3} mean, {ds:.3} max; vs the f32 adapted model {mq:.3} mean, {dq:.3} max"
        );
        gaps.push((ty, ms, ds, mean_tol, max_tol));
    }
    for (ty, ms, ds, mean_tol, max_tol) in gaps {
        assert!(
            ds < max_tol && ms < mean_tol,
            "merged {ty}: engram vs llama.cpp on the same file {ms} mean, {ds} max"
        );
    }
}

#[test]
fn an_adapter_for_another_base_is_named_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (tiny, _) = engram_testkit::tiny(false);
    let adapted = {
        let _rng = engram_testkit::train_lock();
        engram_testkit::random_adapters(tiny, 4, 1)
    };
    let adapter_dir = dir.path().join("adapter");
    PeftAdapter::from_model(&adapted, &LoraConfig::new(4), None)
        .save(&adapter_dir)
        .unwrap();
    let out = dir.path().join("a.gguf");
    let (ok, _, err) = run(engram()
        .args(["export", "--model", "smollm2-135m-instruct", "--adapter"])
        .arg(&adapter_dir)
        .arg("--out")
        .arg(&out));
    assert!(!ok, "{err}");
    assert!(err.contains("made for another base model"), "{err}");
    assert!(!out.exists());
    // On its own base it is written, and reads back as llama.cpp's adapter layout.
    let tiny_dir = engram_testkit::fixture("tiny-f32");
    let (ok, _, err) = run(engram()
        .args(["export", "--dtype", "f32", "--model"])
        .arg(&tiny_dir)
        .arg("--adapter")
        .arg(&adapter_dir)
        .arg("--out")
        .arg(&out));
    assert!(ok, "{err}");
    // merge --gguf folds into GGUF bases only: an HF directory is named, with the way round.
    let (ok, _, err) = run(engram()
        .args(["merge", "--gguf", "f16", "--model"])
        .arg(&tiny_dir)
        .arg("--adapter")
        .arg(&adapter_dir)
        .arg("--out")
        .arg(dir.path().join("m.gguf")));
    assert!(!ok && err.contains("convert_hf_to_gguf"), "{err}");
    // A file type engram does not write is named, with the ones it does.
    let (ok, _, err) = run(engram()
        .args(["merge", "--gguf", "Q3_K_S", "--model"])
        .arg(&tiny_dir)
        .arg("--adapter")
        .arg(&adapter_dir)
        .arg("--out")
        .arg(dir.path().join("m.gguf")));
    assert!(!ok && err.contains("it writes F16, Q8_0, Q4_K_M"), "{err}");
    let f = engram_checkpoint::gguf::GgufFile::open(&out).unwrap();
    assert_eq!(f.meta("general.type").unwrap().as_str(), Some("adapter"));
    assert_eq!(f.meta("adapter.type").unwrap().as_str(), Some("lora"));
    let a = &f.tensors["blk.0.attn_q.weight.lora_a"];
    let b = &f.tensors["blk.0.attn_q.weight.lora_b"];
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tiny_dir.join("config.json")).unwrap())
            .unwrap();
    let hidden = cfg["hidden_size"].as_u64().unwrap();
    // GGUF dims, fastest first: lora_a (in, r), lora_b (r, out).
    assert_eq!(a.dims, [hidden, 4]);
    assert_eq!(b.dims[0], 4);
    assert_eq!(
        f.tensors.len(),
        2 * 7 * cfg["num_hidden_layers"].as_u64().unwrap() as usize
    );
}

/// The Qwen architectures through llama.cpp: the tiny random Qwen2 and Qwen3 as `qwen2` /
/// `qwen3` GGUFs (`tests/fixtures/tiny-qwen*.gguf`, q/k rows as HF stores them) are read by
/// llama.cpp as engram reads them; an adapter exported for each (`general.architecture` the
/// base's, q/k rows not permuted) is applied by llama.cpp as engram applies it; and merged into
/// it as Q8_0, llama.cpp and engram read the same model from the file.
#[test]
fn llama_cpp_reads_and_adapts_qwen_ggufs_as_engram_does() {
    let Ok(python) = std::env::var("ENGRAM_TEST_PEER_PYTHON") else {
        eprintln!("SKIPPED: ENGRAM_TEST_PEER_PYTHON (a Python with xllamacpp) is not set");
        return;
    };
    for family in ["qwen2", "qwen3"] {
        qwen_through_llama_cpp(&python, family);
    }
}

fn qwen_through_llama_cpp(python: &str, family: &str) {
    let dir = tempfile::tempdir().unwrap();
    let gguf = engram_testkit::fixture(&format!("tiny-{family}.gguf"));
    let base = engram_testkit::load(&format!("tiny-{family}.gguf"));
    let prompt_ids: Vec<u32> = vec![1792, 17, 300, 1024, 5, 77, 1500, 42];
    let prompt = dir.path().join("prompt.json");
    std::fs::write(&prompt, serde_json::to_string(&prompt_ids).unwrap()).unwrap();
    // F32 weights: llama.cpp multiplies them in f32, so the models agree closely (measured:
    // Qwen2 7e-4 at most on the base, 8e-4 with the adapter, whose own effect is 0.32 nats;
    // Qwen3 1.0e-3 and 9.6e-4, effect 0.48).
    const TIGHT: f32 = 2e-3;
    let (t_base, lp_base) = llama_cpp(python, &gguf, &prompt, None);
    let (m, d) = gap(&engram_logprobs(&base, &prompt_ids, &t_base), &lp_base);
    eprintln!("{family} base: engram vs llama.cpp {m:.2e} mean, {d:.2e} max");
    assert!(d < TIGHT, "{family} base: {m} mean, {d} max");

    let random = {
        let _rng = engram_testkit::train_lock();
        engram_testkit::random_adapters(base.clone(), 4, 5)
    };
    let config = LoraConfig::new(4).with_dropout(0.0).with_init_seed(2);
    let adapter = PeftAdapter::from_model(&random, &config, None);
    let adapted = adapter.apply(base.clone()).unwrap();
    let adapter_dir = dir.path().join("adapter");
    adapter.save(&adapter_dir).unwrap();
    let out = dir.path().join("adapter.gguf");
    let (ok, _, err) = run(engram()
        .args(["export", "--dtype", "f32", "--model"])
        .arg(&gguf)
        .arg("--adapter")
        .arg(&adapter_dir)
        .arg("--out")
        .arg(&out));
    assert!(ok, "{err}");
    let f = engram_checkpoint::gguf::GgufFile::open(&out).unwrap();
    assert_eq!(
        f.meta("general.architecture").unwrap().as_str(),
        Some(family)
    );
    let (t_lora, lp_lora) = llama_cpp(python, &gguf, &prompt, Some(&out));
    let (m, d) = gap(&engram_logprobs(&adapted, &prompt_ids, &t_lora), &lp_lora);
    let (effect, _) = gap(&engram_logprobs(&adapted, &prompt_ids, &t_base), &lp_base);
    eprintln!(
        "{family} adapter: engram vs llama.cpp {m:.2e} mean, {d:.2e} max; its own effect {effect:.3}"
    );
    assert!(d < TIGHT, "{family} adapter: {m} mean, {d} max");
    assert!(effect > 100.0 * TIGHT, "the adapter's effect {effect}");

    let merged = dir.path().join("merged.gguf");
    let (ok, _, err) = run(engram()
        .args(["merge", "--gguf", "Q8_0", "--model"])
        .arg(&gguf)
        .arg("--adapter")
        .arg(&adapter_dir)
        .arg("--out")
        .arg(&merged));
    assert!(ok, "{err}");
    let own = Llama::load(
        &Checkpoint::open(merged.to_str().unwrap()).unwrap(),
        WeightDType::F32,
        &Device::flex(),
    )
    .unwrap();
    let (tm, lpm) = llama_cpp(python, &merged, &prompt, None);
    let (m, d) = gap(&engram_logprobs(&own, &prompt_ids, &tm), &lpm);
    eprintln!(
        "{family} merged Q8_0: engram vs llama.cpp on the same file {m:.2e} mean, {d:.2e} max"
    );
    assert!(
        d < Q8_0_GAP.1 && m < Q8_0_GAP.0,
        "{family} merged: {m} mean, {d} max"
    );
}
