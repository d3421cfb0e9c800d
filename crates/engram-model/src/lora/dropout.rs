//! LoRA dropout. On the CPU backend's training device the keep mask is drawn on the host (see
//! [`host_dropout_applies`]). On the GPU backends a training forward draws every dropout site's
//! mask at once ([`pool_scope`]: one random-number kernel instead of one per site) and each
//! site takes its slice, a view; a site the pool does not cover uses Burn's `Dropout`.

use std::cell::RefCell;

use burn::nn::Dropout;
use burn::tensor::{DType, Device, Distribution, Tensor, TensorData, s};
use rand::SeedableRng;

/// Slice alignment in elements (256 bytes of f32), so that each site's slice of the pool is a
/// view on every CubeCL device (which makes a slice a view only at its memory alignment).
const POOL_ALIGN: usize = 64;

/// The keep masks of one forward's dropout sites, drawn in one go.
struct Pool {
    /// Bernoulli(1 − p) draws, 0 or 1.
    draws: Tensor<1>,
    /// The dropout probability the draws are for.
    prob: f64,
    /// The first draw not yet taken.
    next: usize,
}

thread_local! {
    static POOL: RefCell<Option<Pool>> = const { RefCell::new(None) };
    static KEY: RefCell<Option<Keyed>> = const { RefCell::new(None) };
}

/// The current dropout key ([`keyed_dropout`]) and, on the CPU backend, how many host-drawn
/// sites it has seeded.
struct Keyed {
    key: Tensor<1>,
    sites: u64,
}

/// Keeps a dropout key current on this thread ([`keyed_dropout`]); dropping it restores
/// Burn's generator.
#[must_use = "the key lasts as long as the scope"]
pub struct KeyScope(());

impl Drop for KeyScope {
    fn drop(&mut self) {
        KEY.with(|k| k.borrow_mut().take());
    }
}

/// While the returned scope lives, the pooled dropout masks a training forward draws on this
/// thread (the GPU backends, [`pool_scope`]) come from the stream keyed by `key`'s value — a
/// `[1]` f32 device tensor, not tracked by autodiff ([`engram_ops::graph::bernoulli`]) —
/// instead of Burn's generator, whose seeds are launch arguments: what a captured step needs
/// so that each replay draws new masks (it advances the key on the device). On the CPU backend
/// each site's host draw ([`host_dropout`]) is seeded from the key's value and the site's place
/// in the scope instead of the device's generator, so that a step run again with the same key
/// draws the same masks wherever the generator stands. Burn's `Dropout` sites the pool does
/// not cover are unchanged.
pub fn keyed_dropout(key: Tensor<1>) -> KeyScope {
    KEY.with(|k| *k.borrow_mut() = Some(Keyed { key, sites: 0 }));
    KeyScope(())
}

/// Keeps a forward's dropout pool current on this thread; dropping it discards the pool.
#[must_use = "the pool lasts as long as the scope"]
pub(crate) struct PoolScope(());

impl Drop for PoolScope {
    fn drop(&mut self) {
        POOL.with(|p| p.borrow_mut().take());
    }
}

/// Draws the keep masks of a forward's dropout sites (`sites()`: `(probability, elements)`
/// each) on `device` in one random-number kernel, for [`pooled_dropout`] to hand out while the
/// returned scope lives. `None` (no pool) where there is nothing to draw, where the sites'
/// probabilities differ, or off a GPU training device (the CPU backend's sites draw on the
/// host; `sites` is not called there). Burn draws each site's mask as
/// `random_like(Bernoulli(1 − p))`; the pool draws the same distribution, element by element
/// independent, from one stream.
pub(crate) fn pool_scope(
    device: &Device,
    sites: impl FnOnce() -> Vec<(f64, usize)>,
) -> Option<PoolScope> {
    if !device.is_autodiff() || crate::is_cpu(device) {
        return None;
    }
    let sites = sites();
    let prob = sites.first()?.0;
    if prob <= 0.0 || sites.iter().any(|(p, _)| *p != prob) {
        return None;
    }
    let total: usize = sites
        .iter()
        .map(|(_, n)| n.div_ceil(POOL_ALIGN) * POOL_ALIGN)
        .sum();
    let keyed = KEY.with(|k| k.borrow().as_ref().map(|k| k.key.clone()));
    let draws = match keyed {
        Some(key) => Tensor::from_inner(engram_ops::graph::bernoulli(&key, total, 1.0 - prob)),
        None => Tensor::<1>::random([total], Distribution::Bernoulli(1.0 - prob), device),
    };
    POOL.with(|p| {
        *p.borrow_mut() = Some(Pool {
            draws,
            prob,
            next: 0,
        })
    });
    Some(PoolScope(()))
}

