//! A linear projection holding its weight as `[in, out]`, contiguous (HF stores `[out, in]`;
//! the loader transposes once on the host), with an optional LoRA adapter, and optionally the
//! weight as the checkpoint stored it in quantized blocks for [`crate::cpu_matmul`].

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::{Tensor, s};
use engram_kernels::QuantizedMatrix;

use crate::lora::LoraAdapter;

/// `y = x W + b`, plus `s·B(A(dropout(x)))` when an adapter is attached.
#[derive(Module, Debug)]
pub struct Linear {
    /// Weight, `[in, out]`.
    pub weight: Param<Tensor<2>>,
    /// Optional bias, `[out]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Optional low-rank adapter.
    pub lora: Option<LoraAdapter>,
    /// The weight as the checkpoint stored it in quantized blocks (a GGUF block format),
    /// `[out, in]`, kept beside the f32 weight on the CPU device: inference products with few
    /// rows read it through [`crate::cpu_matmul`]'s kernel. It holds exactly the f32 weight's
    /// values (the f32 weight is its dequantization); whatever changes the weight drops it.
    #[module(skip)]
    pub quantized: Option<Arc<QuantizedMatrix>>,
}

impl Linear {
    /// From a weight already laid out `[in, out]` (contiguous) and an optional bias.
    pub fn from_in_out(weight: Tensor<2>, bias: Option<Tensor<1>>) -> Self {
        Self {
            weight: Param::from_tensor(weight),
            bias: bias.map(Param::from_tensor),
            lora: None,
            quantized: None,
        }
    }

    /// Input width.
    pub fn d_in(&self) -> usize {
        self.weight.shape().dims::<2>()[0]
    }

    /// Output width.
    pub fn d_out(&self) -> usize {
        self.weight.shape().dims::<2>()[1]
    }

    /// Applies the projection to `x: [.., in]`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        self.forward_prepared(x, None)
    }

    /// [`Linear::forward`], the adapter reading `prepared` — `x` as
    /// [`LoraAdapter::prepare`] made it, shared by the adapters that read the same input (see
    /// [`shared_adapter_input`]) — where given.
    pub fn forward_prepared<const D: usize>(
        &self,
        x: Tensor<D>,
        prepared: Option<Tensor<D>>,
    ) -> Tensor<D> {
        let bias = self.bias.as_ref().map(|b| b.val());
        let fast = self
            .quantized
            .as_deref()
            .and_then(|q| crate::cpu_matmul::matmul_nt_quantized(&x, q));
        let y = match fast {
            Some(y) => match bias {
                Some(b) => y + b.unsqueeze(),
                None => y,
            },
            None => burn::tensor::module::linear(x.clone(), self.weight.val(), bias),
        };
        match &self.lora {
            Some(adapter) => {
                let xp = prepared.unwrap_or_else(|| adapter.prepare(x));
                adapter.add_to(y, xp)
            }
            None => y,
        }
    }
}

/// `linears`' weights side by side, `[in, Σ out]`, each linear's weight then a view of its
/// part (a slice, which the GPU backends make a view where it falls on their memory alignment,
/// as it does at real models' widths), so one product computes all their base outputs. Returns
/// the joined weight where there are several, on a GPU device, each with a plain float weight
/// (no quantized blocks) of one input width and dtype, and with them their biases side by side
/// where every one has a bias (Qwen2's q, k and v; each keeps its own); `None`, nothing changed,
/// elsewhere (the CPU backend keeps its per-weight paths, and a mix of biased and unbiased
/// projections stays apart).
pub(crate) fn join(linears: &mut [&mut Linear]) -> Option<Joined> {
    let first = linears.first()?.weight.val();
    let biased = linears.iter().filter(|l| l.bias.is_some()).count();
    let plain = linears.iter().all(|l| {
        l.quantized.is_none()
            && l.d_in() == first.dims()[0]
            && l.weight.val().dtype() == first.dtype()
    }) && (biased == 0 || biased == linears.len());
    if linears.len() < 2 || !plain || crate::is_cpu(&first.device()) {
        return None;
    }
    let bias = (biased > 0).then(|| {
        let parts = linears
            .iter()
            .map(|l| l.bias.as_ref().expect("every one biased").val())
            .collect();
        Param::from_tensor(Tensor::cat(parts, 0).detach())
    });
    // Detached: on an autodiff device each is a parameter of its own (a leaf).
    let joined = Tensor::cat(linears.iter().map(|l| l.weight.val()).collect(), 1).detach();
    let mut from = 0;
    for l in linears.iter_mut() {
        let n = l.d_out();
        l.weight = Param::from_tensor(joined.clone().slice(s![.., from..from + n]).detach());
        from += n;
    }
    Some(Joined {
        weight: Param::from_tensor(joined),
        bias,
    })
}

/// Weights joined by [`join`], `[in, Σ out]`, with the biases side by side where they have them.
#[derive(Module, Debug)]
pub struct Joined {
    /// The weights side by side (each projection's weight a view of its part).
    pub weight: Param<Tensor<2>>,
    /// The biases side by side, `[Σ out]` (a copy: each projection keeps its own).
    pub bias: Option<Param<Tensor<1>>>,
}

impl Joined {
    /// The base outputs of every joined projection for `x`, side by side.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        burn::tensor::module::linear(x, self.weight.val(), self.bias.as_ref().map(Param::val))
    }

    /// Values it holds, every one a view or a copy of its projections' own.
    pub fn values(&self) -> usize {
        self.weight.shape().num_elements()
            + self.bias.as_ref().map_or(0, |b| b.shape().num_elements())
    }
}

