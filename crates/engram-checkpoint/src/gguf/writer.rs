//! A minimal GGUF (version 3) writer: metadata plus tensors whose payload is given as raw bytes
//! of a GGML type. Used to build small GGUF files for tests and for conversions.

use std::path::Path;

use super::value::GgufValue;
use crate::Result;

/// A tensor to write: GGUF name, HF-order shape (reversed on disk), GGML type id, payload.
pub struct WriterTensor {
    /// GGUF tensor name.
    pub name: String,
    /// Shape in row-major (HF) order.
    pub shape: Vec<usize>,
    /// GGML type id (0 = F32, 1 = F16, 2 = Q4_0, 3 = Q4_1, 6 = Q5_0, 7 = Q5_1, 8 = Q8_0,
    /// 12 = Q4_K, 13 = Q5_K, 14 = Q6_K, 30 = BF16).
    pub type_id: u32,
    /// Payload bytes.
    pub data: Vec<u8>,
}

/// Collects metadata and tensors, then writes a GGUF file.
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, GgufValue)>,
    tensors: Vec<WriterTensor>,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn type_of(v: &GgufValue) -> u32 {
    match v {
        GgufValue::U64(_) => 4,
        GgufValue::I64(_) => 5,
        GgufValue::F64(_) => 6,
        GgufValue::Bool(_) => 7,
        GgufValue::String(_) => 8,
        GgufValue::Array(_) => 9,
    }
}

/// Writes the payload of `v`. Integers are written as u32 / i32 and floats as f32 (the types
/// llama.cpp uses for model hyper-parameters).
fn put_value(out: &mut Vec<u8>, v: &GgufValue) {
    match v {
        GgufValue::U64(x) => out.extend_from_slice(&(*x as u32).to_le_bytes()),
        GgufValue::I64(x) => out.extend_from_slice(&(*x as i32).to_le_bytes()),
        GgufValue::F64(x) => out.extend_from_slice(&(*x as f32).to_le_bytes()),
        GgufValue::Bool(b) => out.push(*b as u8),
        GgufValue::String(s) => put_str(out, s),
        GgufValue::Array(items) => {
            let elem = items.first().map_or(8, type_of);
            out.extend_from_slice(&elem.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for it in items {
                put_value(out, it);
            }
        }
    }
}

impl GgufWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a metadata key.
    pub fn meta(&mut self, key: &str, value: GgufValue) -> &mut Self {
        self.metadata.push((key.to_string(), value));
        self
    }

    /// Adds a tensor.
    pub fn tensor(&mut self, t: WriterTensor) -> &mut Self {
        self.tensors.push(t);
        self
    }

    /// Adds an f32 tensor.
    pub fn tensor_f32(&mut self, name: &str, shape: Vec<usize>, values: &[f32]) -> &mut Self {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(WriterTensor {
            name: name.to_string(),
            shape,
            type_id: 0,
            data,
        })
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        const ALIGN: usize = 32;
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut out, k);
            out.extend_from_slice(&type_of(v).to_le_bytes());
            put_value(&mut out, v);
        }
        let mut offset = 0usize;
        let mut offsets = Vec::new();
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
            for d in t.shape.iter().rev() {
                out.extend_from_slice(&(*d as u64).to_le_bytes());
            }
            out.extend_from_slice(&t.type_id.to_le_bytes());
            out.extend_from_slice(&(offset as u64).to_le_bytes());
            offsets.push(offset);
            offset = (offset + t.data.len()).div_ceil(ALIGN) * ALIGN;
        }
        out.resize(out.len().div_ceil(ALIGN) * ALIGN, 0);
        let base = out.len();
        for (t, off) in self.tensors.iter().zip(offsets) {
            out.resize(base + off, 0);
            out.extend_from_slice(&t.data);
        }
        out
    }

    /// Writes the file, atomically ([`engram_io::write_file`]: a temporary sibling, synced and
    /// renamed into place).
    pub fn write(&self, path: &Path) -> Result<()> {
        engram_io::write_file(path, &self.to_bytes()).map_err(crate::hf_writer::atomic)
    }
}
