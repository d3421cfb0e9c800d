//! A tensor read from a checkpoint into host memory, still in its stored float format.

/// Float formats that checkpoints store and that the model can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FloatFormat {
    /// IEEE single precision.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
}

impl FloatFormat {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            FloatFormat::F32 => 4,
            FloatFormat::F16 | FloatFormat::BF16 => 2,
        }
    }

    /// The name safetensors uses ("F32", "F16", "BF16").
    pub fn safetensors_name(self) -> &'static str {
        match self {
            FloatFormat::F32 => "F32",
            FloatFormat::F16 => "F16",
            FloatFormat::BF16 => "BF16",
        }
    }
}

/// A dense row-major tensor in host memory: little-endian bytes of `format`, shape in HF order
/// (e.g. `[out, in]` for a linear weight).
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Element format of `bytes`.
    pub format: FloatFormat,
    /// Little-endian payload, `shape.iter().product() * format.size()` bytes.
    pub bytes: Vec<u8>,
}

impl HostTensor {
    /// Wraps f32 values.
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Self {
        let mut bytes = Vec::with_capacity(values.len() * 4);
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        Self {
            shape,
            format: FloatFormat::F32,
            bytes,
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Decodes the payload to f32 (exact for all three formats).
    pub fn to_f32(&self) -> Vec<f32> {
        decode_f32(&self.bytes, self.format)
    }
}

/// Decodes little-endian `bytes` of `format` into f32. The payload may be unaligned.
pub fn decode_f32(bytes: &[u8], format: FloatFormat) -> Vec<f32> {
    match format {
        FloatFormat::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        FloatFormat::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
            .collect(),
        FloatFormat::BF16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
            .collect(),
    }
}

/// Encodes f32 `values` as little-endian `format` (rounding to nearest even for F16 and BF16).
pub fn encode_f32(values: &[f32], format: FloatFormat) -> Vec<u8> {
    match format {
        FloatFormat::F32 => values.iter().flat_map(|x| x.to_le_bytes()).collect(),
        FloatFormat::F16 => values
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect(),
        FloatFormat::BF16 => values
            .iter()
            .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
            .collect(),
    }
}
