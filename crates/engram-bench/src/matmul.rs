//! `engram bench matmul`: the matrix products of one LoRA training step, one problem at a time,
//! timed on the device — how fast each of the step's matmuls runs on this backend, beside
//! torch's on the same shapes in the same run (`tests/peers/torch_matmul_bench.py`).
//!
//! `bench train`'s phase breakdown says how much of a step the matmuls take, but not which:
//! its launches carry a kernel's name (`MatmulEntry`), not a shape. Here each distinct product
//! of the step is its own row: the frozen blocks' projections forward and their input
//! gradients (q/k/v and gate/up joined on the GPU backends, as the model joins them), the
//! adapters' four products and two gradients per module, attention's batched products and the
//! language-model head on the label rows — each in the dtype and operand layout the step gives
//! it (autodiff reads `Wᵀ` and `xᵀ` as transposed views), with how many times a step runs it,
//! so the rows add up to the step's matmul time. Skinny products (an adapter's few output
//! columns over a long inner dimension, `x · A` and `dP · Bᵀ`) are also timed split along `k`
//! (a batched product over `k`'s slices and a sum), the form cuBLAS picks for such shapes: the
//! row says what that form would save before the model adopts it, and how far its sum is from
//! the plain product's.
//!
//! Device time is each launch's window as the device stamped it ([`LaunchCounter::start_timed`]:
//! CUDA events, Vulkan timestamp queries), per call; wall time is the host's from a sync to the
//! next over untimed calls. The CPU backend launches no kernels: there only wall time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burn::tensor::{DType, Device, Distribution, Tensor};
use engram_model::{LaunchCounter, LlamaConfig, WeightDType, device_label, kernel_cache};
use serde_json::{Value, json};

use crate::Out;
use crate::random::{architecture, known_peak_tflops};

/// Which part of a step a product belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The frozen blocks' projections.
    Base,
    /// The LoRA adapters' factors.
    Adapter,
    /// Attention's scores and values.
    Attention,
    /// The language-model head on the label rows.
    Head,
}

impl Group {
    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Group::Base => "base",
            Group::Adapter => "adapter",
            Group::Attention => "attention",
            Group::Head => "head",
        }
    }
}

/// One matrix product of a training step, `[batch, m, k] × [batch, k, n]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// What it computes, e.g. `lora A` (the modules in [`Problem::modules`]).
    pub kind: &'static str,
    /// The modules (or parts) that run this same product.
    pub modules: Vec<String>,
    /// Its part of the step.
    pub group: Group,
    /// Batched products (attention's `batch · kv heads`); 1 for the projections.
    pub batch: usize,
    /// Output rows.
    pub m: usize,
    /// Output columns.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// The operands' dtype.
    pub dtype: DType,
    /// The left operand is read transposed: stored `[batch, k, m]` (autodiff's `xᵀ · dy`).
    pub lhs_t: bool,
    /// The right operand is read transposed: stored `[batch, n, k]` (autodiff's `dy · Wᵀ`).
    pub rhs_t: bool,
    /// How many times one optimizer step runs it.
    pub per_step: usize,
    /// For a product the step does not run but could ([`joined_alternatives`]): the step's
    /// products it would replace, as (kind, module) pairs, each run once a layer; empty for the
    /// step's own.
    pub instead_of: Vec<(&'static str, &'static str)>,
}

impl Problem {
    /// Its name: the kind and the modules, e.g. `lora A q,k,v,gate,up`.
    pub fn name(&self) -> String {
        format!("{} {}", self.kind, self.modules.join(","))
    }

    /// Multiply-adds × 2.
    pub fn flops(&self) -> f64 {
        2.0 * (self.batch * self.m * self.n * self.k) as f64
    }

    /// The operands' layout: `nn`, `tn` (lhs transposed), `nt` (rhs transposed).
    pub fn layout(&self) -> &'static str {
        match (self.lhs_t, self.rhs_t) {
            (false, false) => "nn",
            (true, false) => "tn",
            (false, true) => "nt",
            (true, true) => "tt",
        }
    }

    /// Whether this is a skinny product, few output columns over a long `k`, that the split-`k`
    /// form may speed up.
    pub fn skinny(&self) -> bool {
        self.n <= 256 && self.k >= 2048 && self.k >= 4 * self.m
    }
}

/// The shape of the training step whose products are listed.
#[derive(Clone, Copy, Debug)]
pub struct StepShape {
    /// LoRA rank.
    pub rank: usize,
    /// Examples per step.
    pub batch: usize,
    /// Tokens per example.
    pub seq: usize,
    /// Label tokens per example (the head's rows).
    pub labels: usize,
    /// The frozen weights' dtype.
    pub weights: DType,
    /// The adapters' matmul dtype.
    pub adapters: DType,
    /// q/k/v's and gate/up's frozen weights joined into one product each (the GPU backends).
    pub joined: bool,
}

