//! A layer's key/value cache in one preallocated host buffer, and attention of a few new queries
//! over it — a decode step's attention on the CPU.
//!
//! Burn's tensors are immutable values: a cache kept as tensors grows by concatenation, which
//! copies every cached key and value of every layer at every decode step (at a 2k-token context
//! on SmolLM2, ~190 MB a token), and Burn's fused attention op makes its own contiguous copy of
//! a view into a larger buffer. [`KvBuffer`] instead writes each step's keys and values in place
//! into `[batch, kv_heads, capacity, head_dim]` storage (grown by doubling when a caller did not
//! reserve enough), and [`KvBuffer::attend`] reads them where they lie.
//!
//! Numerics as transformers' eager attention: scores `q·k` in f32 scaled by `scale`, masked keys
//! left out (transformers fills them with the f32 minimum, whose `exp` is 0), softmax in f32
//! with the maximum subtracted (its exponentials glibc's `expf`, bit for bit: [`crate::exp`]),
//! probabilities normalized before they weight the values. Dot products run over 8 lanes folded
//! in a fixed order. The AVX2 path does the portable path's operations in its order, so the two
//! give the same bits (tested); it reads each block of a kv head's keys and values once for all
//! the query heads that share it.

use rayon::prelude::*;

use crate::exp::expf;
use crate::matmul_nt::{LANES, lane_sum};

/// Multiply-adds below which [`KvBuffer::attend`] runs on the calling thread (as
/// `matmul_nt`'s threshold: below it, handing heads to rayon's other threads costs more than
/// it saves).
const PARALLEL_MIN_MACS: usize = 1 << 16;

/// One layer's cached keys and values, `[batch, kv_heads, capacity, head_dim]` f32 each; the
/// first [`KvBuffer::len`] slots of every row are filled.
#[derive(Debug, Clone, PartialEq)]
pub struct KvBuffer {
    k: Vec<f32>,
    v: Vec<f32>,
    batch: usize,
    kv_heads: usize,
    head_dim: usize,
    capacity: usize,
    len: usize,
}

impl KvBuffer {
    /// An empty cache for `batch` rows of `kv_heads` heads of width `head_dim`.
    pub fn new(batch: usize, kv_heads: usize, head_dim: usize) -> Self {
        Self {
            k: Vec::new(),
            v: Vec::new(),
            batch,
            kv_heads,
            head_dim,
            capacity: 0,
            len: 0,
        }
    }

    /// Filled slots per row.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rows.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Slots per row the storage holds without growing.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Makes room for at least `slots` slots per row (in one allocation).
    pub fn reserve(&mut self, slots: usize) {
        if slots <= self.capacity {
            return;
        }
        let rows = self.batch * self.kv_heads;
        let k = self.laid_out(self.filled(&self.k), rows, slots);
        let v = self.laid_out(self.filled(&self.v), rows, slots);
        (self.k, self.v, self.capacity) = (k, v, slots);
    }

