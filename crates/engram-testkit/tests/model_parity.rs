//! Parity with transformers' `LlamaForCausalLM`, `MistralForCausalLM`, `Qwen2ForCausalLM` and
//! `Qwen3ForCausalLM` on tiny random
//! checkpoints made by `tests/peers/make_fixtures.py`: f32 logits within 1e-4 max-abs, identical
//! greedy tokens.
//!
//! tiny-f32: f32, untied head, single file, llama3 rope via `rope_scaling` + `rope_theta`.
//! tiny-bf16-tied: bf16 tensors (upcast exactly to f32 here, as the reference does), tied
//! embeddings, two shards with an index, llama3 rope via `rope_parameters`. Both use GQA.
//! tiny-qwen2: the Qwen2 architecture — random q/k/v biases, no o bias, random norm weights,
//! tied embeddings, rope theta 1e6 — as transformers 5 writes it. tiny-qwen3: Qwen3 — random
//! per-head q/k norms, head_dim 32 on a 64-wide model (q is 128 wide), no biases.
//!
//! On the plain CPU device attention runs Burn's fused (flash) op; on the autodiff device it
//! runs the eager matmul/softmax path that training uses: both are checked.

use burn::tensor::Device;
use engram_model::fused_attention;
use engram_model::{GenerationConfig, Sampling, generate};
use engram_testkit::*;

const CASES: [&str; 5] = [
    "bos_only",
    "short_fixed",
    "chat_prompt",
    "long_text",
    "long_random",
];
const TOL: f32 = 1e-4;

fn check_model(name: &str) {
    check_model_on(name, &Device::flex());
}

fn check_model_on(name: &str, device: &Device) {
    check_loaded(name, &load_on(name, device), name);
}

/// `model` against the transformers reference of fixture `reference_of`.
fn check_loaded(name: &str, model: &engram_model::Llama, reference_of: &str) {
    let model = model.clone();
    let reference = Reference::open(&fixture(reference_of).join("reference.safetensors"));
    let mut worst = 0f32;
    for case in CASES {
        let ids = reference.ids(&format!("input_ids_{case}"));
        let (shape, want) = reference.shaped(&format!("logits_{case}"));
        assert_eq!(shape, vec![ids.len(), model.config.vocab_size]);
        let got = logits(&model, &ids);
        let d = max_abs_diff(&got, &want);
        worst = worst.max(d);
        assert!(d <= TOL, "{name}/{case}: max |Δlogit| = {d:.3e} > {TOL:e}");

        let greedy = reference.ids(&format!("greedy_{case}"));
        let cfg = GenerationConfig {
            max_new_tokens: greedy.len(),
            sampling: Sampling::Greedy,
            stop_ids: vec![],
            ..Default::default()
        };
        let out = generate(&model, std::slice::from_ref(&ids), &cfg).unwrap();
        assert_eq!(
            out.tokens[0], greedy,
            "{name}/{case}: greedy continuation differs"
        );
    }
    eprintln!(
        "{name}: worst max |Δlogit| over {} cases = {worst:.3e}",
        CASES.len()
    );
}

#[test]
fn tiny_f32_untied_matches_transformers() {
    check_model("tiny-f32");
}

#[test]
fn eager_attention_matches_transformers() {
    let device = Device::flex().autodiff();
    assert!(fused_attention(&Device::flex()) && !fused_attention(&device));
    check_model_on("tiny-f32", &device);
}

#[test]
fn tiny_bf16_tied_sharded_matches_transformers() {
    check_model("tiny-bf16-tied");
}

#[test]
fn tiny_qwen2_matches_transformers() {
    check_model("tiny-qwen2");
    // ... on the autodiff device's eager attention too (the path training takes).
    check_model_on("tiny-qwen2", &Device::flex().autodiff());
}

#[test]
fn tiny_qwen3_matches_transformers() {
    check_model("tiny-qwen3");
    check_model_on("tiny-qwen3", &Device::flex().autodiff());
}

/// Mistral with a sliding window of 4096 (every case fits in it, where sliding attention is
/// full attention).
#[test]
fn tiny_mistral_matches_transformers() {
    check_model("tiny-mistral");
    let m = load("tiny-mistral");
    assert_eq!(
        (m.config.sliding_window, m.config.max_position_embeddings),
        (Some(4096), 4096)
    );
}

