//! RoPE as one hand-written CubeCL kernel on the GPU backends: `y = x · cos + σ · F(x) · sin`
//! with `F` the swap of the halves of the head dimension and `σ = ±1` (+1 the rotation,
//! −1 its inverse, the backward: [`crate::rope`]). Burn has no fusable flip, so the composed
//! form is a flip kernel and a fused element-wise kernel; this is one kernel, computing the
//! same two products and sum, so the same bits (tested against the composed ops on llvmpipe).
//! The kernels are generic over the activations' float type (f32, f16, bf16) and, apart, the
//! tables': a table entry is cast to the activations' type and each product and the sum are
//! rounded in it, as the composed ops (tables cast, then multiplied and added) round them — the
//! same bits, tested in f32 and f16 on llvmpipe (WGSL has no bf16; CUDA compiles the same code
//! for it). A bf16 model's q, k and v thus reach attention contiguous and heads first, where the
//! composed ops left views that its matmuls could not fuse ("Rhs needs to be contiguous").
//!
//! The kernel reads `x` and the tables through their strides and broadcasts the tables' size-1
//! axes, so it also runs on views: given a heads-first view of the projections' `[b, t, h, d]`
//! (with the tables' view to match) it writes q and k heads first, as attention's products read
//! them, and given a view of a heads-first gradient it writes the gradient back in the
//! projections' layout ([`crate::rope::rotary_heads_first`]) — the layout copy a view would
//! cost the next reshape or product happens inside the kernel. A second kernel does q, k and v
//! of one attention in one launch — q and k rotated, v copied into the same layout
//! ([`crate::rope::RotaryOp::rotary_qkv_heads_first`]) — where three launches did.
//!
//! Registered with Burn's fusion stream as one opaque operation ([`crate::cube_op`]).

use burn::tensor::{DType, Shape};
use burn_cubecl::tensor::CubeTensor;
use burn_fusion::FusionTensor;
use cubecl::ir::ElemType;
use cubecl::{calculate_cube_count_elemwise, prelude::*};

use crate::cube_op::{self, CubeRuntime as Runtime, empty_like, float_type};

/// `out[p] = x[p] · c + σ · x[p'] · s`, `p'` the same position in the other half of the head
/// dimension (the last), `c, s` the tables' entries for `p`'s index, each table dimension of
/// size 1 broadcast (over heads, and over rows where the table has one). `x` and the tables may
/// be strided views (a heads-first view of `[b, t, heads, d]` activations with the tables' view
/// to match); `out` is contiguous in `x`'s shape.
#[cube(launch_unchecked)]
fn rope_kernel<F: Float, T: Float>(
    x: &Tensor<F>,
    cos: &Tensor<T>,
    sin: &Tensor<T>,
    output: &mut Tensor<F>,
    sign: f32,
    len: usize,
    #[define(F, T)] _types: [ElemType; 2],
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let sign = F::cast_from(sign);
    output[pos] = rotated::<F, F, T>(x, x, 0usize, cos, sin, pos, sign, F::new(1.0), false);
}

/// Element `pos` (in row-major order of `x`'s shape, rank 4) of the rotation of `x`, in `F`:
/// `x[p] · c + σ · x[p'] · s` (see [`rope_kernel`]; `x`'s elements and `c`, `s` cast to `F`);
/// with `with_base`, of `base + scale · x` ([`input`]).
#[allow(clippy::too_many_arguments)]
#[cube]
fn rotated<F: Float, I: Float, T: Float>(
    x: &Tensor<I>,
    base: &Tensor<F>,
    first_head: usize,
    cos: &Tensor<T>,
    sin: &Tensor<T>,
    pos: usize,
    sign: F,
    scale: I,
    #[comptime] with_base: bool,
) -> F {
    let d = x.shape(3);
    let half = d / 2;
    let j = pos % d;
    let rest = pos / d;
    let i2 = rest % x.shape(2);
    let rest = rest / x.shape(2);
    let i1 = rest % x.shape(1);
    let i0 = rest / x.shape(1);
    let partner = if j < half { j + half } else { j - half };
    // A table dimension of size 1 is broadcast.
    let t0 = if cos.shape(0) == 1 { 0usize } else { i0 };
    let t1 = if cos.shape(1) == 1 { 0usize } else { i1 };
    let t2 = if cos.shape(2) == 1 { 0usize } else { i2 };
    let at = t0 * cos.stride(0) + t1 * cos.stride(1) + t2 * cos.stride(2) + j * cos.stride(3);
    let st = t0 * sin.stride(0) + t1 * sin.stride(1) + t2 * sin.stride(2) + j * sin.stride(3);
    let here = input::<F, I>(x, base, first_head, i0, i1, i2, j, scale, with_base);
    let there = input::<F, I>(x, base, first_head, i0, i1, i2, partner, scale, with_base);
    let a = here * F::cast_from(cos[at]);
    let s = there * F::cast_from(sin[st]);
    a + sign * s
}