    /// The filled slots of each row (`[len, head_dim]`, rows in storage order) of `buf`, this
    /// cache's keys or values.
    fn filled<'a>(&self, buf: &'a [f32]) -> impl Iterator<Item = &'a [f32]> + Clone {
        let (stride, filled) = (self.capacity * self.head_dim, self.len * self.head_dim);
        (0..buf.len() / stride.max(1)).map(move |r| &buf[r * stride..][..filled])
    }

    /// `rows` of filled slots laid out `capacity` slots apart (the rest zeros), `count` rows.
    fn laid_out<'a>(
        &self,
        rows: impl Iterator<Item = &'a [f32]>,
        count: usize,
        capacity: usize,
    ) -> Vec<f32> {
        let stride = capacity * self.head_dim;
        let mut out = vec![0f32; count * stride];
        for (dst, src) in out.chunks_exact_mut(stride.max(1)).zip(rows) {
            dst[..src.len()].copy_from_slice(src);
        }
        out
    }

    /// Appends `t` new slots per row: `k` and `v` laid out as the projections produce them,
    /// `[batch, t, kv_heads, head_dim]`. Grows the storage (doubling) when it is full.
    ///
    /// # Panics
    /// If `k` or `v` does not hold `batch·t·kv_heads·head_dim` values.
    pub fn append(&mut self, k: &[f32], v: &[f32], t: usize) {
        let (kv, d) = (self.kv_heads, self.head_dim);
        let n = self.batch * t * kv * d;
        assert!(
            k.len() == n && v.len() == n,
            "keys/values: {} and {} values for [{}, {t}, {kv}, {d}]",
            k.len(),
            v.len(),
            self.batch
        );
        if self.len + t > self.capacity {
            self.reserve((self.len + t).max(2 * self.capacity));
        }
        for b in 0..self.batch {
            for s in 0..t {
                for h in 0..kv {
                    let src = ((b * t + s) * kv + h) * d;
                    let dst = ((b * kv + h) * self.capacity + self.len + s) * d;
                    self.k[dst..dst + d].copy_from_slice(&k[src..src + d]);
                    self.v[dst..dst + d].copy_from_slice(&v[src..src + d]);
                }
            }
        }
        self.len += t;
    }

    /// A batch-1 cache repeated `n` times along the batch (rows sharing one prefix), with room
    /// for `slots` slots per row (at least its capacity): one allocation and one copy of the
    /// filled slots, where repeating and then reserving would copy them twice.
    ///
    /// # Panics
    /// If the cache has more than one row.
    pub fn repeat(&self, n: usize, slots: usize) -> Self {
        assert_eq!(self.batch, 1, "only a batch-1 cache can be repeated");
        let (capacity, rows) = (slots.max(self.capacity), n * self.kv_heads);
        let spread = |buf| self.laid_out(self.filled(buf).cycle().take(rows), rows, capacity);
        Self {
            k: spread(&self.k),
            v: spread(&self.v),
            batch: n,
            capacity,
            ..*self
        }
    }

    /// The filled keys and values as contiguous `[batch, kv_heads, len, head_dim]` copies (for
    /// an op that needs them as a tensor, such as a long prompt chunk's attention).
    pub fn contiguous(&self) -> (Vec<f32>, Vec<f32>) {
        let values = self.batch * self.kv_heads * self.len * self.head_dim;
        let pack = |buf| {
            let mut out = Vec::with_capacity(values);
            self.filled(buf).for_each(|row| out.extend_from_slice(row));
            out
        };
        (pack(&self.k), pack(&self.v))
    }

    /// Attention of the last `t` slots' queries over every cached slot (the new ones included):
    /// `q` is `[batch, t, heads, head_dim]` (as the projection lays it out; `heads` a multiple
    /// of the cache's kv heads, query head `i` reading kv head `i / (heads / kv_heads)` as
    /// transformers' `repeat_kv`), `mask` `[batch, t, len]` with true for a key a query must not
    /// see (`None`: every key visible). Returns `[batch, t, heads, head_dim]`.
    ///
    /// # Panics
    /// If the shapes disagree, or a query sees no key.
    pub fn attend(
        &self,
        q: &[f32],
        t: usize,
        heads: usize,
        mask: Option<&[bool]>,
        scale: f32,
    ) -> Vec<f32> {
        let (b, kv, d, len) = (self.batch, self.kv_heads, self.head_dim, self.len);
        assert!(
            heads.is_multiple_of(kv),
            "{heads} query heads over {kv} kv heads"
        );
        assert_eq!(
            q.len(),
            b * t * heads * d,
            "queries for [{b}, {t}, {heads}, {d}]"
        );
        assert!(t <= len, "{t} queries over {len} cached slots");
        if let Some(m) = mask {
            assert_eq!(m.len(), b * t * len, "mask for [{b}, {t}, {len}]");
        }
        let groups = heads / kv;
        let threads = rayon::current_num_threads();
        let macs = 2 * b * heads * t * len * d;
        let parallel = macs >= PARALLEL_MIN_MACS && threads > 1;
        // Query heads per task: all those of a kv head (its keys and values then read once for
        // them all), unless that leaves too few tasks to share among the threads.
        let sub = if parallel {
            (1..=groups)
                .rev()
                .find(|&n| groups.is_multiple_of(n) && b * heads / n >= 2 * threads)
                .unwrap_or(1)
        } else {
            groups
        };
        let task = |(i, out): (usize, &mut [f32])| {
            let (bi, h0) = (i * sub / heads, i * sub % heads);
            let base = (bi * kv + h0 / groups) * self.capacity * d;
            let keys = &self.k[base..base + len * d];
            let values = &self.v[base..base + len * d];
            for s in 0..t {
                let queries = &q[((bi * t + s) * heads + h0) * d..][..sub * d];
                let visible = mask.map(|m| &m[(bi * t + s) * len..][..len]);
                let kv = Head {
                    keys,
                    values,
                    masked: visible,
                    scale,
                };
                heads_of_group(queries, d, kv, &mut out[s * d..], t * d);
            }
        };
        // Per (row, head) outputs, [batch, heads, t, head_dim]; then in the projection's order.
        let mut by_head = vec![0f32; b * heads * t * d];
        if parallel {
            by_head
                .par_chunks_mut(sub * t * d)
                .enumerate()
                .for_each(task);
        } else {
            by_head.chunks_mut(sub * t * d).enumerate().for_each(task);
        }
        if t == 1 {
            return by_head;
        }
        let mut out = vec![0f32; by_head.len()];
        for bi in 0..b {
            for h in 0..heads {
                for s in 0..t {
                    let src = ((bi * heads + h) * t + s) * d;
                    let dst = ((bi * t + s) * heads + h) * d;
                    out[dst..dst + d].copy_from_slice(&by_head[src..src + d]);
                }
            }
        }
        out
    }
}