/// Past Mistral's sliding window engram would attend to keys Mistral does not see: a prompt
/// longer than the window is refused, by name, rather than answered differently.
#[test]
fn a_prompt_past_mistrals_sliding_window_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(fixture("tiny-mistral")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
    }
    let cfg_path = dir.path().join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    cfg["sliding_window"] = serde_json::json!(100);
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    let ckpt = engram_checkpoint::Checkpoint::open(dir.path().to_str().unwrap()).unwrap();
    let model =
        engram_model::Llama::load(&ckpt, engram_model::WeightDType::F32, &Device::flex()).unwrap();
    let reference = Reference::open(&fixture("tiny-mistral").join("reference.safetensors"));
    let long = reference.ids("input_ids_long_text");
    assert!(long.len() > 100);
    let cfg = GenerationConfig {
        max_new_tokens: 2,
        sampling: Sampling::Greedy,
        stop_ids: vec![],
        ..Default::default()
    };
    let e = generate(&model, &[long], &cfg).unwrap_err().to_string();
    assert!(e.contains("context window of 100"), "{e}");
    let short = reference.ids("input_ids_short_fixed");
    assert!(generate(&model, &[short], &cfg).is_ok());
}

/// The same weights as llama.cpp's `qwen2` / `qwen3` GGUF (q/k rows as HF stores them, llama.cpp
/// permutes only `llama` files; Qwen3's head width from `attention.key_length`): transformers'
/// logits and greedy tokens again. llama.cpp itself reads the
/// file to the same greedy tokens (`crates/engram-cli/tests/export_gguf.rs`).
#[test]
fn tiny_qwen2_and_qwen3_ggufs_match_transformers() {
    check_loaded("tiny-qwen2.gguf", &load("tiny-qwen2.gguf"), "tiny-qwen2");
    check_loaded("tiny-qwen3.gguf", &load("tiny-qwen3.gguf"), "tiny-qwen3");
}

#[test]
fn llama3_rope_frequencies_match_transformers() {
    for name in ["tiny-f32", "tiny-bf16-tied"] {
        let model = load(name);
        let reference = Reference::open(&fixture(name).join("reference.safetensors"));
        let (_, want) = reference.shaped("rope_inv_freq");
        let got = model.rotary.inv_freq();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs(),
                "{name}: inv_freq[{i}] {g} vs {w}"
            );
        }
        // All three llama3 bands are exercised: some frequencies kept, some divided by the
        // factor, some smoothed in between.
        let plain: Vec<f32> = (0..got.len())
            .map(|i| 1.0 / 500000f32.powf((2 * i) as f32 / (2 * got.len()) as f32))
            .collect();
        let ratios: Vec<f32> = got.iter().zip(&plain).map(|(g, p)| p / g).collect();
        assert!(ratios.iter().any(|r| (r - 1.0).abs() < 1e-4));
        assert!(ratios.iter().any(|r| (r - 8.0).abs() < 1e-3));
        assert!(ratios.iter().any(|r| *r > 1.01 && *r < 7.99));
    }
}

#[test]
fn hidden_states_match_transformers_layer_by_layer() {
    let model = load("tiny-f32");
    let reference = Reference::open(&fixture("tiny-f32").join("reference.safetensors"));
    let ids = reference.ids("input_ids_long_text");
    let (shape, want) = reference.shaped("hidden_long_text");
    // The last entry is after the final norm: compare it to forward_hidden.
    let (layers, t, h) = (shape[0], shape[1], shape[2]);
    let dev = model.device();
    let positions = vec![(0..t).collect::<Vec<_>>()];
    let mask = engram_model::mask::attention_mask(&[0], 0, t, &dev);
    let got: Vec<f32> = model
        .forward_hidden(
            engram_model::ids_tensor(&[ids], &dev),
            &positions,
            mask.as_ref(),
            None,
        )
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap();
    let last = &want[(layers - 1) * t * h..];
    let d = max_abs_diff(&got, last);
    assert!(d <= 1e-4, "final hidden state max diff {d:e}");
}