/// Burn's inverted dropout of `x` cast to `dtype` (`x · mask / (1 − p)`) with the mask taken
/// from the current pool, or `None` where no pool is current, it is for another probability, or
/// it has too few draws left (the caller then casts `x` and draws its own mask).
pub(crate) fn pooled_dropout<const D: usize>(
    dropout: &Dropout,
    x: &Tensor<D>,
    dtype: DType,
) -> Option<Tensor<D>> {
    if dropout.prob == 0.0 || !dropout.training.is_enabled() {
        return None;
    }
    let shape = x.shape();
    let n = shape.num_elements();
    let mask = POOL.with(|p| {
        let mut pool = p.borrow_mut();
        let pool = pool.as_mut().filter(|pool| pool.prob == dropout.prob)?;
        let end = pool.next + n;
        if end > pool.draws.dims()[0] {
            return None;
        }
        let mask = pool.draws.clone().slice(s![pool.next..end]);
        pool.next += n.div_ceil(POOL_ALIGN) * POOL_ALIGN;
        Some(mask)
    })?;
    let keep = 1.0 - dropout.prob;
    let mask = mask.reshape(shape).cast(dtype);
    // `x` is cast after the mask's slice is taken: a slice does not fuse, so a cast before it
    // was a kernel of its own on the GPU backends; after it, the cast, the product and the
    // scale are one.
    Some((x.clone().cast(dtype) * mask) * (1.0 / keep))
}

/// Whether [`host_dropout`] replaces Burn's `Dropout` for `x`: training (autodiff) on the CPU
/// backend with a non-zero probability, where Burn draws its Bernoulli mask element by element
/// through a ChaCha generator (measured ≈ 9 % of a rank-256 training step on SmolLM2). The GPU
/// backends keep Burn's on-device generator.
pub(crate) fn host_dropout_applies<const D: usize>(dropout: &Dropout, x: &Tensor<D>) -> bool {
    let device = x.device();
    dropout.prob > 0.0
        && dropout.training.is_enabled()
        && device.is_autodiff()
        && crate::is_cpu(&device)
}

