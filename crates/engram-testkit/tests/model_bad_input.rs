//! Bad input gets a clear error naming the file, tensor or key — never a panic.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use engram_checkpoint::Checkpoint;
use engram_model::{Llama, WeightDType, device_from_name};
use engram_testkit::*;

fn copy_fixture(name: &str, tmp: &Path) -> PathBuf {
    let dst = tmp.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(fixture(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    dst
}

fn load_err(dir: &Path) -> String {
    let r = Checkpoint::open(dir.to_str().unwrap())
        .map_err(engram_model::ModelError::from)
        .and_then(|c| Llama::load(&c, WeightDType::F32, &Device::flex()));
    match r {
        Ok(_) => panic!("{} loaded but should not have", dir.display()),
        Err(e) => e.to_string(),
    }
}

fn edit_config(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&p, v.to_string()).unwrap();
}

/// A safetensors file's tensors: name, dtype, shape, bytes.
type Tensors = Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)>;

/// Rewrites model.safetensors with `f` applied to its tensor map.
fn edit_weights(dir: &Path, f: impl FnOnce(&mut Tensors)) {
    edit_weights_in(&dir.join("model.safetensors"), f)
}

/// Rewrites safetensors file `p` with `f` applied to its tensor map.
fn edit_weights_in(p: &Path, f: impl FnOnce(&mut Tensors)) {
    let bytes = std::fs::read(p).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut ts: Vec<_> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    f(&mut ts);
    let views: Vec<(String, safetensors::tensor::TensorView)> = ts
        .iter()
        .map(|(n, d, s, b)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, p).unwrap();
}

#[test]
fn missing_config_json() {
    let tmp = tempfile::tempdir().unwrap();
    let d = copy_fixture("tiny-f32", tmp.path());
    std::fs::remove_file(d.join("config.json")).unwrap();
    let e = load_err(&d);
    assert!(
        e.contains("config.json not found") && e.contains(&d.display().to_string()),
        "{e}"
    );
}

#[test]
fn unknown_architecture() {
    let tmp = tempfile::tempdir().unwrap();
    let d = copy_fixture("tiny-f32", tmp.path());
    edit_config(&d, |v| {
        v["architectures"] = serde_json::json!(["MambaForCausalLM"])
    });
    let e = load_err(&d);
    assert!(
        e.contains("MambaForCausalLM") && e.contains("config.json"),
        "{e}"
    );
}

#[test]
fn missing_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    let d = copy_fixture("tiny-f32", tmp.path());
    edit_weights(&d, |ts| {
        ts.retain(|t| t.0 != "model.layers.1.mlp.up_proj.weight")
    });
    let e = load_err(&d);
    assert!(
        e.contains("model.layers.1.mlp.up_proj.weight") && e.contains("not found"),
        "{e}"
    );
}

#[test]
fn wrong_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let d = copy_fixture("tiny-f32", tmp.path());
    edit_config(&d, |v| v["intermediate_size"] = serde_json::json!(96));
    let e = load_err(&d);
    assert!(
        e.contains("model.layers.0.mlp.gate_proj.weight")
            && e.contains("[128, 64]")
            && e.contains("[96, 64]"),
        "{e}"
    );
}

#[test]
fn unsupported_dtype() {
    let tmp = tempfile::tempdir().unwrap();
    let d = copy_fixture("tiny-f32", tmp.path());
    edit_weights(&d, |ts| {
        for t in ts.iter_mut().filter(|t| t.0 == "model.norm.weight") {
            t.1 = safetensors::Dtype::I32;
        }
    });
    let e = load_err(&d);
    assert!(
        e.contains("model.norm.weight") && e.contains("unsupported dtype I32"),
        "{e}"
    );
}

#[test]
fn truncated_safetensors() {
    let tmp = tempfile::tempdir().unwrap();
    let d = copy_fixture("tiny-f32", tmp.path());
    let p = d.join("model.safetensors");
    let len = std::fs::metadata(&p).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(len / 2).unwrap();
    let e = load_err(&d);
    assert!(
        e.contains("model.safetensors") && e.contains("truncated or corrupt"),
        "{e}"
    );
}

#[test]
fn index_naming_a_missing_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let d = copy_fixture("tiny-bf16-tied", tmp.path());
    std::fs::remove_file(d.join("model-00002-of-00002.safetensors")).unwrap();
    let e = load_err(&d);
    assert!(
        e.contains("model.safetensors.index.json")
            && e.contains("model-00002-of-00002.safetensors")
            && e.contains("missing"),
        "{e}"
    );
}

#[test]
fn a_tensor_in_two_shards_or_where_the_index_does_not_put_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = copy_fixture("tiny-bf16-tied", tmp.path());
    let (first, second) = (
        d.join("model-00001-of-00002.safetensors"),
        d.join("model-00002-of-00002.safetensors"),
    );
    let index = d.join("model.safetensors.index.json");
    let mut map: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index).unwrap()).unwrap();
    let (moved, _) = map["weight_map"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, f)| *f == "model-00001-of-00002.safetensors")
        .map(|(t, f)| (t.clone(), f.clone()))
        .unwrap();
    // The index puts a tensor of the first shard in the second.
    let original = std::fs::read(&index).unwrap();
    map["weight_map"][&moved] = serde_json::json!("model-00002-of-00002.safetensors");
    std::fs::write(&index, map.to_string()).unwrap();
    let e = load_err(&d);
    assert!(
        e.contains("model.safetensors.index.json")
            && e.contains(&moved)
            && e.contains("model-00001-of-00002.safetensors"),
        "{e}"
    );
    // Both shards hold it: which one is meant is not guessed.
    std::fs::write(&index, original).unwrap();
    let mut copy = None;
    edit_weights_in(&first, |ts| {
        copy = ts.iter().find(|t| t.0 == moved).cloned();
    });
    edit_weights_in(&second, |ts| ts.push(copy.unwrap()));
    let e = load_err(&d);
    assert!(
        e.contains(&moved) && e.contains("also in") && e.contains("model-00001-of-00002"),
        "{e}"
    );
}

