//! A joined SwiGLU's backward ([`crate::swiglu`]) as one hand-written CubeCL kernel on the GPU
//! backends: it forms each element's `dg` and `du` and writes them, scaled, as the products'
//! gradients and, unscaled, in their places in the joined product's. Registered with Burn's
//! fusion stream as an opaque operation ([`crate::cube_op`]). (The forward stays Burn's ops,
//! which fusion folds into the next product.)
//!
//! The kernel is generic over the joined product's float type `F` (f32, f16, bf16; also the
//! gradient's) and, apart, the adapters' products' `I` (a bf16 model's f32 adapters give f32
//! products beside a bf16 base). Each operation is rounded where the Burn ops round it: a
//! product is scaled in `I` and added to the base in f32, the sum rounded to `F` once (PEFT's
//! order, [`crate::delta`]); the backward's terms are formed in `F`, one rounding per product
//! or sum; the products' gradients are cast to `I`, then scaled.
//! `σ` is computed in f32, as Burn's `sigmoid` is, and rounded to `F` — but as `1 / (1 +
//! e^−x)`, where Burn's is `e^−log(1 + e^−x)`: a rounding apart in f32, which the rounding to a
//! half type mostly hides.

use burn::backend::Cube;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::{DType, Shape};
use burn_cubecl::tensor::CubeTensor;
use burn_fusion::FusionTensor;
use cubecl::ir::ElemType;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

use crate::cube_op::{self, CubeRuntime as Runtime, empty_like, float_type};
use crate::delta::cube::add_scaled;

/// Element `(r, c)` of a rank-2 view.
#[cube]
fn at<E: Float>(x: &Tensor<E>, r: usize, c: usize) -> E {
    x[r * x.stride(0) + c * x.stride(1)]
}

/// `(g, u)` at row `r`, column `c`: `base[r, c] + scale · g[r, c]`, `base[r, i + c] + scale ·
/// u[r, c]`, each delta scaled in `I`, the sum formed in f32 and rounded to `F` once (PEFT's
/// order, [`crate::delta`]).
#[cube]
fn halves<F: Float, I: Float>(
    base: &Tensor<F>,
    g: &Tensor<I>,
    u: &Tensor<I>,
    r: usize,
    c: usize,
    scale: I,
) -> (F, F) {
    let i = g.shape(1);
    (
        add_scaled::<F, I>(at::<F>(base, r, c), scale * at::<I>(g, r, c)),
        add_scaled::<F, I>(at::<F>(base, r, i + c), scale * at::<I>(u, r, c)),
    )
}

/// `σ(x) = 1 / (1 + e^−x)`, computed in f32 and rounded to `F`.
#[cube]
fn sigmoid<F: Float>(x: F) -> F {
    let x = f32::cast_from(x);
    F::cast_from(1.0f32 / (1.0f32 + (0.0f32 - x).exp()))
}

/// For `pos < len` (row `r`, column `c` of `[rows, i]`), with `g`, `u` from [`halves`]:
/// `du = dh · g·σ(g)`, `dg = ds · σ(g) + σ(g)(1 − σ(g)) · (ds · g)` with `ds = dh · u`; written
/// to `d_base[r, c]`, `d_base[r, i + c]` and, cast to `I` and times `scale`, to `d_g[pos]`,
/// `d_u[pos]` (contiguous outputs; the inputs are rank-2 views).
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
fn swiglu_backward_kernel<F: Float, I: Float>(
    base: &Tensor<F>,
    g: &Tensor<I>,
    u: &Tensor<I>,
    dh: &Tensor<F>,
    d_base: &mut Tensor<F>,
    d_g: &mut Tensor<I>,
    d_u: &mut Tensor<I>,
    scale: f32,
    len: usize,
    #[define(F, I)] _types: [ElemType; 2],
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let i = g.shape(1);
    let (r, c) = (pos / i, pos % i);
    let scale = I::cast_from(scale);
    let (gv, uv) = halves::<F, I>(base, g, u, r, c, scale);
    let grad = at::<F>(dh, r, c);
    let sig = sigmoid::<F>(gv);
    let du = grad * (gv * sig);
    let ds = grad * uv;
    let dg = ds * sig + sig * (F::new(1.0) - sig) * (ds * gv);
    d_g[pos] = I::cast_from(dg) * scale;
    d_u[pos] = I::cast_from(du) * scale;
    d_base[r * 2 * i + c] = dg;
    d_base[r * 2 * i + i + c] = du;
}

/// A kernel's `#[define]`d types `[F, I]`: the joined product's and the products' float types,
/// which [`supported`] checked.
fn kernel_types(base: DType, product: DType) -> [ElemType; 2] {
    [base, product].map(|d| float_type(d).expect("checked by `supported`"))
}

/// Whether [`backward`] takes these inputs: `base` and the products `g`, `u` each of a float
/// type (f32, f16, bf16; `g`'s and `u`'s one), `g`, `u` and the output's gradient `dh` of one
/// shape whose last axis is half `base`'s, the others `base`'s, and `dh` in `base`'s dtype.
pub(crate) fn supported(
    base: &FusionTensor<Runtime>,
    g: &FusionTensor<Runtime>,
    u: &FusionTensor<Runtime>,
    dh: &FusionTensor<Runtime>,
) -> bool {
    let rank = g.shape.num_dims();
    let mut doubled = g.shape.clone();
    doubled[rank - 1] *= 2;
    float_type(base.dtype).is_some()
        && float_type(g.dtype).is_some()
        && u.dtype == g.dtype
        && dh.dtype == base.dtype
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

/// The gradients `(d_base, dg, du)` by the backward kernel, registered in the fusion stream,
/// in the inputs' shapes and dtypes; the inputs must be [`supported`].
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
    let (base_shape, shape) = (base.shape.clone(), g.shape.clone());
    let (base_dtype, dtype) = (base.dtype, g.dtype);
    let inputs = [base, g, u, dh].map(rows).to_vec();
    let (two, one) = (inputs[0].shape.clone(), inputs[1].shape.clone());
    let outputs = vec![(two, base_dtype), (one.clone(), dtype), (one, dtype)];
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

/// [`swiglu_backward_kernel`] over rank-2 CubeCL tensors: `[d_base, dg, du]`, contiguous, in
/// `base`'s, `g`'s and `g`'s dtypes.
fn launch_backward(
    base: CubeTensor,
    g: CubeTensor,
    u: CubeTensor,
    dh: CubeTensor,
    scale: f32,
) -> Vec<CubeTensor> {
    let client = g.client.clone();
    let types = kernel_types(base.dtype, g.dtype);
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
            types,
        );
    }
    vec![d_base, d_g, d_u]
}
