//! PEFT's adapter format: adapters made by PEFT give PEFT's logits; export → import is
//! bit-identical; an exported adapter loads in PEFT itself (when a peer Python is available).

use engram_lora::{ADAPTER_CONFIG, ADAPTER_WEIGHTS};
use engram_lora::{PeftAdapter, load_adapter, save_adapter};
use engram_model::{LoraConfig, LoraTarget};
use engram_testkit::{Reference, fixtures, max_abs_diff, tiny};

fn logits(model: &engram_model::Llama, ids: &[u32]) -> Vec<f32> {
    model
        .forward(&[ids.to_vec()])
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap()
}

#[test]
fn peft_adapters_give_peft_logits() {
    let reference = Reference::open(&fixtures().join("lora/reference.safetensors"));
    for name in ["r4", "r4-rs"] {
        let adapter = load_adapter(&fixtures().join("lora").join(name)).unwrap();
        let (base, _) = tiny(false);
        let model = adapter.apply(base).unwrap();
        for case in ["short", "long"] {
            let ids = reference.ids(&format!("input_ids_{case}"));
            let want = reference.f32(&format!("logits_{name}_{case}"));
            let got = logits(&model, &ids);
            let d = max_abs_diff(&got, &want);
            eprintln!("{name} {case}: max |Δlogit| vs PEFT = {d:.2e}");
            assert!(d < 1e-4, "{name} {case}: {d}");
        }
    }
}

/// The same on the Qwen2 (q/k/v biases) and Qwen3 (per-head q/k norms) architectures: PEFT's
/// adapter on tiny-qwen2 / tiny-qwen3 gives PEFT's logits, and engram's export of it reads back
/// bit for bit.
#[test]
fn peft_adapters_on_qwen2_and_qwen3_give_peft_logits() {
    for family in ["qwen2", "qwen3"] {
        let dir = fixtures().join(format!("lora-{family}"));
        let reference = Reference::open(&dir.join("reference.safetensors"));
        let adapter = load_adapter(&dir.join("r4")).unwrap();
        let base = format!("tiny-{family}");
        let model = adapter.apply(engram_testkit::load(&base)).unwrap();
        for case in ["short", "long"] {
            let ids = reference.ids(&format!("input_ids_{case}"));
            let want = reference.f32(&format!("logits_r4_{case}"));
            let d = max_abs_diff(&logits(&model, &ids), &want);
            eprintln!("{family} r4 {case}: max |Δlogit| vs PEFT = {d:.2e}");
            assert!(d < 1e-4, "{family} r4 {case}: {d}");
        }
        let out = tempfile::tempdir().unwrap();
        save_adapter(&model, &adapter.config, Some(base), out.path()).unwrap();
        assert_eq!(load_adapter(out.path()).unwrap().factors, adapter.factors);
    }
}

#[test]
fn adapter_config_is_read_as_peft_means_it() {
    let rs = load_adapter(&fixtures().join("lora/r4-rs")).unwrap();
    assert_eq!(rs.config.rank, 4);
    assert!(rs.config.use_rslora);
    assert_eq!(rs.config.scaling(), 4.0); // 8 / sqrt(4)
    assert_eq!(rs.config.targets, vec![LoraTarget::Q, LoraTarget::V]);
    assert_eq!(rs.config.layers, Some(vec![1]));
    assert_eq!(rs.factors.len(), 2);
    assert!(rs.factors.iter().all(|f| f.layer == 1));
    let all = load_adapter(&fixtures().join("lora/r4")).unwrap();
    assert_eq!(all.factors.len(), 2 * 7);
    assert_eq!(all.config.scaling(), 4.0);
}