/// Adds a product to `list`, or its module to an identical one already there.
#[allow(clippy::too_many_arguments)]
fn add(
    list: &mut Vec<Problem>,
    kind: &'static str,
    module: &str,
    group: Group,
    (batch, m, n, k): (usize, usize, usize, usize),
    dtype: DType,
    (lhs_t, rhs_t): (bool, bool),
    per_step: usize,
) {
    let p = Problem {
        kind,
        modules: vec![module.to_string()],
        group,
        batch,
        m,
        n,
        k,
        dtype,
        lhs_t,
        rhs_t,
        per_step,
        instead_of: Vec::new(),
    };
    let same = |q: &Problem| {
        (
            q.kind, q.group, q.batch, q.m, q.n, q.k, q.dtype, q.lhs_t, q.rhs_t,
        ) == (
            p.kind, p.group, p.batch, p.m, p.n, p.k, p.dtype, p.lhs_t, p.rhs_t,
        )
    };
    match list.iter_mut().find(|q| same(q)) {
        Some(q) => {
            q.modules.push(module.to_string());
            q.per_step += per_step;
        }
        None => list.push(p),
    }
}

/// Operand layouts: plain, the right one read transposed (`dy · Wᵀ`), the left one (`xᵀ · dy`).
const NN: (bool, bool) = (false, false);
/// See [`NN`].
const NT: (bool, bool) = (false, true);
/// See [`NN`].
const TN: (bool, bool) = (true, false);

/// The distinct matrix products of one LoRA training step (LoRA on every linear layer) of
/// `cfg` at `shape`, in the order a step first runs them.
pub fn step_problems(cfg: &LlamaConfig, shape: &StepShape) -> Vec<Problem> {
    let (h, i, d) = (cfg.hidden_size, cfg.intermediate_size, cfg.head_dim);
    let (heads, kv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
    let (q, kvw) = (heads * d, kv * d);
    let n = cfg.num_hidden_layers;
    let t = shape.batch * shape.seq;
    let (w, a, r) = (shape.weights, shape.adapters, shape.rank);
    let modules = [
        ("q", h, q),
        ("k", h, kvw),
        ("v", h, kvw),
        ("o", q, h),
        ("gate", h, i),
        ("up", h, i),
        ("down", i, h),
    ];
    let projections: Vec<(&str, usize, usize)> = if shape.joined {
        vec![
            ("q/k/v", h, q + 2 * kvw),
            ("o", q, h),
            ("gate/up", h, 2 * i),
            ("down", i, h),
        ]
    } else {
        modules.to_vec()
    };
    // Attention, grouped as the model runs it: `[b, kv, groups · t, d]` against `[b, kv, t, d]`.
    let (bkv, gt, s) = (shape.batch * kv, (heads / kv.max(1)) * shape.seq, shape.seq);
    let (rows, vocab) = (shape.batch * shape.labels, cfg.vocab_size);
    let (base, att, ad, head) = (Group::Base, Group::Attention, Group::Adapter, Group::Head);
    let mut list = Vec::new();
    let mut put = |kind, module: &str, group, dims, dtype, layout, count| {
        add(&mut list, kind, module, group, dims, dtype, layout, count)
    };
    for &(m, d_in, d_out) in &projections {
        put("fwd", m, base, (1, t, d_out, d_in), w, NN, n);
    }
    put("scores", "q·kᵀ", att, (bkv, gt, s, d), w, NT, n);
    put("values", "p·v", att, (bkv, gt, d, s), w, NN, n);
    for &(m, d_in, _) in &modules {
        put("lora A", m, ad, (1, t, r, d_in), a, NN, n);
    }
    for &(m, _, d_out) in &modules {
        put("lora B", m, ad, (1, t, d_out, r), a, NN, n);
    }
    put("fwd", "lm_head", head, (1, rows, vocab, h), w, NN, 1);
    // The backward, in the order autodiff reaches the products.
    put("dx", "lm_head", head, (1, rows, h, vocab), w, NT, 1);
    for &(m, d_in, d_out) in &modules {
        put("lora dB", m, ad, (1, r, d_out, t), a, TN, n);
        put("lora dH", m, ad, (1, t, r, d_out), a, NT, n);
        put("lora dA", m, ad, (1, d_in, r, t), a, TN, n);
        put("lora dx", m, ad, (1, t, d_in, r), a, NT, n);
    }
    for &(m, d_in, d_out) in &projections {
        put("dx", m, base, (1, t, d_in, d_out), w, NT, n);
    }
    // dP = dO · vᵀ is the scores' product; dQ = dS · K the values'; dV = Pᵀ · dO and
    // dK = dSᵀ · Q read their left operand transposed.
    put("scores", "dO·vᵀ", att, (bkv, gt, s, d), w, NT, n);
    put("values", "dS·k", att, (bkv, gt, d, s), w, NN, n);
    put("grad", "pᵀ·dO", att, (bkv, s, d, gt), w, TN, n);
    put("grad", "dSᵀ·q", att, (bkv, s, d, gt), w, TN, n);
    list
}

/// Products the step could run instead of the adapters' separate ones, where q/k/v's (and
/// gate/up's) adapters read one prepared input (the GPU backends): their `A` factors side by side
/// (`x · [A_q A_k A_v]`, one product of `3r` columns), their `B` factors as one block-diagonal
/// matrix (one product whose output is the joined base's layout; at `3r` rows it does three
/// times the separate products' work, a few percent of the base's at small ranks), and the four
/// gradients of each as one product. Each replaces its kind's product of every part, once a
/// layer; timing them says what a joined adapter node would save before it is built.
pub fn joined_alternatives(cfg: &LlamaConfig, shape: &StepShape) -> Vec<Problem> {
    if !shape.joined {
        return Vec::new();
    }
    let (h, i, d) = (cfg.hidden_size, cfg.intermediate_size, cfg.head_dim);
    let (q, kvw) = (cfg.num_attention_heads * d, cfg.num_key_value_heads * d);
    let (t, r, a, n) = (
        shape.batch * shape.seq,
        shape.rank,
        shape.adapters,
        cfg.num_hidden_layers,
    );
    let groups: [(&'static str, &[&'static str], usize); 2] = [
        ("q/k/v", &["q", "k", "v"], q + 2 * kvw),
        ("gate/up", &["gate", "up"], 2 * i),
    ];
    let mut list = Vec::new();
    for (name, parts, width) in groups {
        let jr = r * parts.len();
        // (kind, what replaces it, dims, layout): the same products as `step_problems`' with the
        // parts' columns (or rows) side by side.
        let kinds = [
            ("lora A", "joined lora A", (1, t, jr, h), NN),
            ("lora B", "block-diagonal lora B", (1, t, width, jr), NN),
            ("lora dB", "block-diagonal lora dB", (1, jr, width, t), TN),
            ("lora dH", "block-diagonal lora dH", (1, t, jr, width), NT),
            ("lora dA", "joined lora dA", (1, h, jr, t), TN),
            ("lora dx", "joined lora dx", (1, t, h, jr), NT),
        ];
        for (kind, joined, (b, m, nn, k), (lhs_t, rhs_t)) in kinds {
            list.push(Problem {
                kind: joined,
                modules: vec![name.to_string()],
                group: Group::Adapter,
                batch: b,
                m,
                n: nn,
                k,
                dtype: a,
                lhs_t,
                rhs_t,
                per_step: n,
                instead_of: parts.iter().map(|&p| (kind, p)).collect(),
            });
        }
    }
    list
}

