//! `--dry-run` estimates: time and peak memory of every cell, from the model's architecture,
//! the rank and the facts. These are rough (a FLOP count over an assumed throughput, and a
//! memory model of weights + adapter state + activations); their use is to show before a launch
//! that, say, rank 2048 on Llama-3.1-8B needs ~86 GB for its adapter state alone.
//!
//! Memory: base weights (parameters × dtype bytes); LoRA state at 16 bytes per adapter parameter
//! (f32 weight, gradient, AdamW's two moments); training activations ≈ batch × tokens × layers ×
//! (14·hidden + 4·intermediate) f32 values plus two f32 copies of the logits; long context: the
//! KV cache of the shared prefix (once, and copied into each row of a question batch) and one
//! 512-token chunk of attention scores.
//!
//! Time: training ≈ epochs × tokens × (4·P + 6·L) FLOPs (forward and input gradients through the
//! frozen base, full gradients of the adapter; with `graph = true` every example counts as long
//! as the longest, as its steps compute it padded), answering ≈ 2·P per prompt or generated token,
//! over a throughput per backend (`--tflops` overrides it; the CPU default was measured with
//! `engram bench train` on 2 cores).

use engram_facts::Fact;
use engram_model::{LlamaConfig, LoraTarget};

use crate::cells::{Cell, Method};
use crate::experiment::Experiment;
use crate::presets::TrainingPreset;

/// Prompt-template tokens around a question (system header, turn markers).
const TEMPLATE_TOKENS: f64 = 30.0;

/// Assumed sustained FLOP/s of a backend when the user gives none (`auto`: the backend it
/// opens in this build).
pub fn default_flops(backend: &str) -> f64 {
    match engram_model::backend_kind(backend).as_str() {
        "cuda" => 200e12,
        "wgpu" => 20e12,
        _ => 0.05e12,
    }
}

/// Adapter parameters of a LoRA setup on `cfg`.
pub fn lora_parameters(
    cfg: &LlamaConfig,
    rank: usize,
    targets: &[LoraTarget],
    layers: Option<&[usize]>,
) -> usize {
    let h = cfg.hidden_size;
    let q = cfg.num_attention_heads * cfg.head_dim;
    let kv = cfg.num_key_value_heads * cfg.head_dim;
    let i = cfg.intermediate_size;
    let per_layer: usize = targets
        .iter()
        .map(|t| match t.name() {
            "q_proj" => h + q,
            "k_proj" | "v_proj" => h + kv,
            "o_proj" => q + h,
            "gate_proj" | "up_proj" => h + i,
            _ => i + h,
        })
        .sum();
    let n_layers = layers.map_or(cfg.num_hidden_layers, <[usize]>::len);
    rank * per_layer * n_layers
}

/// Peak memory of LoRA training and the adapter state within it, in bytes: the base weights
/// (`weight_bytes`), 16 bytes per adapter parameter (f32 weight, gradient, AdamW's two
/// moments) and the activations of a batch of `batch` examples of `longest` tokens.
pub fn lora_training_bytes(
    cfg: &LlamaConfig,
    adapter_params: f64,
    weight_bytes: f64,
    batch: f64,
    longest: f64,
) -> (f64, f64) {
    let layers = cfg.num_hidden_layers as f64;
    let (h, i, v) = (
        cfg.hidden_size as f64,
        cfg.intermediate_size as f64,
        cfg.vocab_size as f64,
    );
    let activations = batch * longest * (layers * (14.0 * h + 4.0 * i) + 2.0 * v) * 4.0;
    let adapter = 16.0 * adapter_params;
    (weight_bytes + adapter + activations, adapter)
}

/// Tokens of `fact` as a training example: its rephrased question and answer in the template.
/// Tokens one epoch over `facts` computes: the examples' own, or with `graph` (every step in
/// the run's one shape) each as long as the longest.
fn training_tokens(facts: &[Fact], graph: bool) -> f64 {
    if graph {
        facts.len() as f64 * facts.iter().map(example_tokens).fold(0.0, f64::max)
    } else {
        facts.iter().map(example_tokens).sum()
    }
}

fn example_tokens(fact: &Fact) -> f64 {
    tokens(&fact.rephrased_question) + tokens(&fact.answer) + TEMPLATE_TOKENS
}