/// What one query slot attends over: a kv head's cached keys and values (`[len, d]`), which of
/// them it must not see, and the scores' scale.
#[derive(Clone, Copy)]
struct Head<'a> {
    keys: &'a [f32],
    values: &'a [f32],
    masked: Option<&'a [bool]>,
    scale: f32,
}

/// The attention of the query heads that read one kv head, over `kv`: query `g`
/// (`queries[g·d..][..d]`) into `out[g·stride..][..d]`. Each is [`head_portable`]'s
/// computation, whichever path runs.
fn heads_of_group(queries: &[f32], d: usize, kv: Head<'_>, out: &mut [f32], stride: usize) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd_available() {
        // SAFETY (every arm): AVX2 and FMA are present (checked above); the head width is
        // the arm's.
        unsafe {
            let run = match d {
                8 => avx2::heads::<1>,
                16 => avx2::heads::<2>,
                32 => avx2::heads::<4>,
                64 => avx2::heads::<8>,
                96 => avx2::heads::<12>,
                128 => avx2::heads::<16>,
                _ => return heads_portable(queries, d, kv, out, stride),
            };
            return run(queries, kv, out, stride);
        }
    }
    heads_portable(queries, d, kv, out, stride)
}

/// [`heads_of_group`] one query at a time.
fn heads_portable(queries: &[f32], d: usize, kv: Head<'_>, out: &mut [f32], stride: usize) {
    for (g, query) in queries.chunks_exact(d).enumerate() {
        head_portable(query, kv, &mut out[g * stride..][..d]);
    }
}

