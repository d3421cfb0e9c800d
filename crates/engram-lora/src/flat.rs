//! The adapters laid end to end: every factor's gradient, value and AdamW moments as slices of
//! a few flat f32 buckets, so that the clip norm and the AdamW update run once per bucket
//! rather than once per factor (PyTorch's `multi_tensor_apply` and Apex's flat-buffer Adam do
//! the same). A step then launches one gather per 16 factors (`flat_gather`: their
//! gradients into the bucket), one or two kernels per bucket for the norm and one for the
//! update, instead of two for the norm and one for the update per factor: 448 factors on
//! Llama-3.1-8B.
//!
//! The buckets are used where the device fuses element-wise ops into kernels ([`fuses`]: wgpu,
//! CUDA); on the CPU backend the update stays per factor.
//!
//! The layout follows [`Llama::adapter_factors`]' order. Each slot starts at a multiple of
//! [`ALIGN`] elements, so that a factor's value is a view of its bucket on every backend
//! (CubeCL makes a slice a view only when it starts and ends on the device's memory alignment,
//! 256 bytes at most) and the gaps are zeros, which add nothing to the norm. A bucket holds at
//! most [`BUCKET_ELEMENTS`] elements (or one larger factor): the update writes a new bucket
//! while the old one is alive, so the bucket bounds what a step needs beyond the plan's
//! 16 bytes per adapter parameter.

use burn::module::ParamId;
use burn::optim::GradientsParams;
use burn::tensor::{DType, Device, Tensor};
use engram_model::Llama;

/// Slot alignment in f32 elements (256 bytes).
pub const ALIGN: usize = 64;

/// The most elements a bucket holds unless one factor is larger (256 MiB of f32).
pub const BUCKET_ELEMENTS: usize = 1 << 26;

/// Where one factor lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The factor's parameter id.
    pub id: ParamId,
    /// Its shape.
    pub shape: [usize; 2],
    /// Its bucket.
    pub bucket: usize,
    /// Its first element in the bucket.
    pub offset: usize,
}

impl Slot {
    /// Elements of the factor.
    pub fn len(&self) -> usize {
        self.shape[0] * self.shape[1]
    }

    /// Whether the factor is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The factor's range in its bucket.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len()
    }
}

/// The slots of a model's adapter factors and the length of each bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatLayout {
    /// One per factor, in [`Llama::adapter_factors`]' order.
    pub slots: Vec<Slot>,
    /// Elements per bucket (a multiple of [`ALIGN`]).
    pub buckets: Vec<usize>,
}

impl FlatLayout {
    /// The layout of `model`'s adapter factors, buckets of at most [`BUCKET_ELEMENTS`].
    pub fn of(model: &Llama) -> Self {
        let factors = model
            .adapter_factors()
            .into_iter()
            .map(|(_, p)| (p.id, p.shape().dims::<2>()));
        Self::from_shapes(factors, BUCKET_ELEMENTS)
    }

    /// The layout of factors `(id, shape)` in this order, a new bucket started wherever the
    /// next factor would take the current one past `bucket_elements`.
    pub fn from_shapes(
        factors: impl IntoIterator<Item = (ParamId, [usize; 2])>,
        bucket_elements: usize,
    ) -> Self {
        let mut slots = Vec::new();
        let mut buckets: Vec<usize> = Vec::new();
        for (id, shape) in factors {
            let padded = (shape[0] * shape[1]).div_ceil(ALIGN) * ALIGN;
            let fits = buckets
                .last()
                .is_some_and(|&used| used + padded <= bucket_elements);
            if !fits {
                buckets.push(0);
            }
            let bucket = buckets.len() - 1;
            slots.push(Slot {
                id,
                shape,
                bucket,
                offset: buckets[bucket],
            });
            buckets[bucket] += padded;
        }
        Self { slots, buckets }
    }

    /// The slots of bucket `b`.
    pub fn bucket_slots(&self, b: usize) -> impl Iterator<Item = &Slot> {
        self.slots.iter().filter(move |s| s.bucket == b)
    }

    /// Bucket `b` assembled from one f32 tensor per slot (`factor(slot)`, the slot's shape), the
    /// gaps zero. On the CubeCL backends this is one launch per `flat_gather::MAX_INPUTS`
    /// slots; elsewhere one zero fill and one copy per slot.
    pub fn gather(
        &self,
        b: usize,
        device: &Device,
        mut factor: impl FnMut(&Slot) -> Tensor<2>,
    ) -> Tensor<1> {
        let slots: Vec<&Slot> = self.bucket_slots(b).collect();
        let factors: Vec<Tensor<2>> = slots.iter().map(|s| factor(s)).collect();
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        let factors = {
            let starts: Vec<usize> = slots.iter().map(|s| s.offset).collect();
            match engram_ops::flat_gather::gather(factors, &starts, self.buckets[b]) {
                Ok(flat) => return flat,
                Err(factors) => factors,
            }
        };
        let mut flat = Tensor::<1>::zeros([self.buckets[b]], (device, DType::F32));
        for (slot, t) in slots.iter().zip(factors) {
            flat = flat.slice_assign([slot.range()], t.reshape([slot.len()]));
        }
        flat
    }

