//! The joined SwiGLU ([`crate::swiglu::swiglu_joined`]) against the Burn ops it replaces:
//! slices of the joined gate/up product, the adapters' products scaled and added in PEFT's
//! order ([`crate::delta`]), and
//! `silu(g) · u`, differentiated op by op.

use burn::tensor::activation::silu;
use burn::tensor::{DType, Device, Distribution, Tensor, s};

use crate::delta::add_delta_composed;
use crate::swiglu::swiglu_joined;
use crate::testing::f32_values;

use super::KernelDistance;

/// The scale of the products (an adapter's `alpha / r`; exact in every float type).
const SCALE: f64 = 0.75;

/// One run's output and the gradients of the joined product, `g` and `u`, as f32 values, with
/// the kernel launches of the forward and backward by name where the backend counts them.
#[derive(Debug, Clone)]
pub struct SwigluRun {
    /// `silu(g) · u`.
    pub output: Vec<f32>,
    /// The gradients of the joined product, of `g` and of `u`.
    pub gradients: [Vec<f32>; 3],
    /// Launches by kernel of the forward and backward (GPU backends; empty elsewhere).
    pub launches: Vec<(String, u64)>,
}

/// One comparison's inputs, drawn once for both runs.
struct Inputs {
    base: Tensor<3>,
    g: Tensor<3>,
    u: Tensor<3>,
    up: Tensor<3>,
}

/// One run from `inputs`: `fused` through the op, else through the composed ops; the joined
/// product in `dtype`, the products `g`, `u` in `product_dtype`.
fn run(inputs: &Inputs, dtype: DType, product_dtype: DType, fused: bool) -> SwigluRun {
    let i = inputs.g.dims()[2];
    let device = inputs.g.device();
    let base = inputs.base.clone().cast(dtype).require_grad();
    let g = inputs.g.clone().cast(product_dtype).require_grad();
    let u = inputs.u.clone().cast(product_dtype).require_grad();
    // Inputs computed before counting.
    for t in [&base, &g, &u, &inputs.up] {
        let _ = f32_values(t.clone().sum());
    }
    let counter = crate::LaunchCounter::start(&device);
    let h = if fused {
        swiglu_joined(base.clone(), g.clone(), u.clone(), SCALE)
    } else {
        let add = |part: Tensor<3>, t: &Tensor<3>| add_delta_composed(part, t.clone(), SCALE);
        let gi = add(base.clone().slice(s![.., .., 0..i]), &g);
        let ui = add(base.clone().slice(s![.., .., i..2 * i]), &u);
        silu(gi) * ui
    };
    assert_eq!(h.dtype(), dtype, "SwiGLU's output dtype");
    let grads = (h.clone().cast(DType::F32) * inputs.up.clone())
        .sum()
        .backward();
    let tracked = [&base, &g, &u].map(|t| t.grad(&grads));
    // Every queued kernel runs before the count, which so leaves out the reads' casts below.
    let _ = device.sync();
    let launches = counter.map(|c| c.by_kernel()).unwrap_or_default();
    for (t, grad) in [&base, &g, &u].iter().zip(&tracked) {
        let want = t.dtype();
        assert!(
            grad.as_ref().is_none_or(|d| d.dtype() == want),
            "a gradient's dtype"
        );
    }
    SwigluRun {
        output: f32_values(h),
        gradients: tracked.map(|d| d.map(f32_values).unwrap_or_default()),
        launches,
    }
}

/// The op's run and the composed ops' run (in that order) from the same inputs, drawn from
/// `device`'s generator (an autodiff device): the joined product in `dtype`, the products in
/// `product_dtype`.
pub fn swiglu_pair(device: &Device, dtype: DType, product_dtype: DType) -> (SwigluRun, SwigluRun) {
    let (b, n, i) = (2, 6, 8);
    let normal = Distribution::Normal(0.0, 1.5);
    let inputs = Inputs {
        base: Tensor::<3>::random([b, n, 2 * i], normal, device),
        g: Tensor::<3>::random([b, n, i], normal, device),
        u: Tensor::<3>::random([b, n, i], normal, device),
        up: Tensor::<3>::random([b, n, i], normal, device),
    };
    (
        run(&inputs, dtype, product_dtype, true),
        run(&inputs, dtype, product_dtype, false),
    )
}

/// How far the op is from the composed ops in `dtype` on `device` (an autodiff device), with
/// products in `dtype` and in f32 (f32 adapters on a half-precision model, the default): the
/// worse of the two.
pub fn swiglu_distance(device: &Device, dtype: DType) -> KernelDistance {
    [dtype, DType::F32]
        .into_iter()
        .map(|product_dtype| {
            let (op, reference) = swiglu_pair(device, dtype, product_dtype);
            KernelDistance::between(
                (&op.output, &op.gradients),
                (&reference.output, &reference.gradients),
            )
        })
        .fold(KernelDistance::ZERO, KernelDistance::max)
}