/// [`head_portable`]'s operations, in its order for each query, with AVX2 registers, for the
/// queries of one kv head together: each block of keys and values is read once for them all
/// (from memory once, then from L1), four keys' dot products run at a time (four independent
/// chains where the portable loop waits on one), a head's output is accumulated in registers
/// across a block of keys, and the exponentials ([`crate::exp`]) and the probabilities'
/// normalization run eight at a time (division is exactly rounded: the same quotients).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{Head, expf};
    use crate::exp::avx2::exp8;
    use crate::matmul_nt::avx2::hsum;

    /// Keys whose dot products run together.
    const KEYS: usize = 4;
    /// Keys per block that every query of the group reads before the next block (64 keys of
    /// 64 f32 values: 16 KiB, half of a typical L1 data cache).
    const BLOCK: usize = 64;

    /// [`super::dot`]'s fold of 8 lanes (`crate::matmul_nt`'s) plus its empty tail.
    #[target_feature(enable = "avx2,fma")]
    fn fold(a: __m256) -> f32 {
        hsum(a) + 0.0
    }

    /// [`super::heads_of_group`] for heads of `8·C` values.
    ///
    /// # Safety
    /// AVX2 present; `queries` holds whole heads of `8·C` values, `keys` and `values` whole
    /// rows of them, `out` each query's `8·C` outputs `stride` apart.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn heads<const C: usize>(
        queries: &[f32],
        kv: Head<'_>,
        out: &mut [f32],
        stride: usize,
    ) {
        let (keys, values, masked, scale) = (kv.keys, kv.values, kv.masked, kv.scale);
        let d = 8 * C;
        let (n, len) = (queries.len() / d, keys.len() / d);
        let hidden = |j: usize| masked.is_some_and(|m| m[j]);
        let (kp, vp) = (keys.as_ptr(), values.as_ptr());
        let mut scores = vec![f32::NEG_INFINITY; n * len];
        let mut maxima = vec![f32::NEG_INFINITY; n];
        for b0 in (0..len).step_by(BLOCK) {
            let b1 = (b0 + BLOCK).min(len);
            for (g, (row, max)) in scores.chunks_exact_mut(len).zip(&mut maxima).enumerate() {
                let qp = queries[g * d..].as_ptr();
                let mut j = b0;
                while j < b1 {
                    let take = (b1 - j).min(KEYS);
                    let mut acc = [_mm256_setzero_ps(); KEYS];
                    for c in 0..C {
                        // SAFETY: chunk c of query g and of keys j..j + take exists.
                        unsafe {
                            let q = _mm256_loadu_ps(qp.add(8 * c));
                            for (kk, a) in acc.iter_mut().enumerate().take(take) {
                                let k = _mm256_loadu_ps(kp.add((j + kk) * d + 8 * c));
                                *a = _mm256_add_ps(*a, _mm256_mul_ps(q, k));
                            }
                        }
                    }
                    for (kk, a) in acc.iter().enumerate().take(take) {
                        if !hidden(j + kk) {
                            let s = fold(*a) * scale;
                            row[j + kk] = s;
                            *max = max.max(s);
                        }
                    }
                    j += take;
                }
            }
        }
        for (row, &max) in scores.chunks_exact_mut(len).zip(&maxima) {
            assert!(max > f32::NEG_INFINITY, "a query sees no key");
            // A hidden key's score is -inf: its exponential is 0, as the portable path sets.
            let mut sum = 0f32;
            let maxes = _mm256_set1_ps(max);
            let mut chunks = row.chunks_exact_mut(8);
            for p in &mut chunks {
                // SAFETY: p holds 8 values.
                unsafe {
                    let x = _mm256_sub_ps(_mm256_loadu_ps(p.as_ptr()), maxes);
                    _mm256_storeu_ps(p.as_mut_ptr(), exp8(x));
                }
                for v in p.iter() {
                    sum += v;
                }
            }
            for p in chunks.into_remainder() {
                *p = expf(*p - max);
                sum += *p;
            }
            let sums = _mm256_set1_ps(sum);
            let mut chunks = row.chunks_exact_mut(8);
            for p in &mut chunks {
                // SAFETY: p holds 8 values.
                unsafe {
                    let v = _mm256_div_ps(_mm256_loadu_ps(p.as_ptr()), sums);
                    _mm256_storeu_ps(p.as_mut_ptr(), v);
                }
            }
            for p in chunks.into_remainder() {
                *p /= sum;
            }
        }
        for g in 0..n {
            out[g * stride..][..d].fill(0.0);
        }
        for b0 in (0..len).step_by(BLOCK) {
            let b1 = (b0 + BLOCK).min(len);
            for (g, row) in scores.chunks_exact(len).enumerate() {
                let op = out[g * stride..][..d].as_mut_ptr();
                let mut acc = [_mm256_setzero_ps(); C];
                for (c, a) in acc.iter_mut().enumerate() {
                    // SAFETY: out holds query g's 8·C outputs at op.
                    *a = unsafe { _mm256_loadu_ps(op.add(8 * c)) };
                }
                for (j, &p) in (b0..b1).zip(&row[b0..b1]) {
                    if p == 0.0 {
                        continue;
                    }
                    let pv = _mm256_set1_ps(p);
                    for (c, a) in acc.iter_mut().enumerate() {
                        // SAFETY: chunk c of value row j exists.
                        let v = unsafe { _mm256_loadu_ps(vp.add(j * d + 8 * c)) };
                        *a = _mm256_add_ps(*a, _mm256_mul_ps(pv, v));
                    }
                }
                for (c, a) in acc.iter().enumerate() {
                    // SAFETY: as above.
                    unsafe { _mm256_storeu_ps(op.add(8 * c), *a) };
                }
            }
        }
    }
}

