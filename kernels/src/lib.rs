//! Compute kernels that Burn's backends do not provide in the form engram needs.
//!
//! - [`matmul_nt`]: `y = x · wᵀ` in f32 on the CPU, for the skinny products of inference (a
//!   decode step multiplies a handful of rows by every weight matrix). It reads each weight
//!   matrix once, row by row, in the `[out, in]` layout checkpoints store, which is what makes a
//!   memory-bound decode step fast; see its module docs for the measurements behind it.
//! - [`matmul_nt_quantized`]: the same product reading a weight kept as GGML blocks
//!   ([`blocks`], [`kquants`]), bit-identical to the product with the dequantized matrix.
//! - [`matmul_nt_q8`]: the same product as llama.cpp computes it — activations quantized to Q8
//!   blocks, integer dot products with the weight blocks — faster, and an approximation.
//! - [`quantize`]: f32 weights written as GGML blocks, byte for byte as
//!   llama.cpp's reference quantizers write them (K-quants included).
//! - [`KvBuffer`]: a layer's key/value cache in one preallocated buffer, appended in place, and
//!   a decode step's attention over it.

mod attention;
mod blocks;
mod exp;
mod fields;
mod kquantize;
mod kquants;
mod matmul_nt;
mod q8_dot;
mod quantize;

pub use attention::KvBuffer;
pub use blocks::{BLOCK_ELEMS, BlockFormat, QuantizedMatrix};
pub use exp::silu_mul;
pub use matmul_nt::{matmul_nt, matmul_nt_quantized, simd_available};
pub use q8_dot::{Q8Rows, matmul_nt_q8};
pub use quantize::quantize;
