//! The models tests run: the committed tiny fixtures (made by transformers, see
//! `tests/peers/make_fixtures.py`) and random Llamas written on the fly.

use burn::tensor::{DType, Device};
use engram_checkpoint::safetensors_bytes;
use engram_checkpoint::{Checkpoint, FloatFormat, HostTensor};
use engram_model::{Llama, LoraAdapter, LoraConfig, WeightDType};
use engram_tokenizer::ChatTokenizer;

use crate::{fixture, fixtures};

/// Loads fixture model `name` on the CPU in f32.
pub fn load(name: &str) -> Llama {
    load_on(name, &Device::flex())
}

/// Loads fixture model `name` in f32 on `device`.
pub fn load_on(name: &str, device: &Device) -> Llama {
    let ckpt = Checkpoint::open(fixture(name).to_str().unwrap()).expect("fixture opens");
    Llama::load(&ckpt, WeightDType::F32, device).expect("fixture loads")
}

/// The tiny f32 fixture checkpoint.
pub fn tiny_ckpt() -> Checkpoint {
    Checkpoint::open(fixture("tiny-f32").to_str().unwrap()).expect("fixture opens")
}

/// The tiny model on the CPU (`autodiff` for training) and its tokenizer.
pub fn tiny(autodiff: bool) -> (Llama, ChatTokenizer) {
    let ckpt = tiny_ckpt();
    let device = if autodiff {
        Device::flex().autodiff()
    } else {
        Device::flex()
    };
    let model = Llama::load(&ckpt, WeightDType::F32, &device).expect("loads");
    let tok = ChatTokenizer::from_files(&ckpt.tokenizer).expect("tokenizer");
    (model, tok)
}

/// Logits of one unpadded sequence as a flat host vector `[T * V]`.
pub fn logits(model: &Llama, ids: &[u32]) -> Vec<f32> {
    model
        .forward(&[ids.to_vec()])
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap()
}

/// Host bytes of every base weight (adapters excluded), in a fixed order.
pub fn base_weights(model: &Llama) -> Vec<Vec<f32>> {
    let mut out = vec![host(model.embed_tokens.val())];
    for layer in 0..model.layers.len() {
        for t in engram_model::LoraTarget::ALL {
            out.push(host(model.linear(layer, t).weight.val()));
        }
    }
    out
}

fn host<const D: usize>(t: burn::tensor::Tensor<D>) -> Vec<f32> {
    t.cast(DType::F32)
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap()
}

/// Writes a random Llama checkpoint (HF layout, f32, weights ~ N(0, 0.02) as transformers
/// initializes them, `lm_head` ~ N(0, 0.08) as `../shared/peers/make_tiny_llama.py` does — with
/// frozen unit norms a 0.02 head caps the logits near ±5, and no adapter can memorize past
/// that — norms 1) with the tiny fixture's tokenizer into `dir`.
pub fn random_model(
    dir: &std::path::Path,
    hidden: usize,
    layers: usize,
    heads: usize,
    kv: usize,
    inter: usize,
    seed: u64,
) {
    use rand::{Rng, SeedableRng};
    let src = fixtures().join("tiny-f32");
    for f in [
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "generation_config.json",
    ] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let mut cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.join("config.json")).unwrap()).unwrap();
    cfg["hidden_size"] = hidden.into();
    cfg["num_hidden_layers"] = layers.into();
    cfg["num_attention_heads"] = heads.into();
    cfg["num_key_value_heads"] = kv.into();
    cfg["intermediate_size"] = inter.into();
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec_pretty(&cfg).unwrap(),
    )
    .unwrap();
    let vocab = 2048;
    let d = hidden / heads;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut normal_std = |n: usize, std: f64| -> Vec<u8> {
        (0..n)
            .flat_map(|_| {
                let (u1, u2): (f64, f64) = (rng.random_range(1e-12..1.0), rng.random());
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                ((std * z) as f32).to_le_bytes()
            })
            .collect()
    };
    let ones = |n: usize| -> Vec<u8> { (0..n).flat_map(|_| 1f32.to_le_bytes()).collect() };
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = vec![
        (
            "model.embed_tokens.weight".into(),
            vec![vocab, hidden],
            normal_std(vocab * hidden, 0.02),
        ),
        (
            "lm_head.weight".into(),
            vec![vocab, hidden],
            normal_std(vocab * hidden, 0.08),
        ),
        ("model.norm.weight".into(), vec![hidden], ones(hidden)),
    ];
    for l in 0..layers {
        let p = format!("model.layers.{l}");
        for (name, out, inp) in [
            ("self_attn.q_proj", heads * d, hidden),
            ("self_attn.k_proj", kv * d, hidden),
            ("self_attn.v_proj", kv * d, hidden),
            ("self_attn.o_proj", hidden, heads * d),
            ("mlp.gate_proj", inter, hidden),
            ("mlp.up_proj", inter, hidden),
            ("mlp.down_proj", hidden, inter),
        ] {
            tensors.push((
                format!("{p}.{name}.weight"),
                vec![out, inp],
                normal_std(out * inp, 0.02),
            ));
        }
        for n in ["input_layernorm", "post_attention_layernorm"] {
            tensors.push((format!("{p}.{n}.weight"), vec![hidden], ones(hidden)));
        }
    }
    let tensors: Vec<(String, HostTensor)> = tensors
        .into_iter()
        .map(|(name, shape, bytes)| {
            let t = HostTensor {
                shape,
                format: FloatFormat::F32,
                bytes,
            };
            (name, t)
        })
        .collect();
    let path = dir.join("model.safetensors");
    std::fs::write(&path, safetensors_bytes(&tensors, &path).unwrap()).unwrap();
}

/// A random 4-layer, hidden-256 model (the size the peer harness measured memorizing) and its
/// tokenizer, on an autodiff CPU device; the directory lives as long as the returned guard.
pub fn small_random(seed: u64) -> (Llama, ChatTokenizer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    random_model(dir.path(), 256, 4, 8, 4, 512, seed);
    let ckpt = Checkpoint::open(dir.path().to_str().unwrap()).unwrap();
    let model = Llama::load(&ckpt, WeightDType::F32, &Device::flex().autodiff()).unwrap();
    let tok = ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    (model, tok, dir)
}

/// `model` with rank-`rank` adapters on every linear layer whose `B` is random too (`N(0, 0.05)`
/// from the device RNG seeded with `seed`; a zero `B` would leave `A`'s gradients zero and a
/// comparison half empty), dropout off. On the CPU backend that generator is the process's:
/// hold [`train_lock`](crate::train_lock) around the call where other tests of the binary draw
/// too, or the draws interleave and the adapter changes from run to run.
pub fn random_adapters(model: Llama, rank: usize, seed: u64) -> Llama {
    use burn::tensor::{Distribution, Tensor};
    let mut model = model
        .with_lora(&LoraConfig::new(rank).with_dropout(0.0).with_init_seed(3))
        .unwrap();
    let device = model.device();
    device.seed(seed);
    let found: Vec<_> = model
        .adapters()
        .iter()
        .map(|(l, t, a)| (*l, *t, a.lora_a.val(), a.scaling, a.lora_b.dims()))
        .collect();
    for (layer, target, a, scaling, [r, out]) in found {
        let b = Tensor::<2>::random([r, out], Distribution::Normal(0.0, 0.05), &device);
        let name = Llama::linear_name(layer, target);
        model.linear_mut(layer, target).lora =
            Some(LoraAdapter::from_factors(&name, a, b, scaling, 0.0));
    }
    model
}
