//! Shared helpers of the model tests: fixture paths, reference files, loading.
#![allow(dead_code)]

use std::path::PathBuf;

use burn::tensor::Device;
use engram_checkpoint::Checkpoint;
use engram_model::{Llama, WeightDType};

/// `tests/fixtures` at the workspace root.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// A fixture model directory.
pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// A reference file (safetensors written by transformers) held in memory.
pub struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    pub fn open(path: &std::path::Path) -> Self {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Self { bytes }
    }

    fn st(&self) -> safetensors::SafeTensors<'_> {
        safetensors::SafeTensors::deserialize(&self.bytes).expect("reference parses")
    }

    pub fn has(&self, name: &str) -> bool {
        self.st().names().contains(&name)
    }

    pub fn f32(&self, name: &str) -> (Vec<usize>, Vec<f32>) {
        let st = self.st();
        let t = st
            .tensor(name)
            .unwrap_or_else(|_| panic!("reference lacks {name}"));
        assert_eq!(t.dtype(), safetensors::Dtype::F32, "{name}");
        let v = t
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        (t.shape().to_vec(), v)
    }

    pub fn ids(&self, name: &str) -> Vec<u32> {
        let st = self.st();
        let t = st
            .tensor(name)
            .unwrap_or_else(|_| panic!("reference lacks {name}"));
        assert_eq!(t.dtype(), safetensors::Dtype::I64, "{name}");
        t.data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u32)
            .collect()
    }

    pub fn metadata(&self, key: &str) -> Option<String> {
        let (_, meta) = safetensors::SafeTensors::read_metadata(&self.bytes).ok()?;
        meta.metadata().as_ref()?.get(key).cloned()
    }
}

/// Loads a fixture model on the CPU in f32.
pub fn load(name: &str) -> Llama {
    load_on(name, &Device::flex())
}

/// Loads a fixture model in f32 on `device`.
#[allow(dead_code)] // not every test file uses it
pub fn load_on(name: &str, device: &Device) -> Llama {
    let ckpt = Checkpoint::open(fixture(name).to_str().unwrap()).expect("fixture opens");
    Llama::load(&ckpt, WeightDType::F32, device).expect("fixture loads")
}

/// Largest absolute difference.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Logits of one unpadded sequence as a flat host vector `[T * V]`.
pub fn logits(model: &Llama, ids: &[u32]) -> Vec<f32> {
    model
        .forward(&[ids.to_vec()])
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap()
}