/// How `bench matmul` treats skinny products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitK {
    /// Split the skinny products ([`Problem::skinny`]) into `k` slices of about 512.
    Auto,
    /// Time only the plain products.
    Off,
    /// Split every adapter product with at most 256 output columns into this many slices
    /// (where it divides `k`).
    Slices(usize),
}

impl std::str::FromStr for SplitK {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(SplitK::Auto),
            "off" => Ok(SplitK::Off),
            n => match n.parse::<usize>() {
                Ok(n) if n >= 2 => Ok(SplitK::Slices(n)),
                _ => Err(format!(
                    "--split-k {s}: auto, off or a number of slices ≥ 2"
                )),
            },
        }
    }
}

impl SplitK {
    /// The slices `p` is split into, if it is.
    pub fn slices(self, p: &Problem) -> Option<usize> {
        match self {
            SplitK::Off => None,
            SplitK::Auto if p.skinny() => {
                // The largest power of two that divides k and leaves slices of at least 512.
                let mut s = 1;
                while p.k.is_multiple_of(2 * s) && p.k / (2 * s) >= 512 {
                    s *= 2;
                }
                (s >= 2).then_some(s)
            }
            SplitK::Auto => None,
            SplitK::Slices(s) => {
                (p.group == Group::Adapter && p.n <= 256 && p.k.is_multiple_of(s) && p.k >= s)
                    .then_some(s)
            }
        }
    }
}

/// What `bench matmul` measures.
pub struct MatmulBench<'a> {
    /// The architecture file (an HF `config.json`).
    pub architecture: &'a Path,
    /// Backend name.
    pub backend: &'a str,
    /// The frozen weights' dtype.
    pub dtype: WeightDType,
    /// The adapters' matmul dtype.
    pub adapter_compute: DType,
    /// LoRA rank.
    pub rank: usize,
    /// Examples per step.
    pub batch: usize,
    /// Tokens per example.
    pub seq: usize,
    /// Label tokens per example.
    pub labels: usize,
    /// Untimed calls first (the first compiles and autotunes).
    pub warmup: usize,
    /// Timed calls per problem.
    pub iters: usize,
    /// The split-`k` form of skinny products.
    pub split_k: SplitK,
    /// Only the problems whose name contains one of these (all when empty).
    pub only: &'a [String],
    /// Peak TFLOP/s (else a known GPU's).
    pub peak_tflops: Option<f64>,
    /// torch on the same problems: Python, the script and torch's device (`cuda`, `cpu`).
    pub peer: Option<(String, PathBuf, String)>,
}

