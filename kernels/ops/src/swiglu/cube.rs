//! A joined SwiGLU ([`crate::swiglu`]) as hand-written CubeCL kernels on the GPU backends,
//! one each way: the forward reads the joined product's halves and the adapters' products
//! (a slice of the product does not fuse), the backward forms each element's `dg` and `du` and
//! writes them, scaled, as the products' gradients and, unscaled, in their places in the joined
//! product's. f32 only (other dtypes keep the Burn ops). Registered with Burn's fusion stream
//! as opaque operations ([`crate::cube_op`]).

use burn::backend::Cube;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::{DType, Shape};
use burn_cubecl::tensor::CubeTensor;
use burn_fusion::FusionTensor;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

use crate::cube_op::{self, CubeRuntime as Runtime, empty_like};

/// Element `(r, c)` of a rank-2 view.
#[cube]
fn at(x: &Tensor<f32>, r: usize, c: usize) -> f32 {
    x[r * x.stride(0) + c * x.stride(1)]
}

/// `(g, u)` at row `r`, column `c`: `base[r, c] + scale · g[r, c]`, `base[r, i + c] + scale ·
/// u[r, c]`.
#[cube]
fn halves(
    base: &Tensor<f32>,
    g: &Tensor<f32>,
    u: &Tensor<f32>,
    r: usize,
    c: usize,
    scale: f32,
) -> (f32, f32) {
    let i = g.shape(1);
    (
        at(base, r, c) + scale * at(g, r, c),
        at(base, r, i + c) + scale * at(u, r, c),
    )
}

/// `σ(x) = 1 / (1 + e^−x)`.
#[cube]
fn sigmoid(x: f32) -> f32 {
    1.0f32 / (1.0f32 + (0.0f32 - x).exp())
}

/// For `pos < len` (row `r`, column `c` of `[rows, i]`): `out[pos] = silu(g) · u` ([`halves`]).
#[cube(launch_unchecked)]
fn swiglu_forward_kernel(
    base: &Tensor<f32>,
    g: &Tensor<f32>,
    u: &Tensor<f32>,
    out: &mut Tensor<f32>,
    scale: f32,
    len: usize,
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let i = g.shape(1);
    let (gv, uv) = halves(base, g, u, pos / i, pos % i, scale);
    out[pos] = gv * sigmoid(gv) * uv;
}

/// For `pos < len` (row `r`, column `c` of `[rows, i]`), with `g`, `u` from [`halves`]:
/// `du = dh · g·σ(g)`, `dg = ds · σ(g) + σ(g)(1 − σ(g)) · (ds · g)` with `ds = dh · u`; written
/// to `d_base[r, c]`, `d_base[r, i + c]` and, times `scale`, to `d_g[pos]`, `d_u[pos]`
/// (contiguous outputs; the inputs are rank-2 views).
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
fn swiglu_backward_kernel(
    base: &Tensor<f32>,
    g: &Tensor<f32>,
    u: &Tensor<f32>,
    dh: &Tensor<f32>,
    d_base: &mut Tensor<f32>,
    d_g: &mut Tensor<f32>,
    d_u: &mut Tensor<f32>,
    scale: f32,
    len: usize,
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let i = g.shape(1);
    let (r, c) = (pos / i, pos % i);
    let (gv, uv) = halves(base, g, u, r, c, scale);
    let grad = at(dh, r, c);
    let sig = sigmoid(gv);
    let du = grad * (gv * sig);
    let ds = grad * uv;
    let dg = ds * sig + sig * (1.0f32 - sig) * (ds * gv);
    d_g[pos] = dg * scale;
    d_u[pos] = du * scale;
    d_base[r * 2 * i + c] = dg;
    d_base[r * 2 * i + i + c] = du;
}

/// Whether [`backward`] takes these inputs: all f32, `g`, `u` and `dh` of one shape whose last
/// axis is half `base`'s, the others `base`'s.
pub(crate) fn supported(
    base: &FusionTensor<Runtime>,
    g: &FusionTensor<Runtime>,
    u: &FusionTensor<Runtime>,
    dh: &FusionTensor<Runtime>,
) -> bool {
    let rank = g.shape.num_dims();
    let mut doubled = g.shape.clone();
    doubled[rank - 1] *= 2;
    [base, g, u, dh].iter().all(|t| t.dtype == DType::F32)
        && u.shape == g.shape
        && dh.shape == g.shape
        && base.shape == doubled
}