#[test]
fn gguf_headers_that_would_overflow_or_divide_by_zero_are_named() {
    use engram_checkpoint::gguf::{GgufValue, GgufWriter, WriterTensor};
    let tmp = tempfile::tempdir().unwrap();
    let open = |name: &str, w: &GgufWriter| {
        let p = tmp.path().join(name);
        w.write(&p).unwrap();
        Checkpoint::open(p.to_str().unwrap())
            .err()
            .unwrap()
            .to_string()
    };
    let tensor = |shape: Vec<usize>| WriterTensor {
        name: "token_embd.weight".into(),
        shape,
        type_id: 0,
        data: vec![0; 16],
    };
    let mut w = GgufWriter::new();
    w.meta("general.architecture", GgufValue::String("llama".into()))
        .meta("general.alignment", GgufValue::U64(0))
        .tensor(tensor(vec![2, 2]));
    let e = open("align0.gguf", &w);
    assert!(
        e.contains("align0.gguf") && e.contains("general.alignment"),
        "{e}"
    );
    let mut w = GgufWriter::new();
    w.meta("general.architecture", GgufValue::String("llama".into()))
        .tensor(tensor(vec![usize::MAX, 4]));
    let e = open("huge.gguf", &w);
    assert!(
        e.contains("huge.gguf") && e.contains("token_embd.weight") && e.contains("addressed"),
        "{e}"
    );
    let mut w = GgufWriter::new();
    w.meta("general.architecture", GgufValue::String("llama".into()))
        .tensor(tensor(vec![]));
    let e = open("scalar.gguf", &w);
    assert!(
        e.contains("scalar.gguf") && e.contains("0 dimensions"),
        "{e}"
    );
}

#[test]
fn truncated_gguf_and_unsupported_gguf_type() {
    use engram_checkpoint::gguf::{GgufValue, GgufWriter, WriterTensor};
    let tmp = tempfile::tempdir().unwrap();
    let mut w = GgufWriter::new();
    w.meta("general.architecture", GgufValue::String("llama".into()))
        .tensor_f32("token_embd.weight", vec![4, 8], &[0.5; 32]);
    let bytes = w.to_bytes();
    let p = tmp.path().join("cut.gguf");
    std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
    let e = Checkpoint::open(p.to_str().unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("cut.gguf") && e.contains("truncated") && e.contains("token_embd.weight"),
        "{e}"
    );
    std::fs::write(&p, &bytes[..30]).unwrap();
    let e = Checkpoint::open(p.to_str().unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("cut.gguf") && e.contains("truncated"), "{e}");

    // A Q2_K tensor (type 10) is named with its type when the model reads it.
    let mut w = GgufWriter::new();
    for (k, v) in [
        ("llama.block_count", 1u64),
        ("llama.context_length", 64),
        ("llama.embedding_length", 256),
        ("llama.feed_forward_length", 64),
        ("llama.attention.head_count", 2),
        ("llama.vocab_size", 8),
    ] {
        w.meta(k, GgufValue::U64(v));
    }
    w.meta("general.architecture", GgufValue::String("llama".into()))
        .meta(
            "llama.attention.layer_norm_rms_epsilon",
            GgufValue::F64(1e-5),
        )
        .tensor(WriterTensor {
            name: "token_embd.weight".into(),
            shape: vec![8, 256],
            type_id: 10, // Q2_K: 84 bytes per 256 weights, not read by engram
            data: vec![0; 84 * 8],
        });
    let p = tmp.path().join("q2k.gguf");
    w.write(&p).unwrap();
    let ckpt = Checkpoint::open(p.to_str().unwrap()).unwrap();
    let e = match Llama::load(&ckpt, WeightDType::F32, &Device::flex()) {
        Ok(_) => panic!("loaded"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("token_embd") || e.contains("model.embed_tokens.weight"),
        "{e}"
    );
    assert!(e.contains("Q2_K"), "{e}");

    let mut w = GgufWriter::new();
    w.meta("general.architecture", GgufValue::String("gpt2".into()));
    let p = tmp.path().join("gpt2.gguf");
    w.write(&p).unwrap();
    let e = Checkpoint::open(p.to_str().unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("general.architecture") && e.contains("gpt2"),
        "{e}"
    );
}

#[test]
fn unknown_backend_and_unresolvable_model() {
    let e = device_from_name("quantum").unwrap_err().to_string();
    assert!(e.contains("unknown backend `quantum`"), "{e}");
    let e = Checkpoint::open("./no/such/dir").err().unwrap().to_string();
    assert!(e.contains("./no/such/dir"), "{e}");
}

#[test]
fn empty_prompt() {
    let ckpt = Checkpoint::open(fixture("tiny-f32").to_str().unwrap()).unwrap();
    let tok = engram_tokenizer::ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    let e = tok.encode_prompt("").unwrap_err().to_string();
    assert!(e.contains("empty prompt"), "{e}");
    let e = tok
        .encode_chat_prompt(&[engram_tokenizer::Message::user("  ")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty prompt"), "{e}");
}