/// One form of one problem, measured.
struct Timed {
    /// Device seconds per call (the launches' busy time), where the backend times launches.
    device_s: Option<f64>,
    /// Whether the device stamped the windows.
    device_clock: bool,
    /// Host seconds per call, sync to sync.
    wall_s: f64,
    /// Launches per call, by kernel.
    launches: Vec<(String, f64)>,
    /// Kernels compiled while warming up.
    compiled: u64,
    /// Autotune decisions made while warming up.
    autotuned: u64,
    /// Seconds the warm-up took (compiling, autotuning, the first calls).
    warmup_s: f64,
}

impl Timed {
    /// Seconds per call: the device's where it was measured, else the host's.
    fn seconds(&self) -> f64 {
        self.device_s.unwrap_or(self.wall_s)
    }
}

/// A random tensor of `shape` in `dtype` on `device` (values in ±1, so products stay finite in
/// half precision).
fn random<const D: usize>(shape: [usize; D], dtype: DType, device: &Device) -> Tensor<D> {
    Tensor::random(shape, Distribution::Uniform(-1.0, 1.0), (device, dtype))
}

/// The operands as stored, `lhs` and `rhs` (transposed where the problem reads them so).
fn operands(p: &Problem, device: &Device) -> (Tensor<3>, Tensor<3>) {
    let (b, m, n, k) = (p.batch, p.m, p.n, p.k);
    let lhs = random(if p.lhs_t { [b, k, m] } else { [b, m, k] }, p.dtype, device);
    let rhs = random(if p.rhs_t { [b, n, k] } else { [b, k, n] }, p.dtype, device);
    (lhs, rhs)
}

/// The plain product of the stored operands, `[b, m, n]`.
fn plain(p: &Problem, lhs: &Tensor<3>, rhs: &Tensor<3>) -> Tensor<3> {
    let l = if p.lhs_t {
        lhs.clone().swap_dims(1, 2)
    } else {
        lhs.clone()
    };
    let r = if p.rhs_t {
        rhs.clone().swap_dims(1, 2)
    } else {
        rhs.clone()
    };
    l.matmul(r)
}

/// The product split along `k` into `s` slices: one batched product of the slices (views of
/// the stored operands, no copy) and a sum over them, `[b, m, n]`.
fn split(p: &Problem, s: usize, lhs: &Tensor<3>, rhs: &Tensor<3>) -> Tensor<3> {
    let (b, m, n, k) = (p.batch, p.m, p.n, p.k);
    let ks = k / s;
    let l: Tensor<4> = if p.lhs_t {
        lhs.clone().reshape([b, s, ks, m]).swap_dims(2, 3)
    } else {
        lhs.clone().reshape([b, m, s, ks]).swap_dims(1, 2)
    };
    let r: Tensor<4> = if p.rhs_t {
        rhs.clone().reshape([b, n, s, ks]).permute([0, 2, 3, 1])
    } else {
        rhs.clone().reshape([b, s, ks, n])
    };
    l.matmul(r).sum_dim(1).reshape([b, m, n])
}

/// Times `f` on `device`: `warmup` calls, then `iters` untimed calls (wall time), then `iters`
/// calls with each launch timed on the device.
fn measure(device: &Device, warmup: usize, iters: usize, f: &dyn Fn() -> Tensor<3>) -> Timed {
    let before = kernel_cache::activity();
    let t0 = Instant::now();
    let warm: Vec<Tensor<3>> = (0..warmup.max(1)).map(|_| f()).collect();
    let _ = device.sync();
    drop(warm);
    let warmup_s = t0.elapsed().as_secs_f64();
    let after = kernel_cache::activity().since(&before);
    // Results are kept until the sync, so that no queued product is skipped as unused.
    let mut outs = Vec::with_capacity(iters);
    let t0 = Instant::now();
    for _ in 0..iters {
        outs.push(f());
    }
    let _ = device.sync();
    let wall_s = t0.elapsed().as_secs_f64() / iters as f64;
    outs.clear();
    let counter = LaunchCounter::start_timed(device);
    for _ in 0..iters {
        outs.push(f());
    }
    let _ = device.sync();
    drop(outs);
    let (device_s, device_clock, launches) = match counter {
        Some(c) => {
            let times = c.kernel_times();
            let secs = times
                .busy_seconds()
                .unwrap_or_else(|| times.kernel_seconds());
            let launches = c
                .by_kernel()
                .into_iter()
                .map(|(k, n)| (k, n as f64 / iters as f64))
                .collect();
            (Some(secs / iters as f64), times.device_clock, launches)
        }
        None => (None, false, Vec::new()),
    };
    Timed {
        device_s,
        device_clock,
        wall_s,
        launches,
        compiled: after.compiled,
        autotuned: after.autotuned,
        warmup_s,
    }
}