    /// Slot `slot` of `bucket` as a `[rows, cols]` tensor: a view, no copy (where the device's
    /// alignment allows, see the module docs).
    pub fn view(slot: &Slot, bucket: &Tensor<1>) -> Tensor<2> {
        bucket.clone().slice([slot.range()]).reshape(slot.shape)
    }
}

/// Whether `device` runs a chain of element-wise ops as one kernel (Burn's fusion on the CubeCL
/// backends: wgpu, CUDA), so that one pass over a bucket replaces one per factor. The CPU
/// backend runs each op of the chain as its own pass: over one factor that pass stays in cache,
/// over a bucket it streams the whole bucket through memory, once per op (measured on SmolLM2's
/// shape at r 64, 2 cores: buckets 94–120 tok/s against 130 per factor), so there the update
/// stays per factor.
pub fn fuses(device: &Device) -> bool {
    !engram_model::is_cpu(device)
}

/// A step's adapter gradients: gathered into the flat layout when every factor has one (the
/// case of every training step), else kept per factor (the optimizer then updates factor by
/// factor and leaves those without a gradient, and their state, as they are, as torch does).
pub enum AdapterGrads {
    /// Every factor's gradient, in buckets of `layout`.
    Flat {
        /// Where each factor's gradient is.
        layout: FlatLayout,
        /// One f32 tensor per bucket (zeros between slots).
        buckets: Vec<Tensor<1>>,
    },
    /// Per factor, by parameter id.
    PerFactor(GradientsParams),
}

impl AdapterGrads {
    /// `grads` of `model`'s adapter factors, gathered ([`FlatLayout::of`]) when every factor
    /// has one and the device fuses ([`fuses`]); per factor otherwise.
    pub fn gather(model: &Llama, grads: GradientsParams) -> Self {
        if !fuses(&model.device()) {
            return Self::PerFactor(grads);
        }
        Self::gather_in(FlatLayout::of(model), model, grads)
    }

    /// `grads` of `model`'s adapter factors gathered in `layout` (which must list `model`'s
    /// factors in [`Llama::adapter_factors`]' order), or per factor when one has no gradient.
    pub fn gather_in(layout: FlatLayout, model: &Llama, mut grads: GradientsParams) -> Self {
        let complete =
            !layout.slots.is_empty() && layout.slots.iter().all(|s| grads.get::<2>(s.id).is_some());
        if !complete {
            return Self::PerFactor(grads);
        }
        let device = model.device().inner();
        let buckets = (0..layout.buckets.len())
            .map(|b| {
                layout.gather(b, &device, |s| {
                    grads
                        .remove::<2>(s.id)
                        .expect("checked above")
                        .cast(DType::F32)
                })
            })
            .collect();
        Self::Flat { layout, buckets }
    }

    /// The gradient of factor `id`, if it has one (a view of its bucket when gathered).
    pub fn factor(&self, id: ParamId) -> Option<Tensor<2>> {
        match self {
            Self::Flat { layout, buckets } => layout
                .slots
                .iter()
                .find(|s| s.id == id)
                .map(|s| FlatLayout::view(s, &buckets[s.bucket])),
            Self::PerFactor(g) => g.get::<2>(id),
        }
    }

    /// The gradients per factor (views of the buckets when gathered).
    pub fn into_per_factor(self) -> GradientsParams {
        match self {
            Self::PerFactor(g) => g,
            Self::Flat { layout, buckets } => {
                let mut g = GradientsParams::new();
                for s in &layout.slots {
                    g.register(s.id, FlatLayout::view(s, &buckets[s.bucket]));
                }
                g
            }
        }
    }

    /// Each gradient's sum of squares, one `[1]` tensor per bucket (or per factor).
    pub fn squared_sums(&self, model: &Llama) -> Vec<Tensor<1>> {
        match self {
            Self::Flat { buckets, .. } => buckets.iter().cloned().map(squared_sum).collect(),
            Self::PerFactor(grads) => model
                .adapter_factors()
                .into_iter()
                .filter_map(|(_, p)| grads.get::<2>(p.id))
                .map(|g| {
                    // Flat, so that the sum is one reduction over one axis (reducing a matrix to
                    // a scalar is one launch per axis where the device has no atomic float add).
                    let n = g.shape().num_elements();
                    g.reshape([n]).square().sum_dim(0)
                })
                .collect(),
        }
    }
}