#[test]
fn export_then_import_is_bit_identical() {
    let src = fixtures().join("lora/r4");
    let adapter = load_adapter(&src).unwrap();
    let (base, _) = tiny(false);
    let model = adapter.apply(base).unwrap();
    let dir = tempfile::tempdir().unwrap();
    save_adapter(&model, &adapter.config, Some("tiny-f32".into()), dir.path()).unwrap();
    let again = load_adapter(dir.path()).unwrap();
    assert_eq!(
        again.factors, adapter.factors,
        "factors differ after export → import"
    );
    assert_eq!(again.config.scaling(), adapter.config.scaling());
    // The file holds the same tensors, byte for byte, as the PEFT-written one.
    let a = std::fs::read(src.join(ADAPTER_WEIGHTS)).unwrap();
    let b = std::fs::read(dir.path().join(ADAPTER_WEIGHTS)).unwrap();
    let (sa, sb) = (
        safetensors::SafeTensors::deserialize(&a).unwrap(),
        safetensors::SafeTensors::deserialize(&b).unwrap(),
    );
    let mut na = sa.names();
    let mut nb = sb.names();
    na.sort();
    nb.sort();
    assert_eq!(na, nb);
    for n in na {
        let (ta, tb) = (sa.tensor(n).unwrap(), sb.tensor(n).unwrap());
        assert_eq!(ta.shape(), tb.shape(), "{n}");
        assert_eq!(ta.data(), tb.data(), "{n}");
    }
    let cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(ADAPTER_CONFIG)).unwrap()).unwrap();
    assert_eq!(cfg["peft_type"], "LORA");
    assert_eq!(cfg["task_type"], "CAUSAL_LM");
    assert_eq!(cfg["r"], 4);
    assert_eq!(cfg["lora_alpha"], 16);
    assert_eq!(cfg["bias"], "none");
    // Readable by others, as a plain file (the safetensors crate's temporary file is 0600).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(dir.path().join(ADAPTER_WEIGHTS)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    }
    // The streaming writer (factors one at a time from the device) writes the same files as the
    // in-memory adapter's writer.
    let held = tempfile::tempdir().unwrap();
    PeftAdapter::from_model(&model, &adapter.config, Some("tiny-f32".into()))
        .save(held.path())
        .unwrap();
    for f in [ADAPTER_WEIGHTS, ADAPTER_CONFIG] {
        assert_eq!(
            std::fs::read(held.path().join(f)).unwrap(),
            std::fs::read(dir.path().join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn merged_weights_give_the_adapter_logits() {
    let adapter = load_adapter(&fixtures().join("lora/r4")).unwrap();
    let ids =
        Reference::open(&fixtures().join("lora/reference.safetensors")).ids("input_ids_short");
    let (base, _) = tiny(false);
    let with = adapter.apply(base).unwrap();
    let want = logits(&with, &ids);
    let merged = with.merge_lora();
    assert!(merged.adapters().is_empty());
    let d = max_abs_diff(&logits(&merged, &ids), &want);
    assert!(d < 1e-4, "{d}");
}

#[test]
fn merge_writes_an_hf_checkpoint_with_the_adapter_folded_in() {
    let adapter = load_adapter(&fixtures().join("lora/r4")).unwrap();
    let ids = Reference::open(&fixtures().join("lora/reference.safetensors")).ids("input_ids_long");
    let want =
        Reference::open(&fixtures().join("lora/reference.safetensors")).f32("logits_r4_long");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged");
    // A small shard limit forces several shards and an index.
    let shards = engram_lora::merge_to_hf(
        &engram_testkit::tiny_ckpt(),
        Some(&adapter),
        &out,
        400_000,
        &burn::tensor::Device::flex(),
    )
    .unwrap();
    assert!(shards > 1);
    assert!(out.join("model.safetensors.index.json").exists());
    assert!(out.join("tokenizer.json").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let shard = out.join(format!("model-00001-of-{shards:05}.safetensors"));
        let mode = std::fs::metadata(&shard).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "{}", shard.display());
    }
    let ckpt = engram_checkpoint::Checkpoint::open(out.to_str().unwrap()).unwrap();
    let model = engram_model::Llama::load(
        &ckpt,
        engram_model::WeightDType::F32,
        &burn::tensor::Device::flex(),
    )
    .unwrap();
    let d = max_abs_diff(&logits(&model, &ids), &want);
    eprintln!("merged checkpoint vs PEFT logits: {d:.2e}");
    assert!(d < 1e-4, "{d}");
    // A non-empty destination is refused rather than overwritten.
    let e = engram_lora::merge_to_hf(
        &engram_testkit::tiny_ckpt(),
        Some(&adapter),
        &out,
        400_000,
        &burn::tensor::Device::flex(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("not empty"), "{e}");
}

#[test]
fn mismatched_adapters_are_refused_with_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut adapter = load_adapter(&fixtures().join("lora/r4")).unwrap();
    // An adapter made for a wider model: q_proj input 128 instead of 64.
    let f = &mut adapter.factors[0];
    f.d_in = 128;
    f.a = vec![0.0; f.rank * 128];
    adapter.save(dir.path()).unwrap();
    let loaded = load_adapter(dir.path()).unwrap();
    let (base, _) = tiny(false);
    let e = loaded.apply(base).err().unwrap().to_string();
    assert!(
        e.contains("layers.0.self_attn.q_proj") && e.contains("128"),
        "{e}"
    );

    // Unknown target module in the config.
    let cfg_path = dir.path().join(ADAPTER_CONFIG);
    let mut cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["target_modules"] = serde_json::json!(["q_proj", "embed_tokens"]);
    std::fs::write(&cfg_path, serde_json::to_vec(&cfg).unwrap()).unwrap();
    let e = load_adapter(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("`embed_tokens`") && e.contains(ADAPTER_CONFIG),
        "{e}"
    );

    // Missing weights file.
    let empty = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixtures().join("lora/r4").join(ADAPTER_CONFIG),
        empty.path().join(ADAPTER_CONFIG),
    )
    .unwrap();
    let e = load_adapter(empty.path()).unwrap_err().to_string();
    assert!(e.contains(ADAPTER_WEIGHTS), "{e}");
    let _ = LoraConfig::new(1);

    // A factor holding NaN is named with its tensor, where it loaded and later read as a
    // diverged run.
    let nan = tempfile::tempdir().unwrap();
    let mut adapter = load_adapter(&fixtures().join("lora/r4")).unwrap();
    adapter.factors[0].b[3] = f32::NAN;
    adapter.save(nan.path()).unwrap();
    let e = load_adapter(nan.path()).unwrap_err().to_string();
    assert!(
        e.contains(ADAPTER_WEIGHTS) && e.contains("lora_B") && e.contains("NaN"),
        "{e}"
    );
}

/// Runs `../shared/peers/peft_check_adapter.py` on an adapter that engram exported, when a
/// Python with peft is available (`ENGRAM_PEER_PYTHON`); CI machines have none and skip.
#[test]
fn exported_adapter_passes_peft_check() {
    let Ok(python) = std::env::var("ENGRAM_PEER_PYTHON") else {
        eprintln!(
            "skipped: set ENGRAM_PEER_PYTHON to a Python with torch + peft to run PEFT's adapter check"
        );
        return;
    };
    let script = fixtures().join("../../../shared/peers/peft_check_adapter.py");
    assert!(script.exists(), "{} missing", script.display());
    let (base, _) = tiny(false);
    let cfg = LoraConfig::new(8).with_init_seed(3);
    let mut model = base.with_lora(&cfg).unwrap();
    // Non-zero B so that the check sees a real delta.
    for layer in 0..model.layers.len() {
        for t in LoraTarget::ALL {
            let ad = model.linear_mut(layer, t).lora.as_mut().unwrap();
            let b = ad.lora_b.val();
            let shape = b.shape();
            ad.lora_b = burn::module::Param::from_tensor(
                burn::tensor::Tensor::<2>::ones(shape, &b.device()).mul_scalar(0.01),
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    save_adapter(&model, &cfg, Some("tiny-f32".into()), dir.path()).unwrap();
    let out = std::process::Command::new(python)
        .arg(&script)
        .arg(fixtures().join("tiny-f32"))
        .arg(dir.path())
        .arg("--no-em")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(
        out.status.success(),
        "peft_check_adapter.py failed:\n{text}"
    );
}