/// Peak memory of training adapters of `rank` with `training`'s settings on `facts`, with the
/// base in `dtype` (`f32`, `bf16`, `f16`), and the adapter state within it, in bytes
/// ([`lora_training_bytes`] at the batch size and the longest example).
pub fn lora_training_peak(
    cfg: &LlamaConfig,
    dtype: &str,
    training: &TrainingPreset,
    rank: usize,
    facts: &[Fact],
) -> (f64, f64) {
    let lora = &training.lora;
    let adapter = lora_parameters(cfg, rank, &lora.targets, lora.layers.as_deref()) as f64;
    let weights = cfg.num_parameters() as f64 * dtype_bytes(dtype);
    let longest = facts.iter().map(example_tokens).fold(0.0, f64::max);
    let batch = training.train.batch_size as f64;
    lora_training_bytes(cfg, adapter, weights, batch, longest)
}

/// Refuses LoRA training that the planner says will not fit the device: when
/// [`lora_training_peak`] exceeds the memory `backend`'s device has in all
/// ([`engram_model::device_memory`]: a CUDA device's, a wgpu device's Vulkan heap, the
/// machine's for the CPU), an error that names `what` (a cell, a run) with both figures, before
/// anything is loaded. Passes where the device's memory cannot be told and with
/// `ENGRAM_SKIP_MEMORY_CHECK=1`.
pub fn check_training_memory(
    what: &str,
    cfg: &LlamaConfig,
    dtype: &str,
    backend: &str,
    training: &TrainingPreset,
    rank: usize,
    facts: &[Fact],
) -> anyhow::Result<()> {
    if std::env::var_os(SKIP_MEMORY_CHECK).is_some_and(|v| v == "1") {
        return Ok(());
    }
    let Some(capacity) = engram_model::device_memory(backend) else {
        return Ok(());
    };
    let (peak, adapter) = lora_training_peak(cfg, dtype, training, rank, facts);
    if peak > capacity as f64 {
        anyhow::bail!(
            "{what}: needs about {} (the planner's estimate: weights, adapter state {}, activations), the {backend} device has {}; run it where there is more memory, or set {SKIP_MEMORY_CHECK}=1 to try anyway",
            human_bytes(peak),
            human_bytes(adapter),
            human_bytes(capacity as f64)
        );
    }
    Ok(())
}

/// Refuses LoRA training whose adapters' matmul dtype (`adapter_compute`) `backend`'s device
/// cannot compute in — bf16 on wgpu — with an error naming `what` and the device, before a
/// model is loaded (the model would refuse it only once loaded).
pub fn check_training_device(
    what: &str,
    backend: &str,
    training: &TrainingPreset,
) -> anyhow::Result<()> {
    let dtype = training.train.adapter_compute.dtype();
    if dtype == engram_model::burn::tensor::DType::F32 {
        return Ok(());
    }
    let device = engram_model::open_device(backend)?;
    engram_model::check_adapter_compute(&device, dtype).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// The variable that, set to `1`, skips [`check_training_memory`].
pub const SKIP_MEMORY_CHECK: &str = "ENGRAM_SKIP_MEMORY_CHECK";

/// One cell's estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Seconds.
    pub seconds: f64,
    /// Peak device memory in bytes.
    pub peak_bytes: f64,
    /// Of which LoRA weights + gradients + AdamW state.
    pub adapter_state_bytes: f64,
    /// A note (e.g. long context that will not fit).
    pub note: Option<String>,
}

fn tokens(text: &str) -> f64 {
    (text.chars().count() as f64 / 4.0).max(1.0)
}

/// Bytes per weight of `dtype` as the loader reads it (`F32`, `fp32`, `float32` alike; 2
/// for a half type, and for a name it refuses, which loading will name).
fn dtype_bytes(dtype: &str) -> f64 {
    match engram_model::WeightDType::parse(dtype) {
        Some(engram_model::WeightDType::F32) => 4.0,
        _ => 2.0,
    }
}