/// `x[i0, i1, i2, j]` read through its strides, cast to `F`; with `with_base`, `base[i0,
/// first_head + i1, i2, j] + scale · x[i0, i1, i2, j]` (`base` a heads-first view of the joined
/// projections, `x` a part's delta), the delta scaled in its own type `I`, the sum formed in
/// f32 and rounded to `F` once — PEFT's order ([`crate::delta`], `add_parts`).
#[allow(clippy::too_many_arguments)]
#[cube]
fn input<F: Float, I: Float>(
    x: &Tensor<I>,
    base: &Tensor<F>,
    first_head: usize,
    i0: usize,
    i1: usize,
    i2: usize,
    j: usize,
    scale: I,
    #[comptime] with_base: bool,
) -> F {
    let x_value = x[i0 * x.stride(0) + i1 * x.stride(1) + i2 * x.stride(2) + j * x.stride(3)];
    let mut v = F::cast_from(x_value);
    if comptime![with_base] {
        let at = i0 * base.stride(0)
            + (first_head + i1) * base.stride(1)
            + i2 * base.stride(2)
            + j * base.stride(3);
        v = crate::delta::cube::add_scaled::<F, I>(base[at], scale * x_value);
    }
    v
}

/// Element `pos` (in row-major order of `x`'s shape, rank 4) of `x`, read through its strides
/// ([`input`]: with `with_base`, of `base + scale · x`).
#[cube]
fn element<F: Float, I: Float>(
    x: &Tensor<I>,
    base: &Tensor<F>,
    first_head: usize,
    pos: usize,
    scale: I,
    #[comptime] with_base: bool,
) -> F {
    let d = x.shape(3);
    let j = pos % d;
    let rest = pos / d;
    let i2 = rest % x.shape(2);
    let rest = rest / x.shape(2);
    let i1 = rest % x.shape(1);
    let i0 = rest / x.shape(1);
    input::<F, I>(x, base, first_head, i0, i1, i2, j, scale, with_base)
}

/// q, k and v in one launch: `q` and `k` rotated as by [`rope_kernel`] (the same tables
/// broadcasting to both), `v` copied, each written contiguous in its (view's) shape. Positions
/// `[0, len_q)` are q's elements, the next `len_k` k's, the rest up to `len` v's.
///
/// The types: `I` the inputs' (q, k, v), `O` the outputs', `F` the base's and `joined`'s, in
/// which the rotation is computed, `T` the tables'. Plain, all of `I`, `O`, `F` are one type.
/// With `with_base` (the forward of joined projections) each input is `base`'s part plus
/// `scale` times it ([`input`]; `base` heads first, `[b, all heads, t, d]`; the inputs are the
/// adapters' products, `O` = `F`). With `with_joined` (the backward; `I` = `F`) each output is
/// the element cast to `O` (the products' type) times `scale`, and the element itself is also
/// written to `joined`, `[b, t, all heads, d]` contiguous, the three side by side along the
/// heads (the outputs' shapes are then `[b, t, heads, d]`).
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
fn rope_qkv_kernel<I: Float, O: Float, F: Float, T: Float>(
    q: &Tensor<I>,
    k: &Tensor<I>,
    v: &Tensor<I>,
    base: &Tensor<F>,
    cos: &Tensor<T>,
    sin: &Tensor<T>,
    out_q: &mut Tensor<O>,
    out_k: &mut Tensor<O>,
    out_v: &mut Tensor<O>,
    joined: &mut Tensor<F>,
    sign: f32,
    scale: f32,
    len_q: usize,
    len_k: usize,
    len: usize,
    #[comptime] with_base: bool,
    #[comptime] with_joined: bool,
    #[define(I, O, F, T)] _types: [ElemType; 4],
) {
    let pos = ABSOLUTE_POS;
    if pos >= len {
        terminate!();
    }
    let sign = F::cast_from(sign);
    // The inputs' scale (with a base: the deltas', in their type).
    let scale_in = I::cast_from(scale);
    let in_q = pos < len_q;
    let in_k = pos >= len_q && pos < len_q + len_k;
    // The position within the part, and the part's first head among all.
    let p = if in_q {
        pos
    } else if in_k {
        pos - len_q
    } else {
        pos - len_q - len_k
    };
    // The parts' head counts: heads lie on axis 1 of the heads-first views a base comes with,
    // on axis 2 of the projections' layout.
    let mut heads_q = q.shape(2);
    let mut heads_k = k.shape(2);
    if comptime![with_base] {
        heads_q = q.shape(1);
        heads_k = k.shape(1);
    }
    let first_head = if in_q {
        0usize
    } else if in_k {
        heads_q
    } else {
        heads_q + heads_k
    };
    let value = if in_q {
        rotated::<F, I, T>(q, base, first_head, cos, sin, p, sign, scale_in, with_base)
    } else if in_k {
        rotated::<F, I, T>(k, base, first_head, cos, sin, p, sign, scale_in, with_base)
    } else {
        element::<F, I>(v, base, first_head, p, scale_in, with_base)
    };
    let out = if comptime![with_joined] {
        O::cast_from(value) * O::cast_from(scale)
    } else {
        O::cast_from(value)
    };
    if in_q {
        out_q[p] = out;
    } else if in_k {
        out_k[p] = out;
    } else {
        out_v[p] = out;
    }
    if comptime![with_joined] {
        // p indexes [b, t, heads, d] (the part's heads): its place among all the heads.
        let d = q.shape(3);
        let heads = joined.shape(2);
        let j = p % d;
        let rest = p / d;
        let part_heads = if in_q {
            q.shape(2)
        } else if in_k {
            k.shape(2)
        } else {
            v.shape(2)
        };
        let head = rest % part_heads;
        let row = rest / part_heads;
        joined[(row * heads + first_head + head) * d + j] = value;
    }
}