#[inline(always)]
fn head_portable(query: &[f32], kv: Head<'_>, out: &mut [f32]) {
    let (keys, values, masked, scale) = (kv.keys, kv.values, kv.masked, kv.scale);
    let d = query.len();
    let len = keys.len() / d;
    let hidden = |j: usize| masked.is_some_and(|m| m[j]);
    let mut scores = vec![f32::NEG_INFINITY; len];
    let mut max = f32::NEG_INFINITY;
    for (j, score) in scores.iter_mut().enumerate() {
        if !hidden(j) {
            *score = dot(query, &keys[j * d..][..d]) * scale;
            max = max.max(*score);
        }
    }
    assert!(max > f32::NEG_INFINITY, "a query sees no key");
    let mut sum = 0f32;
    for (j, score) in scores.iter_mut().enumerate() {
        *score = if hidden(j) { 0.0 } else { expf(*score - max) };
        sum += *score;
    }
    // Each output element sums over the keys in order (vectorized across elements, so the
    // AVX2 and portable builds add in the same order).
    out.fill(0.0);
    for (j, &p) in scores.iter().enumerate() {
        if p == 0.0 {
            continue;
        }
        let p = p / sum;
        for (o, &x) in out.iter_mut().zip(&values[j * d..][..d]) {
            *o += p * x;
        }
    }
}