/// Estimates `cell` of `exp` on architecture `cfg` with `facts` (the cell's sample), at
/// `flops` FLOP/s.
pub fn estimate(
    exp: &Experiment,
    cfg: &LlamaConfig,
    cell: &Cell,
    facts: &[Fact],
    flops: f64,
) -> Estimate {
    let p = cfg.num_parameters() as f64;
    let weights = p * dtype_bytes(&exp.model.dtype);
    let n = facts.len() as f64;
    let new_tokens = exp.answer.max_new_tokens as f64 / 2.0;
    let question_tokens: f64 = facts.iter().map(|f| tokens(&f.question)).sum::<f64>() / n;
    let answer_cost = |prompt_tokens: f64| n * (prompt_tokens + new_tokens) * 2.0 * p / flops;
    let layers = cfg.num_hidden_layers as f64;
    let h = cfg.hidden_size as f64;
    let window = exp
        .model
        .context_window
        .unwrap_or(cfg.max_position_embeddings) as f64;
    match cell.method {
        Method::Lora { rank } => {
            let (lora, t) = (&exp.training.lora, &exp.training.train);
            let l = lora_parameters(cfg, rank, &lora.targets, lora.layers.as_deref()) as f64;
            let train_s =
                t.epochs as f64 * training_tokens(facts, t.graph) * (4.0 * p + 6.0 * l) / flops;
            let (peak_bytes, adapter) =
                lora_training_peak(cfg, &exp.model.dtype, &exp.training, rank, facts);
            Estimate {
                seconds: train_s + answer_cost(question_tokens + TEMPLATE_TOKENS),
                peak_bytes,
                adapter_state_bytes: adapter,
                note: None,
            }
        }
        Method::LongContext => {
            let prefix: f64 = facts
                .iter()
                .map(|f| tokens(&f.question) + tokens(&f.answer) + 4.0)
                .sum::<f64>()
                + TEMPLATE_TOKENS;
            let kv_bytes = layers
                * 2.0
                * (cfg.num_key_value_heads * cfg.head_dim) as f64
                * dtype_bytes(&exp.model.dtype);
            let batch = exp.answer.batch_size as f64;
            let scores = 512.0 * prefix * cfg.num_attention_heads as f64 * 4.0;
            let needed = prefix + question_tokens + new_tokens;
            let prefill = prefix * 2.0 * p + 2.0 * layers * prefix * prefix * h;
            if needed > window {
                // Only the prompts are tokenized: the cell records NA.
                return Estimate {
                    seconds: 0.0,
                    peak_bytes: weights,
                    adapter_state_bytes: 0.0,
                    note: Some(format!(
                        "NA: the prompt needs ~{needed:.0} tokens, the window is {window:.0}"
                    )),
                };
            }
            Estimate {
                seconds: prefill / flops + answer_cost(question_tokens),
                // The prefix cache, and one copy per row of a question batch.
                peak_bytes: weights + kv_bytes * (prefix + new_tokens) * (1.0 + batch) + scores,
                adapter_state_bytes: 0.0,
                note: None,
            }
        }
        Method::Rag => {
            let k = (exp.methods.rag_k as f64).min(n);
            let fact_tokens: f64 = facts
                .iter()
                .map(|f| tokens(&f.question) + tokens(&f.answer) + 4.0)
                .sum::<f64>()
                / n;
            let prompt = k * fact_tokens + question_tokens + TEMPLATE_TOKENS;
            let kv_bytes = layers
                * 2.0
                * (cfg.num_key_value_heads * cfg.head_dim) as f64
                * dtype_bytes(&exp.model.dtype);
            let batch = exp.answer.batch_size as f64;
            Estimate {
                seconds: answer_cost(prompt),
                peak_bytes: weights + kv_bytes * (prompt + new_tokens) * batch,
                adapter_state_bytes: 0.0,
                note: None,
            }
        }
    }
}

/// `1.2 GB`, `340 MB`.
pub fn human_bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else {
        format!("{:.0} MB", b / 1e6)
    }
}

