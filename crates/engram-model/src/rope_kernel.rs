//! RoPE as one hand-written CubeCL kernel on the GPU backends: `y = x · cos + σ · F(x) · sin`
//! with `F` the swap of the halves of the head dimension and `σ = ±1` (+1 the rotation,
//! −1 its inverse, the backward: [`crate::rope_op`]). Burn has no fusable flip, so the composed
//! form is a flip kernel and a fused element-wise kernel; this is one kernel, computing the
//! same two products and sum, so the same bits (tested against the composed ops on llvmpipe).
//! It takes f32 activations only: other dtypes keep the composed ops until a GPU can check the
//! kernel's half-precision rounding against them.
//!
//! The kernel also lays its output out for attention: the rotation writes `[b, t, h, d]` heads
//! first (`[b, h, t, d]`), as the score and value products read q and k, and its inverse writes
//! the gradient back in the projections' layout — the copy to and from heads-first that a view
//! (`swap_dims`) would cost the next reshape or matmul happens inside the kernel instead.
//!
//! Registered with Burn's fusion stream as one opaque operation ([`crate::cube_op`]).

use burn::tensor::{DType, Shape};
use burn_cubecl::tensor::CubeTensor;
use burn_fusion::FusionTensor;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

use crate::cube_op::{self, CubeRuntime as Runtime};

/// `out[p] = x[p] · c + σ · x[p'] · s`, `p'` the same position in the other half of the head
/// dimension, `c, s` the tables' entries for `p`'s (row, position, dimension) broadcast over
/// heads (and over rows where the table has one). `out` is contiguous in `x`'s shape with axes
/// 1 and 2 (sequence and heads) swapped: `x` `[b, t, h, d]` is written heads first
/// (`heads_first`, the rotation), `x` `[b, h, t, d]` back to `[b, t, h, d]` (the inverse).
#[cube(launch_unchecked)]
fn rope_kernel(
    x: &Tensor<f32>,
    cos: &Tensor<f32>,
    sin: &Tensor<f32>,
    output: &mut Tensor<f32>,
    sign: f32,
    len: usize,
    heads_first: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let d = output.shape(3);
    let half = d / 2;
    let j = pos % d;
    let rest = pos / d;
    let a2 = rest % output.shape(2);
    let rest = rest / output.shape(2);
    let a1 = rest % output.shape(1);
    let b = rest / output.shape(1);
    let t = if heads_first == 1 { a2 } else { a1 };
    let partner = if j < half { j + half } else { j - half };
    // Output axis 1 is x's axis 2 and the other way round.
    let row = b * x.stride(0) + a1 * x.stride(2) + a2 * x.stride(1);
    let tb = if cos.shape(0) == 1 { 0usize } else { b };
    let at = tb * cos.stride(0) + t * cos.stride(1) + j * cos.stride(3);
    let st = tb * sin.stride(0) + t * sin.stride(1) + j * sin.stride(3);
    let a = x[row + j * x.stride(3)] * cos[at];
    let s = x[row + partner * x.stride(3)] * sin[st];
    output[pos] = a + sign * s;
}

/// The kernel over CubeCL tensors: `x` `[batch, seq, heads, head_dim]` (the rotation; the
/// inverse: `[batch, heads, seq, head_dim]`), the tables `[batch or 1, seq, 1, head_dim]`, all
/// f32 (any strides); the output has `x`'s axes 1 and 2 swapped.
fn rotate(x: CubeTensor, cos: CubeTensor, sin: CubeTensor, inverse: bool) -> CubeTensor {
    let (client, device) = (x.client.clone(), x.device.clone());
    let shape = swapped(x.meta.shape());
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
            u32::from(!inverse),
        );
    }
    output
}

/// `shape` with axes 1 and 2 swapped.
fn swapped(shape: &Shape) -> Shape {
    let mut dims = shape.to_vec();
    dims.swap(1, 2);
    Shape::from(dims)
}

/// Whether the kernel takes `x` with these tables: f32 activations and tables, rank 4, an even
/// head dimension, tables broadcasting over heads; `x` `[b, t, h, d]` (the rotation) or
/// `[b, h, t, d]` (`inverse`).
pub(crate) fn supported(
    x: &FusionTensor<Runtime>,
    cos: &FusionTensor<Runtime>,
    sin: &FusionTensor<Runtime>,
    inverse: bool,
) -> bool {
    let (xs, cs) = (&x.shape, &cos.shape);
    let seq = if inverse { 2 } else { 1 };
    x.dtype == DType::F32
        && cos.dtype == DType::F32
        && sin.dtype == DType::F32
        && xs.num_dims() == 4
        && cs.num_dims() == 4
        && sin.shape == cos.shape
        && xs[3] % 2 == 0
        && cs[3] == xs[3]
        && cs[1] == xs[seq]
        && cs[2] == 1
        && (cs[0] == 1 || cs[0] == xs[0])
}

/// RoPE of `x` `[b, t, h, d]` returned heads first, `[b, h, t, d]` (`inverse`: the inverse
/// rotation of `x` `[b, h, t, d]`, returned `[b, t, h, d]`) by the kernel, registered in the
/// fusion stream; the inputs must be [`supported`].
pub(crate) fn rotary(
    x: FusionTensor<Runtime>,
    cos: FusionTensor<Runtime>,
    sin: FusionTensor<Runtime>,
    inverse: bool,
) -> FusionTensor<Runtime> {
    debug_assert!(supported(&x, &cos, &sin, inverse));
    let (shape, dtype) = (swapped(&x.shape), x.dtype);
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
