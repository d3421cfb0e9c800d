//! `engram selftest` and the random-weight benchmarks (`bench train`, `bench matmul`) as a user
//! runs them: the CPU and (with the
//! `wgpu` feature, on llvmpipe without a GPU) the wgpu backend pass against transformers'
//! references, the CPU's LoRA step and its AdamW steps, and RoPE and attention in half precision
//! against the Burn ops; bad fixtures and unknown backends are named.

use std::path::Path;
use std::process::Command;

fn repo() -> std::path::PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"))
        .join("../..")
}

fn engram() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_engram"));
    c.current_dir(repo());
    c
}

/// Runs `engram selftest --backend B` and returns its JSON report.
fn selftest(backend: &str) -> serde_json::Value {
    selftest_with(backend, engram())
}

/// [`selftest`] with the command `engram` (its environment set).
fn selftest_with(backend: &str, mut engram: Command) -> serde_json::Value {
    let json = tempfile::NamedTempFile::new().unwrap();
    let out = engram
        .args(["selftest", "--backend", backend, "--json"])
        .arg(json.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "selftest on {backend} failed");
    // The GPU backends also check a captured step against the eager one.
    let checks = if backend == "cpu" { 6 } else { 7 };
    assert!(
        stdout.contains(&format!("{checks} of {checks} checks passed")),
        "{stdout}"
    );
    serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap()
}

/// `bench train` on the tiny fixture's architecture with random weights, 2 × 24-token examples
/// (6 labels).
const TINY_TRAIN: &[&str] = &[
    "train",
    "--architecture",
    "tests/fixtures/tiny-f32/config.json",
    "--random-weights",
    "--batch",
    "2",
    "--seq-len",
    "24",
    "--label-len",
    "6",
];

/// Runs `engram bench ARGS --json FILE`, asserts that it succeeds, and returns the JSON.
fn bench_json(args: &[&str]) -> serde_json::Value {
    let json = tempfile::NamedTempFile::new().unwrap();
    let out = engram()
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(json.path())
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap()
}

/// Runs `engram ARGS`, asserts that it fails, and returns what it printed.
fn failing(args: &[&str]) -> String {
    let out = engram().args(args).output().unwrap();
    assert!(!out.status.success(), "engram {args:?} succeeded");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn value(report: &serde_json::Value, check: &str) -> f64 {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == check)
        .unwrap_or_else(|| panic!("no check {check}"))["value"]
        .as_f64()
        .unwrap()
}