/// The largest absolute difference between `a` and `b`, relative to `a`'s largest magnitude.
fn relative_difference(a: Tensor<3>, b: Tensor<3>) -> f64 {
    let a = a.cast(DType::F32);
    let b = b.cast(DType::F32);
    let scale = a.clone().abs().max().into_scalar::<f32>() as f64;
    let diff = (a - b).abs().max().into_scalar::<f32>() as f64;
    diff / scale.max(f64::MIN_POSITIVE)
}

/// A dtype's name in tables and JSON.
fn dtype_name(d: DType) -> String {
    format!("{d:?}").to_lowercase()
}

/// The weight dtype whose peak applies to products in `d`.
fn peak_dtype(d: DType) -> WeightDType {
    match d {
        DType::F32 => WeightDType::F32,
        DType::F16 => WeightDType::F16,
        _ => WeightDType::BF16,
    }
}

/// Times every distinct product of the step; hands the table to `out` and returns the figures
/// as JSON.
pub fn matmul(spec: &MatmulBench, out: Out) -> Result<Value> {
    if spec.iters == 0 {
        bail!("--iters must be at least 1");
    }
    if spec.rank == 0 {
        bail!("--rank must be at least 1");
    }
    if spec.labels == 0 || spec.labels >= spec.seq {
        bail!(
            "--label-len must be between 1 and --seq-len − 1 (got {} of {})",
            spec.labels,
            spec.seq
        );
    }
    let cfg: LlamaConfig = architecture(spec.architecture)?;
    let device = engram_model::open_device(spec.backend)?;
    let name = device_label(&device, spec.backend);
    let shape = StepShape {
        rank: spec.rank,
        batch: spec.batch,
        seq: spec.seq,
        labels: spec.labels,
        weights: spec.dtype.dtype(),
        adapters: spec.adapter_compute,
        joined: !engram_model::is_cpu(&device),
    };
    let mut problems = step_problems(&cfg, &shape);
    problems.extend(joined_alternatives(&cfg, &shape));
    if !spec.only.is_empty() {
        problems.retain(|p| spec.only.iter().any(|o| p.name().contains(o.as_str())));
        if problems.is_empty() {
            bail!(
                "--only {}: no product of the step is named so (names: `fwd q/k/v`, `lora A q,k,v,gate,up`, `dx lm_head`, …)",
                spec.only.join(",")
            );
        }
    }
    say!(
        out,
        "engram bench matmul: the matmuls of one LoRA training step of {} at rank {} (batch {} × {} tokens, {} labels; weights {}, adapters {}) on {} ({name}), {} timed calls each after {} warm-up",
        spec.architecture.display(),
        spec.rank,
        spec.batch,
        spec.seq,
        spec.labels,
        dtype_name(shape.weights),
        dtype_name(shape.adapters),
        spec.backend,
        spec.iters,
        spec.warmup
    );
    say!(
        out,
        "{:<32} {:>6} {:>6} {:>6} {:>5} {:>3} {:>5} {:>9} {:>9} {:>8} {:>7} {:>8} {:>8} {:>8}",
        "product",
        "m",
        "n",
        "k",
        "dtype",
        "lay",
        "/step",
        "device µs",
        "wall µs",
        "TFLOP/s",
        "% peak",
        "ms/step",
        "launches",
        "warm-up s"
    );
    let (alternatives, problems): (Vec<Problem>, Vec<Problem>) =
        problems.into_iter().partition(|p| !p.instead_of.is_empty());
    let mut rows = Vec::new();
    // Each step product's plain form, seconds per call.
    let mut plain_s = Vec::new();
    let mut best_s = 0.0;
    for p in &problems {
        let (row, secs) = run_problem(p, spec, &device, &name, out);
        best_s += secs.iter().copied().fold(f64::INFINITY, f64::min) * p.per_step as f64;
        plain_s.push(secs[0]);
        rows.push(row);
    }
    let total_s: f64 = problems
        .iter()
        .zip(&plain_s)
        .map(|(p, s)| s * p.per_step as f64)
        .sum();
    let by_group = group_totals(&problems, &plain_s);
    say!(
        out,
        "one step's matmuls: {:.2} ms ({}){}",
        1e3 * total_s,
        by_group
            .iter()
            .map(|(g, ms)| format!("{g} {ms:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        if best_s < total_s * 0.999 {
            format!("; {:.2} ms with the faster form of each", 1e3 * best_s)
        } else {
            String::new()
        }
    );
    // What the joined adapter products would save: each against the separate ones it replaces.
    let mut joined_rows = Vec::new();
    let mut saved_s = Some(0.0);
    if !alternatives.is_empty() {
        say!(
            out,
            "instead of the adapters' separate products (not in the step's total above):"
        );
    }
    for p in &alternatives {
        let (mut row, secs) = run_problem(p, spec, &device, &name, out);
        let replaced: Option<f64> = p
            .instead_of
            .iter()
            .map(|&(kind, module)| {
                problems
                    .iter()
                    .zip(&plain_s)
                    .find(|(q, _)| q.kind == kind && q.modules.iter().any(|m| m == module))
                    .map(|(_, s)| *s)
            })
            .sum();
        row["instead_of"] = json!(
            p.instead_of
                .iter()
                .map(|(k, m)| format!("{k} {m}"))
                .collect::<Vec<_>>()
        );
        row["replaced_ms_per_step"] = json!(replaced.map(|s| 1e3 * s * p.per_step as f64));
        saved_s = saved_s
            .zip(replaced)
            .map(|(acc, r)| acc + (r - secs[0]) * p.per_step as f64);
        joined_rows.push(row);
    }
    if let (Some(saved), false) = (saved_s, alternatives.is_empty()) {
        say!(
            out,
            "with q/k/v's and gate/up's adapters joined: {:.2} ms of matmuls a step ({:.2} ms {})",
            1e3 * (total_s - saved),
            1e3 * saved.abs(),
            if saved >= 0.0 { "less" } else { "more" }
        );
    }
    let activity = kernel_cache::state().map(|_| kernel_cache::summary());
    let mut v = json!({
        "bench": "matmul", "architecture": spec.architecture.display().to_string(),
        "backend": spec.backend, "device": name, "rank": spec.rank, "batch": spec.batch,
        "seq_len": spec.seq, "label_len": spec.labels, "dtype": dtype_name(shape.weights),
        "adapter_compute": dtype_name(shape.adapters), "joined": shape.joined,
        "iters": spec.iters, "warmup": spec.warmup, "peak_tflops": spec.peak_tflops,
        "step_matmul_ms": 1e3 * total_s, "step_matmul_ms_best_forms": 1e3 * best_s,
        "by_group_ms": by_group.iter().map(|(g, ms)| (g.to_string(), json!(ms))).collect::<serde_json::Map<_, _>>(),
        "problems": rows, "joined_adapter_products": joined_rows,
        "step_matmul_ms_joined_adapters": saved_s.filter(|_| !alternatives.is_empty()).map(|s| 1e3 * (total_s - s)),
        "kernels": activity,
    });
    if let Some((python, script, peer_device)) = &spec.peer {
        match torch_peer(python, script, peer_device, &v, spec) {
            Ok(peer) => {
                compare(&v, &peer, out);
                v["torch"] = peer;
            }
            Err(e) => {
                say!(out, "torch: {e:#}");
                v["torch"] = json!({"error": format!("{e:#}")});
            }
        }
    }
    Ok(v)
}

/// Measures `p` in each of its forms (plain, and split along `k` where `spec` asks), hands a
/// table row per form to `out`, and returns the problem's JSON and each form's seconds per call.
fn run_problem(
    p: &Problem,
    spec: &MatmulBench,
    device: &Device,
    name: &str,
    out: Out,
) -> (Value, Vec<f64>) {
    let (lhs, rhs) = operands(p, device);
    let peak = spec
        .peak_tflops
        .or_else(|| known_peak_tflops(name, peak_dtype(p.dtype)));
    let mut forms: Vec<(String, Timed, Option<f64>)> = Vec::new();
    let t = measure(device, spec.warmup, spec.iters, &|| plain(p, &lhs, &rhs));
    forms.push(("plain".into(), t, None));
    if let Some(s) = spec.split_k.slices(p) {
        let t = measure(device, spec.warmup, spec.iters, &|| split(p, s, &lhs, &rhs));
        let diff = relative_difference(plain(p, &lhs, &rhs), split(p, s, &lhs, &rhs));
        forms.push((format!("split-k {s}"), t, Some(diff)));
    }
    let plain_s = forms[0].1.seconds();
    let mut form_json = Vec::new();
    for (form, t, diff) in &forms {
        let secs = t.seconds();
        let tflops = p.flops() / secs / 1e12;
        let launches: f64 = t.launches.iter().map(|(_, n)| n).sum();
        let label = if form == "plain" {
            p.name()
        } else {
            format!("  {form} ({:.2}× plain)", plain_s / secs)
        };
        say!(
            out,
            "{:<32} {:>6} {:>6} {:>6} {:>5} {:>3} {:>5} {:>9} {:>9.1} {:>8.2} {:>7} {:>8.3} {:>8} {:>8.1}",
            truncate(&label, 32),
            p.m,
            p.n,
            p.k,
            dtype_name(p.dtype),
            p.layout(),
            p.per_step,
            t.device_s.map_or("-".into(), |s| format!("{:.1}", 1e6 * s)),
            1e6 * t.wall_s,
            tflops,
            peak.map_or("-".into(), |pk| format!("{:.1}", 100.0 * tflops / pk)),
            1e3 * secs * p.per_step as f64,
            if t.launches.is_empty() {
                "-".into()
            } else {
                format!("{launches:.0}")
            },
            t.warmup_s
        );
        form_json.push(json!({
            "form": form, "seconds": secs, "device_us": t.device_s.map(|s| 1e6 * s),
            "device_clock": t.device_clock, "wall_us": 1e6 * t.wall_s, "tflops": tflops,
            "peak_fraction": peak.map(|pk| tflops / pk),
            "ms_per_step": 1e3 * secs * p.per_step as f64,
            "launches": t.launches.iter().map(|(k, n)| json!({"kernel": k, "per_call": n})).collect::<Vec<_>>(),
            "kernels_compiled": t.compiled, "autotune_decisions": t.autotuned,
            "warmup_s": t.warmup_s,
            "relative_difference_from_plain": diff,
        }));
    }
    drop((lhs, rhs));
    device.memory_cleanup();
    let row = json!({
        "name": p.name(), "kind": p.kind, "modules": p.modules, "group": p.group.name(),
        "batch": p.batch, "m": p.m, "n": p.n, "k": p.k, "dtype": dtype_name(p.dtype),
        "lhs_transposed": p.lhs_t, "rhs_transposed": p.rhs_t, "layout": p.layout(),
        "per_step": p.per_step, "flops": p.flops(), "forms": form_json,
    });
    (row, forms.iter().map(|f| f.1.seconds()).collect())
}

/// `s` cut to `n` characters.
fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// Each group's milliseconds per step from each problem's plain seconds per call, in the
/// groups' first order.
fn group_totals(problems: &[Problem], plain_s: &[f64]) -> Vec<(&'static str, f64)> {
    let mut totals: Vec<(&'static str, f64)> = Vec::new();
    for (p, s) in problems.iter().zip(plain_s) {
        let ms = 1e3 * s * p.per_step as f64;
        match totals.iter_mut().find(|(g, _)| *g == p.group.name()) {
            Some((_, t)) => *t += ms,
            None => totals.push((p.group.name(), ms)),
        }
    }
    totals
}

/// torch's times for the same problems (`tests/peers/torch_matmul_bench.py`), run as a child.
fn torch_peer(
    python: &str,
    script: &Path,
    device: &str,
    ours: &Value,
    spec: &MatmulBench,
) -> Result<Value> {
    let dir = tempfile::tempdir()?;
    let problems = dir.path().join("problems.json");
    let result = dir.path().join("torch.json");
    std::fs::write(&problems, serde_json::to_string(ours)?)?;
    let run = Command::new(python)
        .arg(script)
        .arg(&problems)
        .arg("--json")
        .arg(&result)
        .args(["--device", device])
        .args(["--iters", &spec.iters.to_string()])
        .args(["--warmup", &spec.warmup.max(1).to_string()])
        .output()
        .with_context(|| format!("running {python} {}", script.display()))?;
    if !run.status.success() {
        let err = String::from_utf8_lossy(&run.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty());
        bail!(
            "{python} {} exited with {}: {}",
            script.display(),
            run.status,
            last.unwrap_or("")
        );
    }
    let text = std::fs::read_to_string(&result).with_context(|| result.display().to_string())?;
    serde_json::from_str(&text).with_context(|| result.display().to_string())
}

/// torch's time beside engram's for each product, and the step's totals.
fn compare(ours: &Value, torch: &Value, out: Out) {
    say!(
        out,
        "beside torch {} on {} (the same shapes, dtypes and layouts; f32 {}):",
        torch["torch"].as_str().unwrap_or("?"),
        torch["device"].as_str().unwrap_or("?"),
        if torch["tf32"].as_bool() == Some(true) {
            "on TF32 tensor cores, as engram's"
        } else {
            "in f32"
        }
    );
    say!(
        out,
        "{:<32} {:>10} {:>10} {:>8}",
        "product",
        "engram µs",
        "torch µs",
        "× torch"
    );
    let (ours_ms, theirs_ms) = compare_rows(&ours["problems"], &torch["problems"], out);
    say!(
        out,
        "one step's matmuls: engram {ours_ms:.2} ms, torch {theirs_ms:.2} ms ({:.2}× torch's speed)",
        theirs_ms / ours_ms
    );
    let joined = &ours["joined_adapter_products"];
    if joined.as_array().is_some_and(|j| !j.is_empty()) {
        let (ours_j, theirs_j) = compare_rows(joined, &torch["joined_adapter_products"], out);
        say!(
            out,
            "the joined adapter products alone: engram {ours_j:.2} ms a step, torch {theirs_j:.2} ms ({:.2}× torch's speed)",
            theirs_j / ours_j
        );
    }
}

/// A row per product of `ours` beside the same product of `theirs`; returns both sides'
/// milliseconds per step.
fn compare_rows(ours: &Value, theirs: &Value, out: Out) -> (f64, f64) {
    let empty = Vec::new();
    let (mut ours_ms, mut theirs_ms) = (0.0, 0.0);
    for (row, t) in ours
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .zip(theirs.as_array().unwrap_or(&empty))
    {
        let engram_us = 1e6 * row["forms"][0]["seconds"].as_f64().unwrap_or(f64::NAN);
        let torch_us = t["us"].as_f64().unwrap_or(f64::NAN);
        let per_step = row["per_step"].as_f64().unwrap_or(0.0);
        ours_ms += engram_us * per_step / 1e3;
        theirs_ms += torch_us * per_step / 1e3;
        say!(
            out,
            "{:<32} {:>10.1} {:>10.1} {:>8.2}",
            truncate(row["name"].as_str().unwrap_or("?"), 32),
            engram_us,
            torch_us,
            torch_us / engram_us
        );
    }
    (ours_ms, theirs_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama_8b() -> LlamaConfig {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../configs/models/llama-3.1-8b-instruct.config.json");
        architecture(&path).expect("the 8B architecture")
    }

    fn shape(joined: bool) -> StepShape {
        StepShape {
            rank: 8,
            batch: 8,
            seq: 64,
            labels: 16,
            weights: DType::BF16,
            adapters: DType::F32,
            joined,
        }
    }

    #[test]
    fn the_8b_steps_products_add_up_to_bench_trains_flops() {
        let cfg = llama_8b();
        for joined in [true, false] {
            let problems = step_problems(&cfg, &shape(joined));
            let flops: f64 = problems.iter().map(|p| p.flops() * p.per_step as f64).sum();
            let adapter =
                engram_experiments::lora_parameters(&cfg, 8, &engram_model::LoraTarget::ALL, None)
                    as f64;
            // bench train's count, written apart from the products: the same work.
            let expected = crate::random::train_step_flops(&cfg, adapter, 8, 64, 16);
            assert!(
                (flops / expected - 1.0).abs() < 1e-12,
                "{flops} vs {expected}"
            );
        }
        // 32 layers × (4 base forward + 4 base input gradients + 6 attention + 7 × 6 adapter
        // products) + the head's two (an H200 counted 1,790 matmul launches a step, on an older
        // tree).
        let launches: usize = step_problems(&cfg, &shape(true))
            .iter()
            .map(|p| p.per_step)
            .sum();
        assert_eq!(launches, 32 * (4 + 4 + 6 + 42) + 2);
    }

    #[test]
    fn separate_projections_merge_identical_products() {
        let problems = step_problems(&llama_8b(), &shape(false));
        let kv = problems
            .iter()
            .find(|p| p.kind == "fwd" && p.modules.contains(&"k".to_string()))
            .expect("k's forward");
        assert_eq!(kv.modules, ["k", "v"]);
        assert_eq!((kv.m, kv.n, kv.k, kv.per_step), (512, 1024, 4096, 64));
        let a = problems
            .iter()
            .find(|p| p.kind == "lora A" && p.k == 4096)
            .expect("A forward from the hidden size");
        // o's input is the heads' width, 32 × 128 = the hidden size: the same product.
        assert_eq!(a.modules, ["q", "k", "v", "o", "gate", "up"]);
        assert_eq!((a.m, a.n, a.dtype), (512, 8, DType::F32));
    }

    #[test]
    fn split_k_takes_the_skinny_products() {
        let problems = step_problems(&llama_8b(), &shape(true));
        let split: Vec<(String, usize)> = problems
            .iter()
            .filter_map(|p| SplitK::Auto.slices(p).map(|s| (p.name(), s)))
            .collect();
        // The adapters' x · A over the hidden (and the intermediate) size, and dP · Bᵀ over
        // the wide outputs; k/v's dP · Bᵀ (k = 1,024) is not long enough to split.
        let expected = [
            ("lora A q,k,v,o,gate,up", 8),
            ("lora A down", 16),
            ("lora dH q,o,down", 8),
            ("lora dH gate,up", 16),
        ];
        assert_eq!(split, expected.map(|(n, s)| (n.to_string(), s)));
        assert_eq!(SplitK::Off.slices(&problems[0]), None);
        assert!("1".parse::<SplitK>().is_err());
    }

    #[test]
    fn joined_adapter_products_do_the_work_of_those_they_replace() {
        let cfg = llama_8b();
        let problems = step_problems(&cfg, &shape(true));
        let joined = joined_alternatives(&cfg, &shape(true));
        assert_eq!(joined.len(), 12);
        for j in &joined {
            // Each replaced product is one of the step's, run once a layer.
            let replaced: f64 = j
                .instead_of
                .iter()
                .map(|&(kind, module)| {
                    let p = problems
                        .iter()
                        .find(|p| p.kind == kind && p.modules.iter().any(|m| m == module))
                        .unwrap_or_else(|| panic!("{kind} {module} in the step"));
                    p.flops()
                })
                .sum();
            // Side by side: the same work; block-diagonal: each part's rows against every
            // part's columns, so the parts' count times it.
            let parts = j.instead_of.len() as f64;
            let factor = if j.kind.starts_with("block-diagonal") {
                parts
            } else {
                1.0
            };
            assert_eq!(j.flops(), factor * replaced, "{}", j.name());
            assert_eq!(j.per_step, cfg.num_hidden_layers);
        }
        let a = &joined[0];
        assert_eq!(
            (a.name().as_str(), a.m, a.n, a.k),
            ("joined lora A q/k/v", 512, 24, 4096)
        );
        // Not on the CPU, whose q, k and v do not share a joined base.
        assert!(joined_alternatives(&cfg, &shape(false)).is_empty());
    }
}
