//! RoPE and attention through the hand-written kernels against the Burn ops they replace.
//!
//! One attention of 4 query heads over 2 key/value heads, in the projections' layout with
//! per-row (packed) tables and a packed batch's mask, run twice from the same inputs: through
//! [`crate::attention::attention_rope`] (`joined`: [`crate::attention::attention_rope_joined`],
//! a joined base plus scaled products), and through RoPE composed of Burn ops, heads-first views
//! and [`crate::attention::attention_eager`], differentiated op by op.

use burn::tensor::{Bool, DType, Device, Distribution, Tensor, TensorData, s};

use crate::attention::{attention_eager, attention_rope, attention_rope_joined};
use crate::mask::segment_mask;
use crate::rope::{reference_tables, rotary_composed};
use crate::testing::f32_values;

use super::KernelDistance;

/// One run's output and the gradients of q, k, v and (joined) the base, as f32 values, with the
/// kernel launches of the op's forward and backward by name where the backend counts them.
#[derive(Debug, Clone)]
pub struct RopeAttentionRun {
    /// The attention's output.
    pub output: Vec<f32>,
    /// The gradients of q, k, v and the base (empty where a tensor got none).
    pub gradients: [Vec<f32>; 4],
    /// Launches by kernel of the forward and backward (GPU backends; empty elsewhere).
    pub launches: Vec<(String, u64)>,
}

/// A packed batch's mask: row 0 holds sequences of 3 and 2 slots, row 1 one of 4 and a padding
/// slot.
pub fn packed_mask(device: &Device) -> Tensor<4, Bool> {
    let segments = Tensor::from_data(
        TensorData::new(vec![0i64, 0, 0, 1, 1, 0, 0, 0, 0, 5], [2, 5]),
        device,
    );
    segment_mask(segments)
}

/// One run from `inputs`: `fused` through the op, else through the composed ops; the base in
/// `dtype`, q, k and v (the products, with `joined`) in `delta_dtype`.
fn run(
    inputs: &Inputs,
    dtype: DType,
    delta_dtype: DType,
    joined: bool,
    fused: bool,
) -> RopeAttentionRun {
    let Inputs {
        base,
        q,
        k,
        v,
        up,
        cos,
        sin,
        mask,
    } = inputs;
    let [b, t, h, d] = q.dims();
    let kv = k.dims()[2];
    let groups = h / kv;
    let device = q.device();
    let (scale, delta_scale) = ((d as f64).powf(-0.5), DELTA_SCALE);
    let base = base.clone().cast(dtype).require_grad();
    let q = q.clone().cast(delta_dtype).require_grad();
    let k = k.clone().cast(delta_dtype).require_grad();
    let v = v.clone().cast(delta_dtype).require_grad();
    // Inputs computed before counting.
    for t in [&base, &q, &k, &v, up] {
        let _ = f32_values(t.clone().sum());
    }
    let counter = crate::LaunchCounter::start(&device);
    let (qa, ka, va) = (q.clone(), k.clone(), v.clone());
    let out = match (fused, joined) {
        (true, false) => attention_rope(qa, ka, va, cos, sin, mask.clone(), h, scale),
        (true, true) => attention_rope_joined(
            base.clone(),
            qa,
            ka,
            va,
            cos,
            sin,
            mask.clone(),
            h,
            scale,
            delta_scale,
        ),
        (false, _) => {
            let (qa, ka, va) = if joined {
                let part = |from: usize, n: usize, x: Tensor<4>| {
                    let part = base.clone().slice(s![.., .., from..from + n]);
                    crate::delta::add_delta_composed(part, x, delta_scale)
                };
                (part(0, h, qa), part(h, kv, ka), part(h + kv, kv, va))
            } else {
                (qa, ka, va)
            };
            let q = rotary_composed(qa, cos, sin)
                .swap_dims(1, 2)
                .reshape([b, kv, groups * t, d]);
            let k = rotary_composed(ka, cos, sin).swap_dims(1, 2);
            attention_eager(q, k, va.swap_dims(1, 2), Some(mask.clone()), h, scale)
        }
    };
    assert_eq!(out.dtype(), dtype, "the attention's output dtype");
    let grads = (out.clone().cast(DType::F32) * up.clone()).sum().backward();
    let tracked = [&q, &k, &v, &base].map(|t| t.grad(&grads));
    // Every queued kernel runs before the count, which so leaves out the reads' casts below.
    let _ = device.sync();
    let launches = counter.map(|c| c.by_kernel()).unwrap_or_default();
    let output = f32_values(out);
    let gradients = tracked.map(|g| g.map(f32_values).unwrap_or_default());
    RopeAttentionRun {
        output,
        gradients,
        launches,
    }
}

/// The scale of the joined products (an adapter's `alpha / r`; exact in every float type).
const DELTA_SCALE: f64 = 0.75;

/// One comparison's inputs, drawn once for both runs.
struct Inputs {
    base: Tensor<4>,
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    up: Tensor<4>,
    cos: Tensor<4>,
    sin: Tensor<4>,
    mask: Tensor<4, Bool>,
}

/// Inputs of the comparison's shape on `device` (an autodiff device), drawn from its generator.
fn inputs(device: &Device) -> Inputs {
    let (b, t, kv, groups, d) = (2, 5, 2, 2, 8);
    let h = kv * groups;
    let (cos, sin) = reference_tables(&[0, 3], t, d, device);
    let normal = Distribution::Normal(0.0, 1.5);
    Inputs {
        base: Tensor::<4>::random([b, t, h + 2 * kv, d], normal, device),
        q: Tensor::<4>::random([b, t, h, d], normal, device),
        k: Tensor::<4>::random([b, t, kv, d], normal, device),
        v: Tensor::<4>::random([b, t, kv, d], normal, device),
        up: Tensor::<4>::random([b, kv, groups * t, d], normal, device),
        cos,
        sin,
        mask: packed_mask(device),
    }
}

/// The op's run and the composed ops' run (in that order) from the same inputs, drawn from
/// `device`'s generator (an autodiff device): the base in `dtype`, the products in
/// `delta_dtype`.
pub fn rope_attention_pair(
    device: &Device,
    dtype: DType,
    delta_dtype: DType,
    joined: bool,
) -> (RopeAttentionRun, RopeAttentionRun) {
    let inputs = inputs(device);
    (
        run(&inputs, dtype, delta_dtype, joined, true),
        run(&inputs, dtype, delta_dtype, joined, false),
    )
}

/// How far the op is from the composed ops in `dtype` on `device` (an autodiff device), plain,
/// with joined projections whose products are in `dtype`, and with f32 products (f32 adapters
/// on a half-precision model, the default): the worst of the three.
pub fn rope_attention_distance(device: &Device, dtype: DType) -> KernelDistance {
    let mut worst = KernelDistance::ZERO;
    for (delta_dtype, joined) in [(dtype, false), (dtype, true), (DType::F32, true)] {
        let (op, reference) = rope_attention_pair(device, dtype, delta_dtype, joined);
        worst = worst.max(KernelDistance::between(
            (&op.output, &op.gradients),
            (&reference.output, &reference.gradients),
        ));
    }
    worst
}