#[test]
fn selftest_passes_on_the_cpu_and_names_bad_input() {
    let r = selftest("cpu");
    assert_eq!(r["passed"], true);
    assert!(value(&r, "logits tiny-f32") <= 1e-4);
    assert_eq!(value(&r, "LoRA step vs CPU"), 0.0);
    assert_eq!(value(&r, "AdamW steps vs CPU"), 0.0);
    // The CPU backend's half-precision path against the composed ops (the kernels' own bf16
    // code runs only on CUDA; f16's on llvmpipe below).
    assert!(value(&r, "RoPE+attention+SwiGLU bf16") <= 3e-2);

    let said = failing(&["selftest", "--fixtures", "/nonexistent/fixtures"]);
    assert!(said.contains("/nonexistent/fixtures/tiny-f32"), "{said}");
    if !cfg!(feature = "cuda") {
        let said = failing(&["selftest", "--backend", "cuda"]);
        assert!(said.contains("without the `cuda` feature"), "{said}");
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn selftest_passes_on_wgpu() {
    // A kernel cache of its own: the first run autotunes (and so compiles every candidate it
    // benchmarks), the second, identical process reads the decisions from the cache and, on a
    // Vulkan adapter with the `vulkan` feature (SPIR-V), the compiled kernels too: it compiles
    // none. With WGSL (a build without the feature) the driver compiles the kernels it runs in
    // every process.
    let cache = tempfile::tempdir().unwrap();
    let with_cache = || {
        let mut c = engram();
        c.env("ENGRAM_KERNEL_CACHE", cache.path());
        c
    };
    let cold = selftest_with("wgpu", with_cache());
    let count = |r: &serde_json::Value, k: &str| r["kernels"][k].as_u64().unwrap();
    assert!(count(&cold, "kernels_compiled") > 0, "{}", cold["kernels"]);
    assert!(
        count(&cold, "autotune_decisions") > 0,
        "{}",
        cold["kernels"]
    );
    // Each check says what it compiled: every check compiles on a cold cache, and their sum is
    // nearly the process's count (the rest: opening the device, ~10 kernels on llvmpipe).
    let per_check = |r: &serde_json::Value, k: &str| -> Vec<u64> {
        let checks = r["checks"].as_array().unwrap();
        checks.iter().map(|c| c[k].as_u64().unwrap()).collect()
    };
    let compiled = per_check(&cold, "kernels_compiled");
    eprintln!("wgpu selftest, kernels compiled per check cold: {compiled:?}");
    assert!(compiled.iter().all(|&k| k > 0), "{compiled:?}");
    let sum: u64 = compiled.iter().sum();
    let total = count(&cold, "kernels_compiled");
    assert!(sum <= total && sum * 10 >= total * 9, "{sum} of {total}");
    // Where the compile time went (the patched CubeCL's phases): one line for each kernel
    // compiled, the phases inside CubeCL's own timing of the same compiles (which also counts
    // the cache lookup), the kernel types' counts adding up, SPIR-V named on llvmpipe.
    let phases = &cold["kernels"]["phases"];
    let secs = |v: &serde_json::Value| v.as_f64().unwrap();
    assert_eq!(phases["kernels"].as_u64(), Some(total), "{phases}");
    let by_type: Vec<&serde_json::Value> = phases["by_kernel"].as_array().unwrap().iter().collect();
    let typed: u64 = by_type
        .iter()
        .map(|k| k["compiled"].as_u64().unwrap())
        .sum();
    assert_eq!(typed, total, "{phases}");
    let parts = ["expand_s", "compile_s", "driver_s"].map(|p| secs(&phases[p]));
    assert!(parts.iter().all(|&p| p > 0.0), "{phases}");
    let (sum_s, recorded_s) = (
        parts.iter().sum::<f64>(),
        secs(&cold["kernels"]["compile_seconds"]),
    );
    assert!(
        sum_s <= recorded_s * 1.001 && sum_s >= recorded_s * 0.5,
        "{phases} vs {recorded_s}"
    );
    let by_type_s: f64 = by_type.iter().map(|k| secs(&k["seconds"])).sum();
    assert!(
        (by_type_s - sum_s).abs() <= 1e-6 * sum_s.max(1.0),
        "{phases}"
    );
    eprintln!(
        "wgpu selftest, compile phases cold: {}",
        serde_json::to_string(&parts).unwrap()
    );
    let r = selftest_with("wgpu", with_cache());
    assert!(r["kernels"].get("phases").is_none() || count(&r, "kernels_compiled") > 0);
    assert_eq!(count(&r, "autotune_decisions"), 0, "{}", r["kernels"]);
    assert!(per_check(&r, "autotune_decisions").iter().all(|&t| t == 0));
    let device = cold["device"].as_str().unwrap();
    if cfg!(feature = "vulkan") && device.contains("llvmpipe") {
        assert!(device.ends_with(", spirv"), "{device}");
        assert_eq!(phases["compiler"], "SPIR-V", "{phases}");
    }
    if device.ends_with(", spirv") {
        assert_eq!(count(&r, "kernels_compiled"), 0, "{}", r["kernels"]);
        assert!(per_check(&r, "kernels_compiled").iter().all(|&k| k == 0));
    } else {
        assert!(count(&r, "kernels_compiled") < count(&cold, "kernels_compiled"));
    }
    eprintln!(
        "wgpu selftest: {} kernels compiled and {} autotune decisions cold, {} and 0 warm; {} s → {} s",
        count(&cold, "kernels_compiled"),
        count(&cold, "autotune_decisions"),
        count(&r, "kernels_compiled"),
        cold["seconds"],
        r["seconds"]
    );
    for check in ["logits tiny-f32", "logits tiny-bf16-tied"] {
        assert!(value(&r, check) <= 1e-4, "{check}");
    }
    let step = value(&r, "LoRA step vs CPU");
    eprintln!("wgpu LoRA step: max |Δgrad| / max |grad| = {step:.2e}");
    assert!(step <= 1e-4);
    let update = value(&r, "AdamW steps vs CPU");
    eprintln!("wgpu AdamW steps: max |Δfactor| = {update:.2e} of lr × steps");
    assert!(update <= 1e-5);
    // A captured step's replays against the same steps run eagerly: bit for bit.
    assert_eq!(value(&r, "captured step vs eager"), 0.0);
    // The kernels' f16 code against the composed ops on llvmpipe.
    let half = value(&r, "RoPE+attention+SwiGLU f16");
    eprintln!("wgpu RoPE+attention+SwiGLU f16: {half:.2e} of max");
    assert!(half <= 3e-2);
}

/// `bench train` on wgpu counts one more step's launches by phase and times each on the device
/// (llvmpipe stamps Vulkan timestamp queries): per phase the timed launches are the launches
/// counted, in the same order, their by-kernel times add up to the phase's kernel time, and the
/// device was busy no longer than the phase's wall time. With `--graph` the rank's step is also
/// captured (CubeCL's software graph on wgpu) and replayed beside the same step run eagerly:
/// their losses agree bit for bit.
#[cfg(feature = "wgpu")]
#[test]
fn bench_train_on_wgpu_times_one_steps_kernels_by_phase() {
    let v = bench_json(
        &[
            TINY_TRAIN,
            &[
                "--backend",
                "wgpu",
                "--ranks",
                "4",
                "--steps",
                "2",
                "--warmup-steps",
                "1",
                "--graph",
            ],
        ]
        .concat(),
    );
    let row = &v["rows"][0];
    let captured = &row["captured"];
    assert_eq!(captured["graph"], true, "{row}");
    assert_eq!(captured["steps_compared"], 3, "{row}");
    assert_eq!(captured["max_loss_diff"].as_f64(), Some(0.0), "{row}");
    for k in [
        "replay_step_ms",
        "eager_step_ms",
        "replay_tokens_per_s",
        "reserved_bytes_eager",
        "reserved_bytes_replaying",
    ] {
        assert!(captured[k].as_f64().unwrap() > 0.0, "{k}: {row}");
    }
    let phases = row["kernel_launches_by_phase"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["forward", "backward", "clip", "adamw"]);
    let mut busy_sum = 0.0;
    for p in phases {
        let f = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{k} in {p}"));
        let launches = p["launches"].as_u64().unwrap();
        assert_eq!(p["device_clock"], true, "{p}");
        assert_eq!(p["untimed_launches"], 0, "{p}");
        assert_eq!(p["timed_sequence"], p["sequence"], "{p}");
        assert_eq!(p["launch_us"].as_array().unwrap().len() as u64, launches);
        let by_time: f64 = p["by_time"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["ms"].as_f64().unwrap())
            .sum();
        assert!(
            (by_time - f("kernel_ms")).abs() <= 1e-6 * f("kernel_ms"),
            "{p}"
        );
        let (busy, span, wall) = (f("device_busy_ms"), f("device_span_ms"), f("wall_ms"));
        assert!(busy > 0.0 && busy <= span + 1e-6 && span <= wall, "{p}");
        busy_sum += busy;
    }
    let per_step = row["device_busy_ms_per_step"].as_f64().unwrap();
    assert!((per_step - busy_sum).abs() < 1e-6, "{row}");

    // WGSL has no bf16: bf16 weights and bf16 adapter products are named errors (the latter
    // used to panic in CubeCL's device thread and time a step of nothing).
    let wgpu_f16 = [
        TINY_TRAIN,
        &["--backend", "wgpu", "--ranks", "4", "--steps", "1"],
    ]
    .concat();
    let out = failing(&[&["bench"], &wgpu_f16[..], &["--adapter-compute", "bf16"]].concat());
    assert!(
        out.contains("cannot run the adapters' matmuls in bf16 (adapter_compute"),
        "{out}"
    );
    assert!(!out.contains("panicked"), "{out}");
    let out = failing(&[&["bench"], &wgpu_f16[..], &["--dtype", "bf16"]].concat());
    assert!(out.contains("does not support bf16 weights"), "{out}");
    // engram train refuses it before loading the checkpoint (which it prints once loaded).
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = failing(&[
        "train",
        "--model",
        "tests/fixtures/tiny-f32",
        "--facts",
        "tests/fixtures/facts/synthetic-20.jsonl",
        "--backend",
        "wgpu",
        "--adapter-compute",
        "bf16",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.contains("rank 64 on tests/fixtures/tiny-f32: the device ")
            && out.contains("cannot run the adapters' matmuls in bf16"),
        "{out}"
    );
    assert!(!out.contains("loaded tests/fixtures/tiny-f32"), "{out}");
}

/// A device that fails running a `bench train` step fails that rank, not the bench: the rank's
/// row says why (the step and the device's message), the next rank is still measured, the JSON
/// is written, and the command exits 1 naming each failed rank — no panic printed, engram's or
/// CubeCL's device thread's. Here
/// a 300,000-token vocabulary fails every rank: its weights fit llvmpipe's 128 MiB buffers, the
/// logits of a step's 8 × 16 label tokens (146 MiB) do not.
#[cfg(feature = "wgpu")]
#[test]
fn bench_train_names_a_device_failure_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg: serde_json::Value = serde_json::from_slice(
        &std::fs::read(repo().join("tests/fixtures/tiny-f32/config.json")).unwrap(),
    )
    .unwrap();
    cfg["vocab_size"] = 300_000.into();
    let path = dir.path().join("config.json");
    std::fs::write(&path, cfg.to_string()).unwrap();
    let json = dir.path().join("bench.json");
    let out = engram()
        // (with RUST_BACKTRACE set, CubeCL's device threads print their panics as before)
        .env_remove("RUST_BACKTRACE")
        .args(["bench", "train", "--architecture"])
        .arg(&path)
        .args(["--random-weights", "--backend", "wgpu", "--ranks", "4,8"])
        .args(["--batch", "8", "--seq-len", "24", "--label-len", "16"])
        .args(["--steps", "1", "--warmup-steps", "1", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: rank 4: the device failed running step 1: ")
            && err.contains("; rank 8: the device failed running step 1: ")
            && err.contains("can't allocate buffer of size: ")
            && err.contains("larger than this device allocates at all"),
        "{err}"
    );
    // No panic text, engram's or CubeCL's device thread's (whose panic engram's error names).
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        stdout.contains("    4  failed: the device failed"),
        "{stdout}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v:#}");
    for (row, rank) in rows.iter().zip([4, 8]) {
        assert_eq!(row["rank"], rank);
        assert!(
            row["failed"]
                .as_str()
                .unwrap()
                .contains("can't allocate buffer of size"),
            "{row}"
        );
    }
}

#[test]
fn random_weight_benchmarks_run_any_architecture() {
    let v = bench_json(
        &[
            TINY_TRAIN,
            &["--ranks", "4,16", "--steps", "3", "--peak-tflops", "1"],
        ]
        .concat(),
    );
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert!(r["tokens_per_s"].as_f64().unwrap() > 0.0, "{r}");
        let mfu = r["mfu"].as_f64().unwrap();
        assert!(mfu > 0.0 && mfu < 1.0, "{r}");
    }
    assert!(rows[1]["adapter_params"].as_u64() > rows[0]["adapter_params"].as_u64());

    let v = bench_json(&[
        "generate",
        "--architecture",
        "tests/fixtures/tiny-f32/config.json",
        "--random-weights",
        "--batch",
        "1,4",
        "--new-tokens",
        "4",
        "--prompt-len",
        "16",
    ]);
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
    assert!(v["rows"][1]["decode_tokens_per_s"].as_f64().unwrap() > 0.0);

    // --architecture needs --random-weights.
    failing(&[
        "bench",
        "train",
        "--architecture",
        "tests/fixtures/tiny-f32/config.json",
    ]);
}

/// `bench matmul` on the tiny fixture's architecture in f32, two timed calls a product.
const TINY_MATMUL: &[&str] = &[
    "matmul",
    "--architecture",
    "tests/fixtures/tiny-f32/config.json",
    "--dtype",
    "f32",
    "--iters",
    "2",
    "--warmup",
    "1",
];

/// `v[key]` as a number.
fn num(v: &serde_json::Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// The kernels one call of a `bench matmul` form launched.
fn form_kernels(form: &serde_json::Value) -> Vec<&str> {
    form["launches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["kernel"].as_str().unwrap())
        .collect()
}

/// Every product of the tiny step timed on the CPU, one row per distinct product, adding up to
/// the step's total; an unreachable peer is named in the figures, which keep engram's own.
#[test]
fn bench_matmul_on_the_cpu_times_every_product_of_the_step() {
    let cpu = ["--backend", "cpu", "--peer-python", "/nonexistent/python3"];
    let v = bench_json(&[TINY_MATMUL, &cpu].concat());
    let problems = v["problems"].as_array().unwrap();
    // The CPU runs q, k, v (gate, up) as separate products; identical ones are one row.
    assert_eq!(v["joined"], false);
    let names: std::collections::HashSet<&str> = problems
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), problems.len(), "one row per distinct product");
    for name in [
        "fwd k,v",
        "fwd gate,up",
        "lora dH k,v",
        "dx lm_head",
        "scores q·kᵀ,dO·vᵀ",
    ] {
        assert!(names.contains(name), "{name} in {names:?}");
    }
    // 2 layers × (7 base forward + 7 base input gradients + 6 attention + 7 × 6 adapter
    // products) + the head's two.
    let per_step: f64 = problems.iter().map(|p| num(p, "per_step")).sum();
    assert_eq!(per_step, 2.0 * (7.0 + 7.0 + 6.0 + 42.0) + 2.0);
    let mut ms = 0.0;
    for p in problems {
        let plain = &p["forms"][0];
        assert_eq!(plain["form"], "plain", "{p}");
        assert!(
            num(plain, "wall_us") > 0.0 && num(plain, "tflops") > 0.0,
            "{p}"
        );
        assert!(
            plain["device_us"].is_null(),
            "the CPU launches no kernels: {p}"
        );
        ms += num(plain, "ms_per_step");
    }
    assert!((ms - num(&v, "step_matmul_ms")).abs() < 1e-9 * ms, "{v}");
    let err = v["torch"]["error"].as_str().unwrap();
    assert!(err.contains("running /nonexistent/python3"), "{err}");
}

/// On wgpu (llvmpipe) each product's launches are timed on the device, q/k/v are one joined
/// product as the model runs them, and the split-`k` form computes the plain product's values.
#[cfg(feature = "wgpu")]
#[test]
fn bench_matmul_on_wgpu_times_each_launch_and_splits_skinny_products() {
    let wgpu = [
        "--backend",
        "wgpu",
        "--split-k",
        "2",
        "--only",
        "lora A,dx q/k/v",
    ];
    let v = bench_json(&[TINY_MATMUL, &wgpu].concat());
    assert_eq!(v["joined"], true);
    let problems = v["problems"].as_array().unwrap();
    let names: Vec<&str> = problems
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lora A q,k,v,o,gate,up", "lora A down", "dx q/k/v"]);
    for p in problems {
        let plain = &p["forms"][0];
        assert_eq!(plain["device_clock"], true, "{p}");
        assert!(num(plain, "device_us") > 0.0, "{p}");
        assert_eq!(form_kernels(plain), ["MatmulEntry"], "{p}");
        let forms = p["forms"].as_array().unwrap();
        if p["name"].as_str().unwrap().starts_with("lora A") {
            // One batched product over k's two halves and their sum: the plain product's
            // values to f32 rounding.
            let split = &forms[1];
            assert_eq!(split["form"], "split-k 2", "{p}");
            assert!(num(split, "relative_difference_from_plain") < 1e-5, "{p}");
            let kernels = form_kernels(split);
            assert!(kernels.contains(&"MatmulEntry"), "{p}");
            assert!(kernels.iter().any(|k| k.starts_with("Reduce")), "{p}");
        } else {
            // Not an adapter product: no split form.
            assert_eq!(forms.len(), 1, "{p}");
        }
    }
    // The joined adapter products that match the selection, each beside what it replaces:
    // known for x · [A_q A_k A_v], not for the joined dx (the separate ones were not timed).
    let joined = v["joined_adapter_products"].as_array().unwrap();
    let names: Vec<&str> = joined.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "joined lora A q/k/v",
            "joined lora dx q/k/v",
            "joined lora A gate/up"
        ]
    );
    assert_eq!(joined[0]["n"], 24, "3 × rank 8 columns");
    assert_eq!(
        joined[0]["instead_of"],
        serde_json::json!(["lora A q", "lora A k", "lora A v"])
    );
    assert!(num(&joined[0], "replaced_ms_per_step") > 0.0);
    assert!(joined[1]["replaced_ms_per_step"].is_null());
    assert!(v["step_matmul_ms_joined_adapters"].is_null());
}

/// An unknown product, a split into fewer than two slices and a missing architecture are named.
#[test]
fn bench_matmul_names_bad_arguments() {
    let bench = |extra: &[&str]| failing(&[&["bench"], TINY_MATMUL, extra].concat());
    let out = bench(&["--only", "nothing-such"]);
    assert!(out.contains("--only nothing-such: no product"), "{out}");
    let out = bench(&["--split-k", "1"]);
    assert!(out.contains("auto, off or a number of slices"), "{out}");
    let out = failing(&["bench", "matmul", "--architecture", "no/such/config.json"]);
    assert!(out.contains("no/such/config.json"), "{out}");
}