/// Inverted dropout as Burn's and torch's (each element kept with probability `1 - p` and then
/// scaled by `1 / (1 - p)`), with the keep mask drawn on the host by a xoshiro generator. Its
/// seed is drawn from the device's seeded generator, so a seeded run (the trainer reseeds every
/// micro-step) draws the same masks again and a resumed run equals an uninterrupted one.
pub(crate) fn host_dropout<const D: usize>(x: Tensor<D>, p: f64) -> Tensor<D> {
    use burn::tensor::{Distribution, Int};
    use rand::RngCore;
    use rand::rngs::SmallRng;
    let device = x.device();
    let keyed = KEY.with(|k| {
        k.borrow_mut().as_mut().map(|k| {
            let key = k
                .key
                .clone()
                .into_data()
                .try_into_vec_as::<f32>()
                .expect("an f32 key")[0];
            k.sites += 1;
            // splitmix64 of the key's bits beside the site's number.
            let mut z =
                ((key.to_bits() as u64) << 32 | k.sites).wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
    });
    let seed = keyed.unwrap_or_else(|| {
        let words: Vec<i64> =
            Tensor::<1, Int>::random([2], Distribution::Uniform(0.0, 2.0e9), &device)
                .into_data()
                .try_into_vec_as::<i64>()
                .expect("int data");
        ((words[0] as u64) << 32) ^ words[1] as u64
    });
    let mut rng = SmallRng::seed_from_u64(seed);
    let shape = x.shape();
    let n = shape.num_elements();
    // Keep when a uniform 32-bit draw is at or above p · 2³².
    let threshold = (p * 4_294_967_296.0) as u64;
    let scale = (1.0 / (1.0 - p)) as f32;
    let mut mask = Vec::with_capacity(n);
    while mask.len() < n {
        let r = rng.next_u64();
        for half in [r & 0xffff_ffff, r >> 32] {
            if mask.len() < n {
                mask.push(if half >= threshold { scale } else { 0.0 });
            }
        }
    }
    let mask = Tensor::<D>::from_data(TensorData::new(mask, shape), &device).cast(x.dtype());
    x * mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::DropoutConfig;
    use burn::tensor::Device;

    #[test]
    fn host_dropout_keeps_one_minus_p_scaled_and_follows_the_seed() {
        let _rng = crate::testing::train_lock();
        let device = Device::flex().autodiff();
        let dropout = DropoutConfig::new(0.25).init();
        let x = Tensor::<2>::ones([64, 500], &device);
        assert!(host_dropout_applies(&dropout, &x));
        assert!(!host_dropout_applies(
            &dropout,
            &Tensor::<2>::ones([2, 2], &Device::flex())
        ));
        assert!(!host_dropout_applies(&DropoutConfig::new(0.0).init(), &x));
        let draw = |seed: u64| -> Vec<f32> {
            device.seed(seed);
            host_dropout(x.clone(), 0.25)
                .into_data()
                .try_into_vec_as::<f32>()
                .unwrap()
        };
        let a = draw(7);
        let scale = 1.0 / 0.75;
        assert!(a.iter().all(|&v| v == 0.0 || (v - scale).abs() < 1e-6));
        let kept = a.iter().filter(|&&v| v != 0.0).count() as f64 / a.len() as f64;
        // 32,000 Bernoulli(0.75) draws: the standard error is 0.0024.
        assert!((kept - 0.75).abs() < 0.015, "kept {kept}");
        assert_eq!(a, draw(7), "same seed, same mask");
        let next = host_dropout(x.clone(), 0.25)
            .into_data()
            .try_into_vec_as::<f32>()
            .unwrap();
        assert_ne!(a, next, "the next call draws another mask");
        assert_ne!(a, draw(8), "another seed, another mask");
        // Keyed: each site's mask follows the key and the site's place, not the generator.
        let keyed = |key: f32, seed: u64| -> Vec<Vec<f32>> {
            let _scope = keyed_dropout(Tensor::from_data(
                TensorData::new(vec![key], [1]),
                &Device::flex(),
            ));
            device.seed(seed);
            (0..2)
                .map(|_| {
                    host_dropout(x.clone(), 0.25)
                        .into_data()
                        .try_into_vec_as::<f32>()
                        .unwrap()
                })
                .collect()
        };
        let k = keyed(65.0, 1);
        assert_eq!(k, keyed(65.0, 2), "the generator's seed does not matter");
        assert_ne!(k[0], k[1], "two sites, two masks");
        assert_ne!(k, keyed(66.0, 1), "another key, other masks");
        let kept = k[1].iter().filter(|&&v| v != 0.0).count() as f64 / k[1].len() as f64;
        assert!((kept - 0.75).abs() < 0.015, "kept {kept}");
    }

    /// On wgpu an f16 input's dropout with f32 products — the cast, the mask's product and the
    /// scale — is one kernel. (The cast comes after the mask's slice, which does not fuse: cast
    /// before it, in a training step, the down projection's input took a kernel of its own on
    /// llvmpipe; `bench train` counts the step's launches.)
    #[cfg(feature = "wgpu")]
    #[test]
    fn an_inputs_cast_and_its_dropout_are_one_kernel() {
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        let dropout = DropoutConfig::new(0.25).init();
        let x = Tensor::<2>::random([40, 100], Distribution::Normal(0.0, 1.0), &device)
            .cast(DType::F16);
        x.clone().into_data();
        let launches = || {
            let _scope = pool_scope(&device, || vec![(0.25, 4000)]).expect("a pool");
            POOL.with(|p| p.borrow().as_ref().map(|p| p.draws.clone()))
                .unwrap()
                .into_data();
            let counter = crate::LaunchCounter::start(&device).unwrap();
            let dropped = pooled_dropout(&dropout, &x, DType::F32).expect("served");
            assert_eq!(dropped.into_data().dtype(), DType::F32);
            (counter.launched(), counter.sequence())
        };
        // Twice, counted the second time: Burn's fusion settles on a pattern's kernels once it
        // has seen it.
        launches();
        let (n, sequence) = launches();
        assert_eq!(n, 1, "{sequence:?}");
    }

    /// On wgpu: every site's mask is its slice of the one draw made for the forward (so one
    /// random-number launch serves them all: `bench train` counts it); each holds 0 or
    /// 1/(1 − p) at about 1 − p kept; a site the pool cannot serve (another probability, not
    /// enough draws left, no pool) gets `None` and draws its own.
    #[cfg(feature = "wgpu")]
    #[test]
    fn one_pool_serves_every_site_of_a_forward() {
        // Launch-counting tests beside it count every launch in the process: they take turns.
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        let dropout = DropoutConfig::new(0.25).init();
        let xs = [
            Tensor::<2>::ones([40, 100], &device),
            Tensor::<2>::ones([37, 3], &device),
        ];
        let scope =
            pool_scope(&device, || vec![(0.25, 4000), (0.25, 111)]).expect("a pool on wgpu");
        let draws: Vec<f32> = POOL
            .with(|p| p.borrow().as_ref().map(|p| p.draws.clone()))
            .unwrap()
            .into_data()
            .try_into_vec_as::<f32>()
            .unwrap();
        assert_eq!(draws.len(), 4032 + 128, "each site's slice aligned to 64");
        let dropped: Vec<Vec<f32>> = xs
            .iter()
            .map(|x| {
                pooled_dropout(&dropout, x, DType::F32)
                    .expect("served")
                    .into_data()
                    .try_into_vec_as::<f32>()
                    .unwrap()
            })
            .collect();
        let scaled = |r: std::ops::Range<usize>| -> Vec<f32> {
            draws[r].iter().map(|d| d * (1.0 / 0.75)).collect()
        };
        assert_eq!(dropped[0], scaled(0..4000));
        assert_eq!(dropped[1], scaled(4032..4143));
        let scale = 1.0 / 0.75;
        for d in &dropped {
            assert!(d.iter().all(|&v| v == 0.0 || (v - scale).abs() < 1e-6));
        }
        let kept = dropped[0].iter().filter(|&&v| v != 0.0).count() as f64 / 4000.0;
        // 4,000 Bernoulli(0.75) draws: the standard error is 0.0068.
        assert!((kept - 0.75).abs() < 0.035, "kept {kept}");
        assert!(pooled_dropout(&DropoutConfig::new(0.5).init(), &xs[1], DType::F32).is_none());
        assert!(
            pooled_dropout(&dropout, &xs[1], DType::F32).is_none(),
            "the pool is spent"
        );
        drop(scope);
        assert!(
            pooled_dropout(&dropout, &xs[1], DType::F32).is_none(),
            "no pool"
        );
        assert!(pool_scope(&Device::flex().autodiff(), || vec![(0.25, 10)]).is_none());
    }
}
