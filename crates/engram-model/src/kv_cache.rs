//! Key/value cache for incremental decoding: per layer, keys and values of every position seen
//! so far, `[batch, kv_heads, seq, head_dim]` (before the grouped-query repeat).
//!
//! Inference on the CPU backend keeps them in one host buffer per layer
//! ([`engram_kernels::KvBuffer`]: written in place, attended where they lie; reserved for the
//! whole generation by [`KvCache::reserve`]); the other backends keep device tensors and
//! concatenate.

use burn::tensor::Tensor;
use engram_kernels::KvBuffer;

/// One layer's cached keys and values.
#[derive(Debug, Clone, Default)]
pub struct LayerCache {
    /// Keys, `[batch, kv_heads, len, head_dim]` (device tensors: GPU backends).
    pub k: Option<Tensor<4>>,
    /// Values, same shape.
    pub v: Option<Tensor<4>>,
    /// Keys and values in one host buffer (the CPU backend's inference), created by the first
    /// append with the slots [`KvCache::reserve`] asked for.
    pub host: Option<KvBuffer>,
    /// Slots to reserve when the host buffer is created.
    pub reserve: usize,
}

impl LayerCache {
    /// The host buffer, created for `batch` rows of `kv_heads` × `head_dim` on first use.
    pub fn host_buffer(&mut self, batch: usize, kv_heads: usize, head_dim: usize) -> &mut KvBuffer {
        let reserve = self.reserve;
        self.host.get_or_insert_with(|| {
            let mut b = KvBuffer::new(batch, kv_heads, head_dim);
            b.reserve(reserve);
            b
        })
    }

    /// Appends new keys/values along the sequence and returns the full ones.
    pub fn append(&mut self, k: Tensor<4>, v: Tensor<4>) -> (Tensor<4>, Tensor<4>) {
        let k = match self.k.take() {
            Some(old) => Tensor::cat(vec![old, k], 2),
            None => k,
        };
        let v = match self.v.take() {
            Some(old) => Tensor::cat(vec![old, v], 2),
            None => v,
        };
        self.k = Some(k.clone());
        self.v = Some(v.clone());
        (k, v)
    }
}

/// The cache of a whole model, plus the bookkeeping generation needs: how many slots each row
/// has, and how many of the leading slots of each row are padding.
#[derive(Debug, Clone, Default)]
pub struct KvCache {
    /// One entry per decoder layer.
    pub layers: Vec<LayerCache>,
    /// Slots filled so far (same for every row).
    pub len: usize,
    /// Padding slots of each row, starting at slot `pad_start`.
    pub pads: Vec<usize>,
    /// First padding slot (0 for left padding; the prefix length after a shared prefix).
    pub pad_start: usize,
}

impl KvCache {
    /// An empty cache for `layers` layers and rows with the given left padding.
    pub fn new(layers: usize, pads: Vec<usize>) -> Self {
        Self {
            layers: vec![LayerCache::default(); layers],
            len: 0,
            pads,
            pad_start: 0,
        }
    }

    /// Batch size.
    pub fn batch(&self) -> usize {
        self.pads.len()
    }

    /// Makes room for `slots` slots per row in each layer's host buffer (so that a generation
    /// of known length never regrows it); device tensors ignore it.
    pub fn reserve(&mut self, slots: usize) {
        for l in &mut self.layers {
            l.reserve = l.reserve.max(slots);
            if let Some(h) = &mut l.host {
                h.reserve(slots);
            }
        }
    }

    /// Repeats a batch-1, unpadded cache `n` times along the batch (rows sharing one prefix),
    /// its host buffers with room for `slots` slots per row (see [`KvCache::reserve`]).
    pub fn repeat(&self, n: usize, slots: usize) -> Self {
        assert_eq!(self.batch(), 1, "only a batch-1 cache can be repeated");
        Self {
            layers: self
                .layers
                .iter()
                .map(|l| LayerCache {
                    k: l.k.clone().map(|t| t.repeat_dim(0, n)),
                    v: l.v.clone().map(|t| t.repeat_dim(0, n)),
                    host: l.host.as_ref().map(|h| h.repeat(n, slots)),
                    reserve: l.reserve.max(slots),
                })
                .collect(),
            len: self.len,
            pads: vec![self.pads[0]; n],
            pad_start: self.pad_start,
        }
    }
}
