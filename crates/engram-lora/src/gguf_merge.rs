//! A GGUF base with an adapter folded in, written as a GGUF file llama.cpp loads on its own, in
//! one of llama.cpp's file types ([`GgufMix`]: F16, Q8_0, Q4_K_M): every metadata key
//! (tokenizer and chat template included) carried over, `general.file_type` set to the type
//! written; each adapted weight dequantized, `W + scaling · B·A` ([`crate::merge`]'s product)
//! added in llama.cpp's layout (the delta's q/k rows permuted as llama.cpp's converter permutes
//! the base's) and stored as the file type's rules give it (quantized exactly as llama.cpp's
//! reference quantizers would). A weight the adapter does not touch is converted the same way
//! when the base stores it as floats, and copied as stored when the base has it quantized
//! already (re-quantizing quantized blocks only adds error; llama.cpp's quantizer refuses it
//! too without `--allow-requantize`); vectors such as the norms are copied.

use std::collections::BTreeMap;
use std::path::Path;

use burn::tensor::Device;
use engram_checkpoint::gguf::{
    GgmlType, GgufLlama, GgufMix, GgufValue, GgufWriter, MixModel, WriterTensor, encode,
};

use crate::error::{LoraError, Result};
use crate::gguf_adapter::{BaseShape, gguf_weight, refuse_existing};
use crate::merge::delta;
use crate::peft::{PeftAdapter, PeftFactors};

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedGguf {
    /// Weights with the adapter folded in.
    pub merged: usize,
    /// Untouched float weights converted to the file type.
    pub converted: usize,
    /// Tensors copied as stored (vectors, and weights the base holds quantized).
    pub copied: usize,
    /// Merged and converted weights by the GGML type written (llama.cpp's names).
    pub types: BTreeMap<&'static str, usize>,
    /// Bytes of the file.
    pub bytes: usize,
}

/// The model facts [`GgufMix::tensor_type`] decides by, from the base's config.
fn mix_model(llama: &GgufLlama) -> MixModel {
    let c = llama.config();
    let n = |k: &str| c[k].as_u64().unwrap_or(0) as usize;
    MixModel {
        layers: n("num_hidden_layers"),
        heads: n("num_attention_heads"),
        kv_heads: c["num_key_value_heads"]
            .as_u64()
            .map_or(n("num_attention_heads"), |v| v as usize),
        tied: !llama.file().tensors.contains_key("output.weight"),
    }
}

/// Writes `base` (a llama GGUF file) with `adapter` folded in to `out` as file type `mix`,
/// atomically; an existing `out` is refused unless `force`. Every adapted weight is checked
/// against the file first; the low-rank products run on `device`.
pub fn merge_to_gguf(
    base: &Path,
    adapter: &PeftAdapter,
    out: &Path,
    mix: GgufMix,
    force: bool,
    device: &Device,
) -> Result<MergedGguf> {
    refuse_existing(out, force)?;
    let llama = GgufLlama::open(base)?;
    let origin = base.display().to_string();
    let base_shape = BaseShape::of(llama.config(), &origin)?;
    base_shape.check(adapter, &origin)?;
    let by_name: BTreeMap<String, &PeftFactors> = adapter
        .factors
        .iter()
        .map(|f| (gguf_weight(f), f))
        .collect();
    let (file, scaling, model) = (llama.file(), adapter.config.scaling(), mix_model(&llama));
    let mut w = GgufWriter::new();
    for (k, v) in &file.metadata {
        match k.as_str() {
            "general.file_type" | "general.quantization_version" => {}
            _ => {
                w.meta(k, v.clone());
            }
        }
    }
    w.meta("general.file_type", GgufValue::U64(mix.file_type() as u64));
    // GGML_QNT_VERSION, which llama.cpp's quantizer writes with every file type.
    w.meta("general.quantization_version", GgufValue::U64(2));
    let mut tensors: Vec<_> = file.tensors.values().collect();
    tensors.sort_by_key(|t| t.offset);
    let mut m = MergedGguf {
        merged: 0,
        converted: 0,
        copied: 0,
        types: BTreeMap::new(),
        bytes: 0,
    };
    for t in tensors {
        let shape: Vec<usize> = t.dims.iter().rev().map(|&d| d as usize).collect();
        let stored = GgmlType::from_id(t.type_id).ok();
        let target = mix.tensor_type(&t.name, &t.dims, &model);
        let factors = by_name.get(&t.name);
        let values = match (factors, target) {
            (Some(f), Some(_)) => {
                let mut weight = file.read_f32(&t.name)?;
                let d =
                    base_shape.llama_cpp_rows(f.target, delta(f, scaling, device), f.d_out, f.d_in);
                for (x, y) in weight.iter_mut().zip(&d) {
                    *x += y;
                }
                m.merged += 1;
                Some(weight)
            }
            (None, Some(ty)) if stored.is_some_and(|s| s != ty && s.block_format().is_none()) => {
                m.converted += 1;
                Some(file.read_f32(&t.name)?)
            }
            (Some(_), None) => {
                return Err(LoraError::adapter(
                    out,
                    format!(
                        "{} is adapted but is not a weight matrix {} stores",
                        t.name,
                        mix.name()
                    ),
                ));
            }
            _ => None,
        };
        let tensor = match (values, target) {
            (Some(v), Some(ty)) => {
                *m.types.entry(ty.name()).or_default() += 1;
                WriterTensor {
                    name: t.name.clone(),
                    shape,
                    type_id: ty.id(),
                    data: encode(ty, &v),
                }
            }
            _ => {
                m.copied += 1;
                let (_, bytes) = file.raw(&t.name)?;
                WriterTensor {
                    name: t.name.clone(),
                    shape,
                    type_id: t.type_id,
                    data: bytes.to_vec(),
                }
            }
        };
        w.tensor(tensor);
    }
    let bytes = w.to_bytes();
    m.bytes = bytes.len();
    engram_io::write_file(out, &bytes).map_err(|e| LoraError::adapter(out, e.to_string()))?;
    Ok(m)
}
