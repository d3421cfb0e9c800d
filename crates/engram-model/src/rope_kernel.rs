//! RoPE as one hand-written CubeCL kernel on the GPU backends: `y = x · cos + σ · F(x) · sin`
//! with `F` the swap of the halves of the head dimension and `σ = ±1` (+1 the rotation,
//! −1 its inverse, the backward: [`crate::rope_op`]). Burn has no fusable flip, so the composed
//! form is a flip kernel and a fused element-wise kernel; this is one kernel, computing the
//! same two products and sum, so the same bits (tested against the composed ops on llvmpipe).
//! It takes f32 activations only: other dtypes keep the composed ops until a GPU can check the
//! kernel's half-precision rounding against them.
//!
//! Registered with Burn's fusion stream as one opaque operation ([`crate::cube_op`]).

use burn::tensor::DType;
use burn_cubecl::tensor::CubeTensor;
use burn_fusion::FusionTensor;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

use crate::cube_op::{self, CubeRuntime as Runtime};

/// `out[p] = x[p] · c + σ · x[p'] · s`, `p'` the same position in the other half of the head
/// dimension, `c, s` the tables' entries for `p`'s (row, position, dimension) broadcast over
/// heads (and over rows where the table has one). `out` is contiguous in `x`'s shape.
#[cube(launch_unchecked)]
fn rope_kernel(
    x: &Tensor<f32>,
    cos: &Tensor<f32>,
    sin: &Tensor<f32>,
    output: &mut Tensor<f32>,
    sign: f32,
    len: usize,
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let d = x.shape(3);
    let half = d / 2;
    let j = pos % d;
    let rest = pos / d;
    let head = rest % x.shape(2);
    let rest = rest / x.shape(2);
    let t = rest % x.shape(1);
    let b = rest / x.shape(1);
    let partner = if j < half { j + half } else { j - half };
    let row = b * x.stride(0) + t * x.stride(1) + head * x.stride(2);
    let tb = if cos.shape(0) == 1 { 0usize } else { b };
    let at = tb * cos.stride(0) + t * cos.stride(1) + j * cos.stride(3);
    let st = tb * sin.stride(0) + t * sin.stride(1) + j * sin.stride(3);
    let a = x[row + j * x.stride(3)] * cos[at];
    let s = x[row + partner * x.stride(3)] * sin[st];
    output[pos] = a + sign * s;
}

/// The kernel over CubeCL tensors: `x` `[batch, seq, heads, head_dim]`, the tables
/// `[batch or 1, seq, 1, head_dim]`, all f32 (any strides).
fn rotate(x: CubeTensor, cos: CubeTensor, sin: CubeTensor, inverse: bool) -> CubeTensor {
    let (client, device) = (x.client.clone(), x.device.clone());
    let shape = x.meta.shape().clone();
    let len = shape.num_elements();
    let output = burn_cubecl::ops::numeric::empty_device_contiguous_dtype(
        client.clone(),
        device,
        shape,
        x.dtype,
    );
    let cube_dim = CubeDim::new(&client, len);
    let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
    let sign = if inverse { -1.0f32 } else { 1.0 };
    // SAFETY: each unit reads within `x` and the tables (indices from their shapes) and
    // writes `output[pos]`, `pos < len`.
    unsafe {
        rope_kernel::launch_unchecked(
            &client,
            cube_count,
            cube_dim,
            x.into_tensor_arg(),
            cos.into_tensor_arg(),
            sin.into_tensor_arg(),
            output.clone().into_tensor_arg(),
            sign,
            len,
        );
    }
    output
}

/// Whether the kernel takes `x` with these tables: f32 activations and tables, rank 4, an even
/// head dimension, tables broadcasting over heads.
pub(crate) fn supported(
    x: &FusionTensor<Runtime>,
    cos: &FusionTensor<Runtime>,
    sin: &FusionTensor<Runtime>,
) -> bool {
    let (xs, cs) = (&x.shape, &cos.shape);
    x.dtype == DType::F32
        && cos.dtype == DType::F32
        && sin.dtype == DType::F32
        && xs.num_dims() == 4
        && cs.num_dims() == 4
        && sin.shape == cos.shape
        && xs[3] % 2 == 0
        && cs[3] == xs[3]
        && cs[1] == xs[1]
        && cs[2] == 1
        && (cs[0] == 1 || cs[0] == xs[0])
}

/// RoPE (`inverse`: its inverse) of `x` by the kernel, registered in the fusion stream; the
/// inputs must be [`supported`].
pub(crate) fn rotary(
    x: FusionTensor<Runtime>,
    cos: FusionTensor<Runtime>,
    sin: FusionTensor<Runtime>,
    inverse: bool,
) -> FusionTensor<Runtime> {
    debug_assert!(supported(&x, &cos, &sin));
    let (shape, dtype) = (x.shape.clone(), x.dtype);
    let id = if inverse {
        "engram_rope_inverse"
    } else {
        "engram_rope"
    };
    cube_op::register(id, vec![x, cos, sin], shape, dtype, move |inputs| {
        let [x, cos, sin]: [CubeTensor; 3] = inputs.try_into().expect("three inputs");
        rotate(x, cos, sin, inverse)
    })
}
