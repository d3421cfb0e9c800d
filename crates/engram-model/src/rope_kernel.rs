//! RoPE as one hand-written CubeCL kernel on the GPU backends: `y = x · cos + σ · F(x) · sin`
//! with `F` the swap of the halves of the head dimension and `σ = ±1` (+1 the rotation,
//! −1 its inverse, the backward: [`crate::rope_op`]). Burn has no fusable flip, so the composed
//! form is a flip kernel and a fused element-wise kernel; this is one kernel, computing the
//! same two products and sum, so the same bits (tested against the composed ops on llvmpipe).
//! It takes f32 activations only: other dtypes keep the composed ops until a GPU can check the
//! kernel's half-precision rounding against them.
//!
//! The kernel reads `x` and the tables through their strides and broadcasts the tables' size-1
//! axes, so it also runs on views: given a heads-first view of the projections' `[b, t, h, d]`
//! (with the tables' view to match) it writes q and k heads first, as attention's products read
//! them, and given a view of a heads-first gradient it writes the gradient back in the
//! projections' layout ([`crate::rope_op::rotary_heads_first`]) — the layout copy a view would
//! cost the next reshape or product happens inside the kernel.
//!
//! Registered with Burn's fusion stream as one opaque operation ([`crate::cube_op`]).

use burn::tensor::DType;
use burn_cubecl::tensor::CubeTensor;
use burn_fusion::FusionTensor;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

use crate::cube_op::{self, CubeRuntime as Runtime};

/// `out[p] = x[p] · c + σ · x[p'] · s`, `p'` the same position in the other half of the head
/// dimension (the last), `c, s` the tables' entries for `p`'s index, each table dimension of
/// size 1 broadcast (over heads, and over rows where the table has one). `x` and the tables may
/// be strided views (a heads-first view of `[b, t, heads, d]` activations with the tables' view
/// to match); `out` is contiguous in `x`'s shape.
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
    let i2 = rest % x.shape(2);
    let rest = rest / x.shape(2);
    let i1 = rest % x.shape(1);
    let i0 = rest / x.shape(1);
    let partner = if j < half { j + half } else { j - half };
    let row = i0 * x.stride(0) + i1 * x.stride(1) + i2 * x.stride(2);
    // A table dimension of size 1 is broadcast.
    let t0 = if cos.shape(0) == 1 { 0usize } else { i0 };
    let t1 = if cos.shape(1) == 1 { 0usize } else { i1 };
    let t2 = if cos.shape(2) == 1 { 0usize } else { i2 };
    let at = t0 * cos.stride(0) + t1 * cos.stride(1) + t2 * cos.stride(2) + j * cos.stride(3);
    let st = t0 * sin.stride(0) + t1 * sin.stride(1) + t2 * sin.stride(2) + j * sin.stride(3);
    let a = x[row + j * x.stride(3)] * cos[at];
    let s = x[row + partner * x.stride(3)] * sin[st];
    output[pos] = a + sign * s;
}

/// The kernel over CubeCL tensors: `x` rank 4 (`[batch, seq, heads, head_dim]`, or that
/// swapped heads first), the tables broadcasting to it, all f32 (any strides).
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
/// last (head) dimension, tables of one shape broadcasting to `x`'s (each dimension `x`'s or
/// 1, the last `x`'s).
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
        && (0..3).all(|i| cs[i] == xs[i] || cs[i] == 1)
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
