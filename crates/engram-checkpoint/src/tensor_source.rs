//! The interface the model loader reads tensors through, whatever the file format.

use engram_kernels::QuantizedMatrix;

use crate::{FloatFormat, HostTensor, Result};

/// Shape and stored format of one tensor, known without reading its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Dimensions in HF order (outermost first).
    pub shape: Vec<usize>,
    /// The stored format's name (e.g. "BF16", "Q4_1").
    pub stored_as: String,
}

/// A set of named tensors (HF names, e.g. `model.layers.0.self_attn.q_proj.weight`) that can be
/// read one at a time, so that peak memory stays near one tensor above what was already loaded.
pub trait TensorSource: Send + Sync {
    /// Where the tensors come from (a path), for error messages.
    fn origin(&self) -> String;
    /// All tensor names.
    fn names(&self) -> Vec<String>;
    /// Shape and format of `name`, or `None` when absent.
    fn info(&self, name: &str) -> Option<TensorInfo>;
    /// Reads `name` into host memory. Formats that are not F32/F16/BF16 (GGUF quantized blocks)
    /// are dequantized to F32 here.
    fn read(&self, name: &str) -> Result<HostTensor>;
    /// The float format `read` returns for `name` (F32 for dequantized tensors).
    fn read_format(&self, name: &str) -> Option<FloatFormat>;
    /// The 2-D tensor `name` still quantized, rows in the order [`TensorSource::read`] returns
    /// them, when the source stores it in GGML blocks (any GGUF block format); `Ok(None)`
    /// for float tensors and sources without blocks. The CPU inference kernel reads these.
    fn read_quantized(&self, name: &str) -> Result<Option<QuantizedMatrix>> {
        let _ = name;
        Ok(None)
    }
}
