//! Reference files that transformers (or sentence-transformers) wrote: safetensors holding f32
//! outputs, i64 token ids and string metadata.

use std::path::Path;

/// A reference file held in memory.
pub struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    /// Reads `path` (panics naming it when it is missing).
    pub fn open(path: &Path) -> Self {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Self { bytes }
    }

    fn st(&self) -> safetensors::SafeTensors<'_> {
        safetensors::SafeTensors::deserialize(&self.bytes).expect("reference parses")
    }

    /// Whether the file holds tensor `name`.
    pub fn has(&self, name: &str) -> bool {
        self.st().names().contains(&name)
    }

    /// Shape and values of f32 tensor `name`.
    pub fn shaped(&self, name: &str) -> (Vec<usize>, Vec<f32>) {
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

    /// Values of f32 tensor `name`.
    pub fn f32(&self, name: &str) -> Vec<f32> {
        self.shaped(name).1
    }

    /// Token ids stored as i64 tensor `name`.
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

    /// A metadata entry.
    pub fn metadata(&self, key: &str) -> Option<String> {
        let (_, meta) = safetensors::SafeTensors::read_metadata(&self.bytes).ok()?;
        meta.metadata().as_ref()?.get(key).cloned()
    }
}