/// Buckets shorter than this (4 MiB of f32, which one cube reads in tens of microseconds) are
/// summed by one reduction.
const ONE_PASS_ELEMENTS: usize = 1 << 20;

/// `Σ g²` of a flat bucket `[n]`, as `[1]`. CubeCL's reductions give each output one unit, plane
/// or cube, so a reduction of a whole bucket to one value runs on one cube — on a GPU one of
/// its ~100 multiprocessors reading up to 256 MiB, and its autotune times a one-unit candidate
/// over all of it. A long bucket is therefore summed in two passes: over the rows of
/// `[n / c, c]` (`c` the largest power of two dividing `n` no larger than `√n`: 8,192 rows of
/// 8,192 for a full bucket), then over those partial sums. Same terms, another order of the
/// f32 additions (as torch's per-tensor norms are). Three launches more (fusion no longer
/// folds the square into the reduction); on llvmpipe, whose cubes share 2 cores, the same
/// time (a 33.5 M-value bucket: 48 ms against 52).
fn squared_sum(g: Tensor<1>) -> Tensor<1> {
    let n = g.dims()[0];
    match row_len(n) {
        Some(c) => g
            .reshape([n / c, c])
            .square()
            .sum_dim(1)
            .sum_dim(0)
            .reshape([1]),
        None => g.square().sum_dim(0),
    }
}

/// The row length [`squared_sum`] splits a bucket of `n` elements into: the largest power of
/// two that divides `n` with its square at most `n`; `None` for a short bucket (one pass).
fn row_len(n: usize) -> Option<usize> {
    if n < ONE_PASS_ELEMENTS {
        return None;
    }
    let mut c = 1usize;
    while n.is_multiple_of(c * 2) && (c * 2) * (c * 2) <= n {
        c *= 2;
    }
    (c > 1).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_buckets_are_summed_over_rows_of_a_power_of_two() {
        assert_eq!(row_len(ALIGN), None);
        assert_eq!(row_len(ONE_PASS_ELEMENTS - ALIGN), None);
        assert_eq!(row_len(BUCKET_ELEMENTS), Some(1 << 13));
        assert_eq!(row_len(1 << 25), Some(1 << 12));
        // 64 · 3 · 5,471: 64 divides it, 128 does not.
        assert_eq!(row_len(64 * 3 * 5_471), Some(64));
        // An odd length (no bucket has one) has no row split.
        assert_eq!(row_len((1 << 20) + 1), None);
    }

    #[test]
    fn a_long_buckets_sum_of_squares_is_within_f32_rounding_of_the_exact_sum() {
        let device = Device::flex();
        let n = 3 * ONE_PASS_ELEMENTS;
        let values: Vec<f32> = (0..n).map(|i| ((i % 97) as f32 - 48.0) / 64.0).collect();
        let exact: f64 = values.iter().map(|&v| (v as f64) * (v as f64)).sum();
        let g = Tensor::<1>::from_data(burn::tensor::TensorData::new(values, [n]), &device);
        let two = squared_sum(g.clone()).into_scalar::<f32>() as f64;
        let one = g.square().sum_dim(0).into_scalar::<f32>() as f64;
        // f32 sums of 3 M terms: the two passes' within 1e-5 of the f64 sum, closer than one
        // pass's (8e-5 here on the CPU backend).
        assert!((two - exact).abs() <= 1e-5 * exact, "{two} vs {exact}");
        assert!(
            (two - exact).abs() <= (one - exact).abs(),
            "{two}, {one}: {exact}"
        );
    }

    #[test]
    fn slots_are_aligned_in_order_and_buckets_split_at_the_cap() {
        let ids: Vec<ParamId> = (0..4u64).map(ParamId::from).collect();
        let shapes = [[64, 3], [3, 32], [4096, 1], [10, 10]];
        let layout = FlatLayout::from_shapes(ids.iter().copied().zip(shapes), 4096 + 256);
        let placed: Vec<(usize, usize)> =
            layout.slots.iter().map(|s| (s.bucket, s.offset)).collect();
        // 192 → 192, 96 → 128, 4096 does not fit after 320 in a 4352 cap → bucket 1, 100 → 128
        // fits after 4096.
        assert_eq!(placed, vec![(0, 0), (0, 192), (1, 0), (1, 4096)]);
        assert_eq!(layout.buckets, vec![320, 4224]);
        assert!(layout.slots.iter().all(|s| s.offset % ALIGN == 0));
        assert_eq!(layout.slots[3].range(), 4096..4196);
        // A factor larger than the cap has a bucket of its own.
        let big = FlatLayout::from_shapes([(ids[0], [8, 8]), (ids[1], [100, 100])], 1000);
        assert_eq!(big.buckets, vec![64, 10048]);
    }
}