/// One prepared adapter input ([`LoraAdapter::prepare`]: cast, dropout) for all the
/// `linears` that read `x` (q/k/v; gate/up), when each has an adapter and all prepare alike;
/// `None` otherwise (each adapter then prepares its own). Sharing casts `x` once and draws one
/// dropout mask for them all, and autodiff keeps one masked copy of `x` for the backward pass
/// instead of one per adapter. PEFT draws an independent mask per adapter: each adapter sees
/// the same dropout distribution here, but q, k and v (and gate and up) see the same draw
/// (docs/src/numerics.md).
pub fn shared_adapter_input<const D: usize>(
    linears: &[&Linear],
    x: &Tensor<D>,
) -> Option<Tensor<D>> {
    shared_adapter(linears).map(|first| first.prepare(x.clone()))
}

/// The adapter whose [`LoraAdapter::prepare`] serves all of `linears` (the first), when there
/// are several, each has an adapter, and all prepare alike.
fn shared_adapter<'a>(linears: &[&'a Linear]) -> Option<&'a LoraAdapter> {
    let first = linears.first()?.lora.as_ref()?;
    let alike = linears
        .iter()
        .all(|l| l.lora.as_ref().is_some_and(|a| a.prepares_like(first)));
    (alike && linears.len() > 1).then_some(first)
}

/// The dropout masks a forward through `linears` (which read one input of `tokens` rows) draws,
/// as `(probability, elements)` in draw order: one for their [`shared_adapter_input`], else one
/// per adapter that draws.
pub fn dropout_sites(linears: &[&Linear], tokens: usize) -> Vec<(f64, usize)> {
    let draws = |l: &Linear| {
        l.lora
            .as_ref()
            .and_then(|a| a.dropout_draws().map(|p| (p, tokens * l.d_in())))
    };
    if shared_adapter(linears).is_some() {
        draws(linears[0]).into_iter().collect()
    } else {
        linears.iter().filter_map(|l| draws(l)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{DType, Device, Distribution};

    /// A random 16 → 8 projection with a rank-2 adapter (dropout 0.5).
    fn adapted(device: &Device, compute: DType) -> Linear {
        device.seed(1);
        let w = Tensor::<2>::random([16, 8], Distribution::Normal(0.0, 1.0), device);
        let a = Tensor::<2>::random([16, 2], Distribution::Normal(0.0, 1.0), device);
        let b = Tensor::<2>::random([2, 8], Distribution::Normal(0.0, 1.0), device);
        let mut lin = Linear::from_in_out(w, None);
        let mut ad = LoraAdapter::from_factors("m.q_proj", a, b, 2.0, 0.5);
        ad.compute = compute;
        lin.lora = Some(ad);
        lin
    }

    #[test]
    fn adapters_that_prepare_alike_share_one_dropout_draw() {
        let _rng = crate::testing::train_lock();
        let device = Device::flex().autodiff();
        let host = |t: Tensor<2>| t.into_data().try_into_vec_as::<f32>().unwrap();
        let p = adapted(&device, DType::F32);
        let q = p.clone();
        let x = Tensor::<2>::ones([32, 16], &device);
        device.seed(5);
        let shared = shared_adapter_input(&[&p, &q], &x).expect("alike adapters share");
        // Inverted dropout at 0.5: every element 0 or 2, about half kept.
        let v = host(shared.clone());
        assert!(v.iter().all(|&e| e == 0.0 || e == 2.0));
        let kept = v.iter().filter(|&&e| e == 2.0).count() as f64 / v.len() as f64;
        assert!((kept - 0.5).abs() < 0.1, "kept {kept}");
        // One draw for both: identical layers give identical outputs from the shared input,
        // and different ones when each draws its own mask.
        let yp = host(p.forward_prepared(x.clone(), Some(shared.clone())));
        let yq = host(q.forward_prepared(x.clone(), Some(shared)));
        assert_eq!(yp, yq);
        assert_ne!(host(p.forward(x.clone())), host(q.forward(x.clone())));
        // Nothing to share: a lone layer, one without an adapter, one computing in bf16.
        assert!(shared_adapter_input(&[&p], &x).is_none());
        let bare = Linear::from_in_out(Tensor::zeros([16, 8], &device), None);
        assert!(shared_adapter_input(&[&p, &bare], &x).is_none());
        assert!(shared_adapter_input(&[&p, &adapted(&device, DType::BF16)], &x).is_none());
    }

    /// A bf16 projection with an f32 adapter adds the delta as PEFT does: the base output plus
    /// the f32 delta in f32, rounded to bf16 once (computed here on the host).
    #[test]
    fn a_bf16_projection_adds_its_f32_delta_rounded_once() {
        let device = Device::flex();
        let host = |t: Tensor<2>| {
            t.cast(DType::F32)
                .into_data()
                .try_into_vec_as::<f32>()
                .unwrap()
        };
        let mut p = adapted(&device, DType::F32);
        p.weight = Param::from_tensor(p.weight.val().mul_scalar(40.0).cast(DType::BF16));
        let ad = p.lora.take().expect("an adapter");
        let x = Tensor::<2>::random([64, 16], Distribution::Normal(0.0, 1.0), &device)
            .cast(DType::BF16);
        let base = host(p.forward(x.clone()));
        let delta = host(
            ad.product(x.clone().cast(DType::F32))
                .mul_scalar(ad.scaling),
        );
        p.lora = Some(ad);
        let got = host(p.forward_prepared(x.clone(), Some(x.cast(DType::F32))));
        let once: Vec<f32> = base
            .iter()
            .zip(&delta)
            .map(|(b, d)| half::bf16::from_f32(b + d).to_f32())
            .collect();
        assert_eq!(got, once);
    }
}
