//! Reference outputs another implementation wrote — transformers' logits and greedy tokens, a
//! sentence encoder's embeddings — as a safetensors file of f32 and i64 tensors with string
//! metadata: what `engram selftest` and the parity tests compare against.

use std::path::{Path, PathBuf};

use crate::{CheckpointError, Result};

/// A reference file held in memory.
pub struct ReferenceFile {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl ReferenceFile {
    /// Reads `path` (and checks that its header parses).
    pub fn open(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| CheckpointError::io(path, e))?;
        let file = Self {
            path: path.to_path_buf(),
            bytes,
        };
        file.st()?;
        Ok(file)
    }

    fn st(&self) -> Result<safetensors::SafeTensors<'_>> {
        safetensors::SafeTensors::deserialize(&self.bytes).map_err(|e| {
            CheckpointError::Safetensors {
                path: self.path.clone(),
                message: e.to_string(),
            }
        })
    }

    fn tensor(&self, name: &str, dtype: safetensors::Dtype) -> Result<(Vec<usize>, Vec<u8>)> {
        let st = self.st()?;
        let t = st
            .tensor(name)
            .map_err(|_| CheckpointError::MissingTensor {
                name: name.to_string(),
                origin: self.path.display().to_string(),
            })?;
        if t.dtype() != dtype {
            return Err(CheckpointError::UnsupportedDType {
                name: name.to_string(),
                origin: self.path.display().to_string(),
                dtype: format!("{:?} (expected {dtype:?})", t.dtype()),
            });
        }
        Ok((t.shape().to_vec(), t.data().to_vec()))
    }

    /// Whether the file holds tensor `name`.
    pub fn has(&self, name: &str) -> bool {
        self.st().is_ok_and(|st| st.names().contains(&name))
    }

    /// Shape and values of f32 tensor `name`.
    pub fn f32(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
        let (shape, bytes) = self.tensor(name, safetensors::Dtype::F32)?;
        Ok((shape, crate::decode_f32(&bytes, crate::FloatFormat::F32)))
    }

    /// Token ids stored as i64 tensor `name`.
    pub fn ids(&self, name: &str) -> Result<Vec<u32>> {
        let (_, bytes) = self.tensor(name, safetensors::Dtype::I64)?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")) as u32)
            .collect())
    }

    /// A metadata entry.
    pub fn metadata(&self, key: &str) -> Option<String> {
        let (_, meta) = safetensors::SafeTensors::read_metadata(&self.bytes).ok()?;
        meta.metadata().as_ref()?.get(key).cloned()
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
