//! The labels' cross-entropy backward ([`crate::cross_entropy`]) as one hand-written CubeCL
//! kernel on the GPU backends: `dlogits = (g / N) · (exp(log p) − onehot(t))` in one pass,
//! where the Burn ops take an element-wise kernel, a fill of the targets' column and a scatter.
//! f32 `log p` only (it always is: the op computes in f32). Registered with Burn's fusion stream
//! as one opaque operation (`crate::cube_op`).

use crate::cube_op::index_type;
use burn::backend::Cube;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::tensor::DType;
use burn_cubecl::tensor::CubeTensor;
use cubecl::ir::ElemType;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

/// For `pos < len` (row `r`, column `c` of `[n, vocab]`): `out[pos] = s · exp(logp[r, c])`,
/// minus `s` where `c` is row `r`'s target, with `s = g[0] / normalizer` — the terms of the
/// Burn ops' `exp(log p) · s` and the scatter of `−s`, in their order.
#[cube(launch_unchecked)]
fn label_nll_backward_kernel<I: Numeric>(
    logp: &Tensor<f32>,
    targets: &Tensor<I>,
    g: &Tensor<f32>,
    out: &mut Tensor<f32>,
    normalizer: f32,
    len: usize,
    #[define(I)] _index: ElemType,
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let vocab = logp.shape(1);
    let (r, c) = (pos / vocab, pos % vocab);
    let s = g[0] / normalizer;
    let mut d = logp[r * logp.stride(0) + c * logp.stride(1)].exp() * s;
    if usize::cast_from(targets[r * targets.stride(0)]) == c {
        d += 0.0f32 - s;
    }
    out[pos] = d;
}

/// Whether [`backward`] takes these inputs: `log p` f32 `[n, vocab]`, integer targets `[n, 1]`
/// and a one-element f32 upstream gradient.
pub(crate) fn supported(
    logp: &FloatTensor<Cube>,
    targets: &IntTensor<Cube>,
    g: &FloatTensor<Cube>,
) -> bool {
    logp.dtype == DType::F32
        && g.dtype == DType::F32
        && logp.shape.num_dims() == 2
        && g.shape.num_elements() == 1
        && targets.shape.dims() == [logp.shape[0], 1]
        && index_type(targets.dtype).is_some()
}

/// The logits' f32 gradient `[n, vocab]` by the kernel, registered in the fusion stream; the
/// inputs must be [`supported`].
pub(crate) fn backward(
    logp: FloatTensor<Cube>,
    targets: IntTensor<Cube>,
    g: FloatTensor<Cube>,
    normalizer: f64,
) -> FloatTensor<Cube> {
    debug_assert!(supported(&logp, &targets, &g));
    let shape = logp.shape.clone();
    let normalizer = normalizer as f32;
    crate::cube_op::register(
        "engram_label_nll_backward",
        vec![logp, targets, g],
        shape,
        DType::F32,
        move |inputs| {
            let [logp, targets, g]: [CubeTensor; 3] = inputs.try_into().expect("three inputs");
            let client = logp.client.clone();
            let out = crate::cube_op::empty_like(&logp);
            let len = logp.meta.shape().num_elements();
            let cube_dim = CubeDim::new(&client, len);
            let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
            let index = index_type(targets.dtype).expect("checked by `supported`");
            // SAFETY: unit `pos < len` reads element `(pos / vocab, pos % vocab)` of `logp`,
            // row `pos / vocab` of `targets` (`[n, 1]`), `g[0]`, and writes `out[pos]`
            // (contiguous, `logp`'s shape).
            unsafe {
                label_nll_backward_kernel::launch_unchecked(
                    &client,
                    cube_count,
                    cube_dim,
                    logp.into_tensor_arg(),
                    targets.into_tensor_arg(),
                    g.into_tensor_arg(),
                    out.clone().into_tensor_arg(),
                    normalizer,
                    len,
                    index,
                );
            }
            out
        },
    )
}
