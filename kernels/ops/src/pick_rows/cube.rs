//! [`crate::pick_rows`]'s backward as one hand-written CubeCL kernel on the GPU backends: each
//! row of the input's gradient is the picked gradient's row its inverse names, or zeros, where
//! the Burn ops fill zeros and then scatter-add. Generic over the float type (f32, f16, bf16):
//! a copy, so the same bits as the Burn ops in each. Registered with Burn's fusion stream as one opaque operation (`crate::cube_op`).

use crate::cube_op::{float_type, index_type};
use burn::backend::Cube;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::tensor::Shape;
use burn_cubecl::tensor::CubeTensor;
use cubecl::ir::ElemType;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

/// For `pos < len` (row `r`, column `c` of `[rows, h]`): `out[pos] = g[inverse[r], c]`, or zero
/// where `inverse[r]` is past `g`'s rows (`r` not picked).
#[cube(launch_unchecked)]
fn pick_rows_backward_kernel<F: Float, I: Numeric>(
    g: &Tensor<F>,
    inverse: &Tensor<I>,
    out: &mut Tensor<F>,
    len: usize,
    #[define(F, I)] _types: [ElemType; 2],
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let h = g.shape(1);
    let (r, c) = (pos / h, pos % h);
    let i = usize::cast_from(inverse[r * inverse.stride(0)]);
    let mut value = F::new(0.0);
    if i < g.shape(0) {
        value = g[i * g.stride(0) + c * g.stride(1)];
    }
    out[pos] = value;
}

/// Whether [`backward`] takes these inputs: `g` `[n, h]` (f32, f16 or bf16) and an integer
/// `inverse` `[rows]`.
pub(crate) fn supported(g: &FloatTensor<Cube>, inverse: &IntTensor<Cube>) -> bool {
    float_type(g.dtype).is_some()
        && g.shape.num_dims() == 2
        && inverse.shape.num_dims() == 1
        && index_type(inverse.dtype).is_some()
}

/// The input's gradient `[rows, h]` by the kernel, registered in the fusion stream; the inputs
/// must be [`supported`].
pub(crate) fn backward(g: FloatTensor<Cube>, inverse: IntTensor<Cube>) -> FloatTensor<Cube> {
    debug_assert!(supported(&g, &inverse));
    let (rows, h, dtype) = (inverse.shape[0], g.shape[1], g.dtype);
    crate::cube_op::register(
        "engram_pick_rows_backward",
        vec![g, inverse],
        Shape::from([rows, h]),
        dtype,
        move |inputs| {
            let [g, inverse]: [CubeTensor; 2] = inputs.try_into().expect("two inputs");
            let client = g.client.clone();
            let out = burn_cubecl::ops::numeric::empty_device_contiguous_dtype(
                client.clone(),
                g.device.clone(),
                Shape::from([rows, h]),
                dtype,
            );
            let len = rows * h;
            let cube_dim = CubeDim::new(&client, len);
            let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
            let types = [float_type(dtype), index_type(inverse.dtype)]
                .map(|t| t.expect("checked by `supported`"));
            // SAFETY: unit `pos < len` reads `inverse[pos / h]` (`[rows]`), a row of `g` only
            // where it is within `g`'s rows, column `pos % h < h`, and writes `out[pos]`
            // (contiguous, `[rows, h]`).
            unsafe {
                pick_rows_backward_kernel::launch_unchecked(
                    &client,
                    cube_count,
                    cube_dim,
                    g.into_tensor_arg(),
                    inverse.into_tensor_arg(),
                    out.clone().into_tensor_arg(),
                    len,
                    types,
                );
            }
            out
        },
    )
}