/// `a · b` over [`LANES`] partial sums, folded pairwise.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..LANES {
            lanes[l] += x[l] * y[l];
        }
    }
    let mut tail = 0f32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    lane_sum(&lanes) + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random vector.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut x = seed.wrapping_mul(2654435761).wrapping_add(12345);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// Attention in f64, written from the definition: `[b, t, heads, d]`.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        (b, t, heads, kv, d, len): (usize, usize, usize, usize, usize, usize),
        mask: Option<&[bool]>,
        scale: f64,
    ) -> Vec<f64> {
        // k, v: [b, len, kv, d] as appended.
        let mut out = vec![0f64; b * t * heads * d];
        for bi in 0..b {
            for s in 0..t {
                for h in 0..heads {
                    let kh = h / (heads / kv);
                    let qv = &q[((bi * t + s) * heads + h) * d..][..d];
                    let mut w = vec![f64::NEG_INFINITY; len];
                    for (j, wj) in w.iter_mut().enumerate() {
                        if mask.is_some_and(|m| m[(bi * t + s) * len + j]) {
                            continue;
                        }
                        let kj = &k[((bi * len + j) * kv + kh) * d..][..d];
                        *wj = qv
                            .iter()
                            .zip(kj)
                            .map(|(&a, &b)| a as f64 * b as f64)
                            .sum::<f64>()
                            * scale;
                    }
                    let max = w.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = w.iter().map(|&x| (x - max).exp()).collect();
                    let sum: f64 = e.iter().sum();
                    for (j, ej) in e.iter().enumerate() {
                        let vj = &v[((bi * len + j) * kv + kh) * d..][..d];
                        for c in 0..d {
                            out[((bi * t + s) * heads + h) * d + c] += ej / sum * vj[c] as f64;
                        }
                    }
                }
            }
        }
        out
    }

    /// Appends `steps` chunks (of `t` slots each, the last `t` the queries) and checks the
    /// attention of the last chunk against the f64 reference.
    fn check(b: usize, heads: usize, kv: usize, d: usize, chunks: &[usize], masked: bool) {
        let len: usize = chunks.iter().sum();
        let t = *chunks.last().unwrap();
        let k_all = values(b * len * kv * d, 1);
        let v_all = values(b * len * kv * d, 2);
        // The per-chunk slices of [b, len, kv, d] in the [b, t, kv, d] order append takes.
        let mut cache = KvBuffer::new(b, kv, d);
        let mut start = 0;
        for &c in chunks {
            let take = |all: &[f32]| {
                let mut out = Vec::new();
                for bi in 0..b {
                    out.extend_from_slice(&all[(bi * len + start) * kv * d..][..c * kv * d]);
                }
                out
            };
            cache.append(&take(&k_all), &take(&v_all), c);
            start += c;
        }
        assert_eq!(cache.len(), len);
        let q = values(b * t * heads * d, 3);
        // Causal with the first row's first two slots masked as left padding.
        let mask: Vec<bool> = (0..b * t * len)
            .map(|i| {
                let (bi, s, j) = (i / (t * len), (i / len) % t, i % len);
                j > len - t + s || (bi == 0 && j < 2 && len - t + s >= 2)
            })
            .collect();
        let mask = masked.then_some(&mask[..]);
        let scale = (d as f64).powf(-0.5);
        let got = cache.attend(&q, t, heads, mask, scale as f32);
        let want = reference(&q, &k_all, &v_all, (b, t, heads, kv, d, len), mask, scale);
        let diff = got
            .iter()
            .zip(&want)
            .map(|(&g, &w)| (g as f64 - w).abs())
            .fold(0.0, f64::max);
        assert!(
            diff < 1e-5,
            "b {b} heads {heads}/{kv} d {d} chunks {chunks:?}: {diff:e}"
        );
    }

    #[test]
    fn attends_as_the_definition_across_growth_and_grouped_heads() {
        check(1, 9, 3, 64, &[40, 1], false);
        check(2, 4, 2, 64, &[7, 5, 3, 1], true);
        check(3, 4, 4, 32, &[1, 1, 1, 1, 1, 1, 1, 1, 1, 1], true);
        check(2, 6, 3, 12, &[9, 4], true);
        // Long enough to run on rayon's threads: one query head per task (batch 1), and all
        // of a kv head's per task, for one and for three query slots.
        check(1, 9, 3, 64, &[2000, 1], false);
        check(4, 9, 3, 64, &[600, 1], false);
        check(3, 8, 2, 64, &[500, 3], true);
    }

    #[test]
    fn the_simd_and_portable_paths_give_the_same_bits() {
        // Every head width the AVX2 path has a loop for (and 12, which it hands to the
        // portable one); key counts around its blocks of four and of 64; one query and a
        // group of three (outputs 2·d apart); scores large enough that some probabilities
        // underflow to zero.
        let widths = [8, 12, 16, 32, 64, 96, 128];
        let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for (d, len) in widths
            .into_iter()
            .flat_map(|d| [1, 3, 5, 300].map(|l| (d, l)))
        {
            let (k, v) = (values(len * d, 7), values(len * d, 8));
            let mask: Vec<bool> = (0..len).map(|j| j % 5 == 3).collect();
            for (n, m) in [1, 3]
                .into_iter()
                .flat_map(|n| [None, Some(&mask[..])].map(|m| (n, m)))
            {
                let q: Vec<f32> = values(n * d, 6).iter().map(|x| x * 40.0).collect();
                let (mut a, mut b) = (vec![0f32; 2 * n * d], vec![0f32; 2 * n * d]);
                let kv = Head {
                    keys: &k,
                    values: &v,
                    masked: m,
                    scale: 0.125,
                };
                heads_of_group(&q, d, kv, &mut a, 2 * d);
                heads_portable(&q, d, kv, &mut b, 2 * d);
                let what = format!("d {d}, {len} keys, {n} queries, mask {}", m.is_some());
                assert_eq!(bits(&a), bits(&b), "{what}");
                assert!(a.iter().any(|x| *x != 0.0), "{what}");
            }
        }
    }

    #[test]
    fn reserve_and_repeat_keep_the_filled_slots() {
        let mut c = KvBuffer::new(1, 2, 8);
        c.append(&values(3 * 16, 4), &values(3 * 16, 5), 3);
        let before = c.contiguous();
        c.reserve(100);
        assert_eq!(c.capacity(), 100);
        assert_eq!(c.contiguous(), before);
        for slots in [0, 150] {
            let r = c.repeat(3, slots);
            assert_eq!(r.batch(), 3);
            assert_eq!(r.capacity(), slots.max(100));
            let (k, v) = r.contiguous();
            assert_eq!(k, before.0.repeat(3));
            assert_eq!(v, before.1.repeat(3));
        }
    }
}
