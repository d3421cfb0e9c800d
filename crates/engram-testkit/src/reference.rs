//! Reference files that transformers (or sentence-transformers) wrote, read through
//! [`engram_checkpoint::ReferenceFile`]; a missing tensor fails the test, naming it.

use std::path::Path;

use engram_checkpoint::ReferenceFile;

/// A reference file held in memory.
pub struct Reference(ReferenceFile);

impl Reference {
    /// Reads `path` (panics naming it when it is missing or corrupt).
    pub fn open(path: &Path) -> Self {
        Self(ReferenceFile::open(path).unwrap_or_else(|e| panic!("{e}")))
    }

    /// Whether the file holds tensor `name`.
    pub fn has(&self, name: &str) -> bool {
        self.0.has(name)
    }

    /// Shape and values of f32 tensor `name`.
    pub fn shaped(&self, name: &str) -> (Vec<usize>, Vec<f32>) {
        self.0.f32(name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Values of f32 tensor `name`.
    pub fn f32(&self, name: &str) -> Vec<f32> {
        self.shaped(name).1
    }

    /// Token ids stored as i64 tensor `name`.
    pub fn ids(&self, name: &str) -> Vec<u32> {
        self.0.ids(name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A metadata entry.
    pub fn metadata(&self, key: &str) -> Option<String> {
        self.0.metadata(key)
    }
}