/// The rows view `[rows, last]` of a tensor (a reshape: a view of contiguous data).
fn rows(t: FusionTensor<Runtime>) -> FusionTensor<Runtime> {
    let dims = t.shape.clone();
    let last = dims[dims.num_dims() - 1];
    <Cube as FloatTensorOps<Cube>>::float_reshape(
        t,
        Shape::from([dims.num_elements() / last, last]),
    )
}

/// `silu(base_g + s·g) · (base_u + s·u)` by the forward kernel, registered in the fusion
/// stream, in `g`'s shape; the inputs must be [`supported`] (with `g` as the gradient).
pub(crate) fn forward(
    base: FusionTensor<Runtime>,
    g: FusionTensor<Runtime>,
    u: FusionTensor<Runtime>,
    scale: f64,
) -> FusionTensor<Runtime> {
    let (shape, dtype) = (g.shape.clone(), g.dtype);
    let inputs = [base, g, u].map(rows).to_vec();
    let out_shape = inputs[1].shape.clone();
    let scale = scale as f32;
    let out = cube_op::register("engram_swiglu", inputs, out_shape, dtype, move |inputs| {
        let [base, g, u]: [CubeTensor; 3] = inputs.try_into().expect("three inputs");
        let client = g.client.clone();
        let out = empty_like(&g);
        let len = g.meta.shape().num_elements();
        let cube_dim = CubeDim::new(&client, len);
        let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
        // SAFETY: unit `pos < len` reads row `pos / i` of each input within its shape
        // (`base`'s columns up to `2 · i`) and writes `out[pos]`.
        unsafe {
            swiglu_forward_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                base.into_tensor_arg(),
                g.into_tensor_arg(),
                u.into_tensor_arg(),
                out.clone().into_tensor_arg(),
                scale,
                len,
            );
        }
        out
    });
    <Cube as FloatTensorOps<Cube>>::float_reshape(out, shape)
}

/// The gradients `(d_base, dg, du)` by the backward kernel, registered in the fusion stream,
/// in the inputs' shapes; the inputs must be [`supported`].
pub(crate) fn backward(
    base: FusionTensor<Runtime>,
    g: FusionTensor<Runtime>,
    u: FusionTensor<Runtime>,
    dh: FusionTensor<Runtime>,
    scale: f64,
) -> (
    FusionTensor<Runtime>,
    FusionTensor<Runtime>,
    FusionTensor<Runtime>,
) {
    debug_assert!(supported(&base, &g, &u, &dh));
    let (base_shape, shape, dtype) = (base.shape.clone(), g.shape.clone(), g.dtype);
    let inputs = [base, g, u, dh].map(rows).to_vec();
    let (two, one) = (inputs[0].shape.clone(), inputs[1].shape.clone());
    let outputs = vec![(two, dtype), (one.clone(), dtype), (one, dtype)];
    let scale = scale as f32;
    let mut out =
        cube_op::register_many("engram_swiglu_backward", inputs, outputs, move |inputs| {
            let [base, g, u, dh]: [CubeTensor; 4] = inputs.try_into().expect("four inputs");
            launch_backward(base, g, u, dh, scale)
        })
        .into_iter();
    let mut next = |shape: &Shape| {
        let t = out.next().expect("three outputs");
        <Cube as FloatTensorOps<Cube>>::float_reshape(t, shape.clone())
    };
    (next(&base_shape), next(&shape), next(&shape))
}

/// [`swiglu_backward_kernel`] over rank-2 CubeCL tensors: `[d_base, dg, du]`, contiguous.
fn launch_backward(
    base: CubeTensor,
    g: CubeTensor,
    u: CubeTensor,
    dh: CubeTensor,
    scale: f32,
) -> Vec<CubeTensor> {
    let client = g.client.clone();
    let (d_base, d_g, d_u) = (empty_like(&base), empty_like(&g), empty_like(&g));
    let len = g.meta.shape().num_elements();
    let cube_dim = CubeDim::new(&client, len);
    let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
    // SAFETY: unit `pos < len` reads row `pos / i` of each input within its shape (`base`'s
    // columns up to `2 · i`) and writes `d_g[pos]`, `d_u[pos]` and two elements of that row of
    // `d_base`, `[len / i, 2 · i]`.
    unsafe {
        swiglu_backward_kernel::launch_unchecked(
            &client,
            cube_count,
            cube_dim,
            base.into_tensor_arg(),
            g.into_tensor_arg(),
            u.into_tensor_arg(),
            dh.into_tensor_arg(),
            d_base.clone().into_tensor_arg(),
            d_g.clone().into_tensor_arg(),
            d_u.clone().into_tensor_arg(),
            scale,
            len,
        );
    }
    vec![d_base, d_g, d_u]
}