/// `45 s`, `12 min`, `3.4 h`.
pub fn human_seconds(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backends_default_throughput_follows_its_kind() {
        assert_eq!(default_flops("CUDA:1"), default_flops("cuda"));
        assert_eq!(default_flops("vulkan"), default_flops("wgpu"));
        assert_eq!(default_flops("flex"), default_flops("cpu"));
        assert!(default_flops("cuda") > default_flops("wgpu"));
        assert!(default_flops("wgpu") > default_flops("cpu"));
        let first = engram_model::available_backends()[0];
        assert_eq!(
            default_flops("auto"),
            default_flops(first),
            "auto opens {first}"
        );
    }

    /// Llama-3.1-8B-Instruct's architecture, from the config the repository keeps.
    fn llama_8b() -> LlamaConfig {
        let path = format!(
            "{}/../../configs/models/llama-3.1-8b-instruct.config.json",
            std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR")
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        LlamaConfig::from_hf_json(&v, &path).unwrap()
    }

    /// The weights count at the width the loader reads them: `fp32` is `f32` (it was counted
    /// as two bytes, half the real footprint, so the memory check passed a run that then ran
    /// out of memory).
    #[test]
    fn every_spelling_of_a_dtype_weighs_the_same() {
        for (a, b) in [
            ("fp32", "f32"),
            ("F32", "f32"),
            ("float32", "f32"),
            ("bfloat16", "bf16"),
        ] {
            assert_eq!(dtype_bytes(a), dtype_bytes(b), "{a}");
        }
        assert_eq!(dtype_bytes("fp32"), 4.0);
        assert_eq!(dtype_bytes("fp16"), 2.0);
    }

    #[test]
    fn a_graph_run_computes_every_example_at_the_longest_length() {
        let fact = |answer: &str| Fact {
            id: String::new(),
            question: String::new(),
            rephrased_question: "who?".into(),
            answer: answer.into(),
            source: None,
        };
        let facts = [fact("a"), fact("a b c d e f g h i j k l")];
        let (short, long) = (example_tokens(&facts[0]), example_tokens(&facts[1]));
        assert!(long > short);
        assert_eq!(training_tokens(&facts, false), short + long);
        assert_eq!(training_tokens(&facts, true), 2.0 * long);
    }

    #[test]
    fn rank_2048_on_llama_3_1_8b_needs_about_86_gb_of_adapter_state() {
        let cfg = llama_8b();
        let all = LoraTarget::ALL;
        // Per layer: q 4096+4096, k/v 4096+1024 each, o 4096+4096, gate/up 4096+14336 each,
        // down 14336+4096 = 81920 per unit of rank; × 32 layers × 2048.
        let l = lora_parameters(&cfg, 2048, &all, None);
        assert_eq!(l, 81920 * 32 * 2048);
        let gb = 16.0 * l as f64 / 1e9;
        assert!((gb - 85.9).abs() < 0.1, "{gb}");
        // PEFT's count for rank 8 on all linear layers of Llama-3.1-8B: 20,971,520.
        assert_eq!(lora_parameters(&cfg, 8, &all, None), 20_971_520);
    }

    #[test]
    fn training_that_does_not_fit_is_named_with_both_figures() {
        let cfg = llama_8b();
        let facts = vec![Fact {
            id: "f".into(),
            question: "q".repeat(120),
            rephrased_question: "r".repeat(120),
            answer: "a".repeat(40),
            source: None,
        }];
        let training = TrainingPreset::default();
        // 86 GB of adapter state at rank 2048, on top of the bf16 weights (16.06 GB) and the
        // activations.
        let (peak, adapter) = lora_training_peak(&cfg, "bf16", &training, 2048, &facts);
        assert!((adapter / 1e9 - 85.9).abs() < 0.1, "{adapter}");
        assert!(peak > adapter + 16.06e9, "{peak}");
        // f32 weights take twice the bytes.
        let (peak32, _) = lora_training_peak(&cfg, "f32", &training, 2048, &facts);
        assert!(
            (peak32 - peak - 16.06e9).abs() < 0.01e9,
            "{peak32} vs {peak}"
        );
        // A rank no machine holds: refused, named, with both figures — on wgpu too, from its
        // Vulkan adapter's memory (a build without wgpu cannot tell, and lets it through).
        let err = check_training_memory(
            "cell n10-r9",
            &cfg,
            "bf16",
            "cpu",
            &training,
            1 << 30,
            &facts,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("cell n10-r9: needs about "), "{err}");
        assert!(err.contains("the cpu device has "), "{err}");
        let wgpu = check_training_memory("x", &cfg, "bf16", "wgpu", &training, 1 << 30, &facts);
        if cfg!(feature = "wgpu") {
            let err = wgpu.unwrap_err().to_string();
            assert!(err.contains("the wgpu device has "), "{err}");
        } else {
            assert!(wgpu.is_ok());
        }
        assert!(check_training_memory("x", &cfg, "bf16", "cpu", &training, 1, &facts).is_ok());
    }
}
