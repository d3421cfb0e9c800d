//! Stored and computed float formats: F16 safetensors decode exactly; a model held in bf16 on the
//! device stays close to f32.

use std::path::Path;

use burn::tensor::Device;
use engram_checkpoint::{Checkpoint, SafetensorsCheckpoint, TensorSource};
use engram_model::{Llama, WeightDType};
use engram_testkit::*;

/// Writes `tiny-f32`'s weights rounded to f16, once as F16 and once as F32, beside its config and
/// tokenizer.
fn write_f16_pair(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let src = fixture("tiny-f32");
    let st = SafetensorsCheckpoint::open_dir(&src).unwrap();
    let mut f16s = Vec::new();
    let mut f32s = Vec::new();
    for name in st.names() {
        let t = st.read(&name).unwrap();
        let h: Vec<half::f16> = t.to_f32().iter().map(|&x| half::f16::from_f32(x)).collect();
        f16s.push((
            name.clone(),
            t.shape.clone(),
            h.iter()
                .flat_map(|x| x.to_bits().to_le_bytes())
                .collect::<Vec<u8>>(),
        ));
        f32s.push((
            name,
            t.shape.clone(),
            h.iter()
                .flat_map(|x| x.to_f32().to_le_bytes())
                .collect::<Vec<u8>>(),
        ));
    }
    let mut dirs = Vec::new();
    for (sub, tensors, dtype) in [
        ("f16", f16s, safetensors::Dtype::F16),
        ("f32", f32s, safetensors::Dtype::F32),
    ] {
        let d = tmp.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        for f in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
            std::fs::copy(src.join(f), d.join(f)).unwrap();
        }
        let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
            .iter()
            .map(|(n, s, b)| {
                (
                    n.clone(),
                    safetensors::tensor::TensorView::new(dtype, s.clone(), b).unwrap(),
                )
            })
            .collect();
        safetensors::serialize_to_file(views, None, &d.join("model.safetensors")).unwrap();
        dirs.push(d);
    }
    (dirs[0].clone(), dirs[1].clone())
}

fn load_dir(dir: &Path, dtype: WeightDType) -> Llama {
    let ckpt = Checkpoint::open(dir.to_str().unwrap()).unwrap();
    Llama::load(&ckpt, dtype, &Device::flex()).unwrap()
}

#[test]
fn f16_safetensors_decode_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let (f16_dir, f32_dir) = write_f16_pair(tmp.path());
    let a = load_dir(&f16_dir, WeightDType::F32);
    let b = load_dir(&f32_dir, WeightDType::F32);
    let ids: Vec<u32> = (0..30).map(|i| (i * 53 + 7) % 1792).collect();
    assert_eq!(logits(&a, &ids), logits(&b, &ids));
}

#[test]
fn bf16_weights_on_device_stay_close_to_f32() {
    let f32m = load("tiny-f32");
    let bf16m = load_dir(&fixture("tiny-f32"), WeightDType::BF16);
    assert_eq!(bf16m.embed_tokens.val().dtype(), burn::tensor::DType::BF16);
    let reference = Reference::open(&fixture("tiny-f32").join("reference.safetensors"));
    let ids = reference.ids("input_ids_long_text");
    let d = max_abs_diff(&logits(&f32m, &ids), &logits(&bf16m, &ids));
    // transformers' own bf16 run of this model differs from its f32 run by ~5e-3.
    assert!(d > 0.0 && d < 5e-2, "bf16 vs f32 max diff {d:e}");
}

/// A bf16 model holds its norm weights in bf16, as transformers does, where engram held them in
/// f32 and cast them to bf16 at every use: the same logits, bit for bit.
#[test]
fn bf16_norm_weights_are_held_in_bf16_for_the_same_logits() {
    use burn::tensor::DType;
    let bf16m = load_dir(&fixture("tiny-f32"), WeightDType::BF16);
    let f32m = load("tiny-f32");
    let mut cast_at_use = bf16m.clone();
    for (l, f) in cast_at_use.layers.iter_mut().zip(&f32m.layers) {
        assert_eq!(l.input_layernorm.weight.val().dtype(), DType::BF16);
        assert_eq!(l.post_attention_layernorm.weight.val().dtype(), DType::BF16);
        l.input_layernorm = f.input_layernorm.clone();
        l.post_attention_layernorm = f.post_attention_layernorm.clone();
    }
    assert_eq!(bf16m.norm.weight.val().dtype(), DType::BF16);
    cast_at_use.norm = f32m.norm.clone();
    assert_eq!(cast_at_use.norm.weight.val().dtype(), DType::F32);
    let ids: Vec<u32> = (0..30).map(|i| (i * 53 + 7) % 1792).collect();
    assert_eq!(logits(&bf16m, &ids), logits(&cast_at_use, &ids));
}
