//! [`crate::pick_rows`]'s backward as one hand-written CubeCL kernel on the GPU backends: each
//! row of the input's gradient is the picked gradient's row its inverse names, or zeros, where
//! the Burn ops fill zeros and then scatter-add. f32 only (other dtypes keep the Burn ops).
//! Registered with Burn's fusion stream as one opaque operation (`crate::cube_op`).

use crate::cube_op::index_type;
use burn::backend::Cube;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::tensor::{DType, Shape};
use burn_cubecl::tensor::CubeTensor;
use cubecl::ir::ElemType;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

/// For `pos < len` (row `r`, column `c` of `[rows, h]`): `out[pos] = g[inverse[r], c]`, or zero
/// where `inverse[r]` is past `g`'s rows (`r` not picked).
#[cube(launch_unchecked)]
fn pick_rows_backward_kernel<I: Numeric>(
    g: &Tensor<f32>,
    inverse: &Tensor<I>,
    out: &mut Tensor<f32>,
    len: usize,
    #[define(I)] _index: ElemType,
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let h = g.shape(1);
    let (r, c) = (pos / h, pos % h);
    let i = usize::cast_from(inverse[r * inverse.stride(0)]);
    let mut value = 0.0f32;
    if i < g.shape(0) {
        value = g[i * g.stride(0) + c * g.stride(1)];
    }
    out[pos] = value;
}

/// Whether [`backward`] takes these inputs: `g` f32 `[n, h]` and an integer `inverse` `[rows]`.
pub(crate) fn supported(g: &FloatTensor<Cube>, inverse: &IntTensor<Cube>) -> bool {
    g.dtype == DType::F32
        && g.shape.num_dims() == 2
        && inverse.shape.num_dims() == 1
        && index_type(inverse.dtype).is_some()
}

/// The input's gradient `[rows, h]` by the kernel, registered in the fusion stream; the inputs
/// must be [`supported`].
pub(crate) fn backward(g: FloatTensor<Cube>, inverse: IntTensor<Cube>) -> FloatTensor<Cube> {
    debug_assert!(supported(&g, &inverse));
    let (rows, h) = (inverse.shape[0], g.shape[1]);
    crate::cube_op::register(
        "engram_pick_rows_backward",
        vec![g, inverse],
        Shape::from([rows, h]),
        DType::F32,
        move |inputs| {
            let [g, inverse]: [CubeTensor; 2] = inputs.try_into().expect("two inputs");
            let client = g.client.clone();
            let out = burn_cubecl::ops::numeric::empty_device_contiguous_dtype(
                client.clone(),
                g.device.clone(),
                Shape::from([rows, h]),
                DType::F32,
            );
            let len = rows * h;
            let cube_dim = CubeDim::new(&client, len);
            let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
            let index = index_type(inverse.dtype).expect("checked by `supported`");
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
                    index,
                );
            }
            out
        },
    )
}