/// The kernel over CubeCL tensors: `x` rank 4 (`[batch, seq, heads, head_dim]`, or that
/// swapped heads first), the tables broadcasting to it (any strides; [`supported`] dtypes).
fn rotate(x: CubeTensor, cos: CubeTensor, sin: CubeTensor, inverse: bool) -> CubeTensor {
    let client = x.client.clone();
    let len = x.meta.shape().num_elements();
    let output = empty_like(&x);
    let cube_dim = CubeDim::new(&client, len);
    let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
    let sign = if inverse { -1.0f32 } else { 1.0 };
    let types = [kernel_type(x.dtype), kernel_type(cos.dtype)];
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
            types,
        );
    }
    output
}

/// A kernel's `#[define]`d type for `dtype`, a float type [`supported`] checked.
fn kernel_type(dtype: DType) -> ElemType {
    float_type(dtype).expect("checked by `supported`")
}

/// Whether the kernel takes `x` with these tables: float activations and tables (f32, f16 or
/// bf16; the tables of one dtype, which may differ from `x`'s), rank 4, an even last (head)
/// dimension, tables of one shape broadcasting to `x`'s (each dimension `x`'s or 1, the last
/// `x`'s).
pub(crate) fn supported(
    x: &FusionTensor<Runtime>,
    cos: &FusionTensor<Runtime>,
    sin: &FusionTensor<Runtime>,
) -> bool {
    let (xs, cs) = (&x.shape, &cos.shape);
    float_type(x.dtype).is_some()
        && float_type(cos.dtype).is_some()
        && sin.dtype == cos.dtype
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

/// How [`rotary_qkv`] runs [`rope_qkv_kernel`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct QkvMode {
    /// The inverse rotation (the backward).
    pub inverse: bool,
    /// Also write the three side by side (the backward of joined projections).
    pub joined: bool,
    /// The deltas' scale: with a base, the inputs are `base + scale · delta`; with `joined`,
    /// the three outputs are `scale` times the gradient (the deltas' gradients).
    pub scale: f32,
    /// With `joined`, the outputs' dtype (the deltas', whose gradients they are: each element
    /// is cast to it before the scale); otherwise unused (the outputs take the base's dtype,
    /// or the inputs' without a base).
    pub delta_dtype: DType,
}

/// [`rope_qkv_kernel`] over CubeCL tensors (any strides; `[q, k, v, cos, sin]` and, sixth, the
/// heads-first base where there is one): `[q', k', v']`, and the three joined along the heads
/// where `mode.joined`.
/// The outputs are made in `out_dtype` ([`qkv_out_dtype`]).
fn rotate_qkv(inputs: Vec<CubeTensor>, mode: QkvMode, out_dtype: DType) -> Vec<CubeTensor> {
    let mut inputs = inputs.into_iter();
    let mut next = || inputs.next().expect("five inputs");
    let (q, k, v, cos, sin) = (next(), next(), next(), next(), next());
    let base = inputs.next();
    let with_base = base.is_some();
    // Never read without a base: a placeholder binding.
    let base = base.unwrap_or_else(|| q.clone());
    let client = q.client.clone();
    let out = |t: &CubeTensor| cube_op::empty_like_in(t, out_dtype);
    let (out_q, out_k, out_v) = (out(&q), out(&k), out(&v));
    let shape = |t: &CubeTensor| t.meta.shape().clone();
    let (len_q, len_k) = (shape(&q).num_elements(), shape(&k).num_elements());
    let len = len_q + len_k + shape(&v).num_elements();
    let all = if mode.joined {
        let mut dims = shape(&q);
        dims[2] = shape(&q)[2] + shape(&k)[2] + shape(&v)[2];
        dims
    } else {
        // Never written: a placeholder binding.
        Shape::from([1usize])
    };
    let out_all = burn_cubecl::ops::numeric::empty_device_contiguous_dtype(
        client.clone(),
        q.device.clone(),
        all,
        base.dtype,
    );
    let cube_dim = CubeDim::new(&client, len);
    let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
    let sign = if mode.inverse { -1.0f32 } else { 1.0 };
    let types = [q.dtype, out_dtype, base.dtype, cos.dtype].map(kernel_type);
    // SAFETY: each unit reads within its input, the base (its heads cover the three parts')
    // and the tables (indices from their shapes), and writes one element of one output, below
    // that output's length, and with `joined` one element of `joined` (its shape holds every
    // head of the three).
    unsafe {
        rope_qkv_kernel::launch_unchecked(
            &client,
            cube_count,
            cube_dim,
            q.into_tensor_arg(),
            k.into_tensor_arg(),
            v.into_tensor_arg(),
            base.into_tensor_arg(),
            cos.into_tensor_arg(),
            sin.into_tensor_arg(),
            out_q.clone().into_tensor_arg(),
            out_k.clone().into_tensor_arg(),
            out_v.clone().into_tensor_arg(),
            out_all.clone().into_tensor_arg(),
            sign,
            mode.scale,
            len_q,
            len_k,
            len,
            with_base,
            mode.joined,
            types,
        );
    }
    let mut outputs = vec![out_q, out_k, out_v];
    if mode.joined {
        outputs.push(out_all);
    }
    outputs
}

/// Whether [`rotary_qkv`] takes these inputs: q and k [`supported`] with the tables, all three
/// of one dtype, `v` of rank 4.
pub(crate) fn supported_qkv(
    q: &FusionTensor<Runtime>,
    k: &FusionTensor<Runtime>,
    v: &FusionTensor<Runtime>,
    cos: &FusionTensor<Runtime>,
    sin: &FusionTensor<Runtime>,
) -> bool {
    supported(q, cos, sin)
        && supported(k, cos, sin)
        && k.dtype == q.dtype
        && v.dtype == q.dtype
        && v.shape.num_dims() == 4
}

/// RoPE (`mode.inverse`: its inverse) of `q` and `k` and a copy of `v` by one kernel,
/// registered in the fusion stream, each output contiguous in its input's shape. With `base`
/// (heads first, `[b, all heads, t, d]`, the three parts side by side; any float dtype, the
/// outputs' then) the inputs are its parts plus `mode.scale` times `q`, `k`, `v`; with
/// `mode.joined` (inputs `[b, t, heads, d]`) the outputs are cast to `mode.delta_dtype` and
/// scaled by `mode.scale`, and a fourth output holds the three, unscaled, side by side in the
/// inputs' dtype. The inputs must be [`supported_qkv`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn rotary_qkv(
    q: FusionTensor<Runtime>,
    k: FusionTensor<Runtime>,
    v: FusionTensor<Runtime>,
    base: Option<FusionTensor<Runtime>>,
    cos: FusionTensor<Runtime>,
    sin: FusionTensor<Runtime>,
    mode: QkvMode,
) -> Vec<FusionTensor<Runtime>> {
    debug_assert!(supported_qkv(&q, &k, &v, &cos, &sin));
    debug_assert!(base.as_ref().is_none_or(|b| float_type(b.dtype).is_some()));
    let out_dtype = qkv_out_dtype(q.dtype, base.as_ref().map(|b| b.dtype), mode);
    let mut outputs = vec![
        (q.shape.clone(), out_dtype),
        (k.shape.clone(), out_dtype),
        (v.shape.clone(), out_dtype),
    ];
    if mode.joined {
        let mut all = q.shape.clone();
        all[2] = q.shape[2] + k.shape[2] + v.shape[2];
        outputs.push((all, q.dtype));
    }
    let id = match (mode.inverse, mode.joined, base.is_some()) {
        (false, _, false) => "engram_rope_qkv",
        (false, _, true) => "engram_rope_qkv_from_base",
        (true, false, _) => "engram_rope_qkv_inverse",
        (true, true, _) => "engram_rope_qkv_inverse_joined",
    };
    let mut inputs = vec![q, k, v, cos, sin];
    inputs.extend(base);
    cube_op::register_many(id, inputs, outputs, move |inputs| {
        rotate_qkv(inputs, mode, out_dtype)
    })
}

/// The dtype of [`rotary_qkv`]'s q, k and v outputs: the base's (the sums'), else with
/// `mode.joined` the deltas' (their gradients), else the inputs'.
fn qkv_out_dtype(input: DType, base: Option<DType>, mode: QkvMode) -> DType {
    match (base, mode.joined) {
        (Some(base), _) => base,
        (None, true) => mode.delta_dtype,
        (None, false) => input,
    }
}
