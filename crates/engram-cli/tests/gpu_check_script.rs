//! `scripts/gpu-check.sh`'s CUDA path, which CI's CPU run never takes: run with a stand-in for
//! the bundle's binary that records each call (its arguments and the compiler, kernel cache,
//! autotune level, TF32 and compile-ahead settings it was given), the steps come in the documented
//! order (the first selftest compiling ahead, the rest on the device's thread where it crashed), each
//! `bench matmul` gets a kernel cache of its own, the other compilers and autotune levels get
//! theirs, and the rest runs on the first compiler's cache. A broken branch here would cost a
//! device call to find.

use std::path::Path;
use std::process::Command;

/// A stand-in `engram`: appends one line per call to `$FAKE_LOG` and writes a passing report
/// where `--json` asks for one.
const FAKE: &str = r#"#!/usr/bin/env bash
echo "$* | compiler=${CUBECL_CUDA_COMPILER:-} cache=${ENGRAM_KERNEL_CACHE:-} level=${CUBECL_AUTOTUNE_LEVEL:-} tf32=${ENGRAM_TF32:-} threads=${CUBECL_COMPILE_THREADS:-} ahead=${ENGRAM_CUDA_COMPILE_AHEAD:-} wgpu_compiler=${CUBECL_WGPU_COMPILER:-}" >> "$FAKE_LOG"
# A CUDA selftest that crashes while compiling ahead, where the test asks for one.
if [ -n "${FAKE_AHEAD_CRASHES:-}" ] && [ "$1 $3" = "selftest cuda" ] && [ "${ENGRAM_CUDA_COMPILE_AHEAD:-}" = on ]; then
    echo "compiling GPU kernels: 41, 12 s"; exit 139
fi
# A driver that refuses SPIR-V, where the test asks for one.
if [ -n "${FAKE_SPIRV_FAILS:-}" ] && [ "$1 $3" = "selftest wgpu" ] && [ "${CUBECL_WGPU_COMPILER:-}" != wgsl ]; then
    echo "error: the device refused the compute pipeline of kernel \`matmul\`"; exit 1
fi
json="" prev=""
for a in "$@"; do [ "$prev" = "--json" ] && json="$a"; prev="$a"; done
if [ -n "$json" ]; then
    if [ "$1" = selftest ]; then echo '{"passed": true}' > "$json"; else echo '{}' > "$json"; fi
fi
# A training run leaves its adapter where --out says.
out="" prev=""
for a in "$@"; do [ "$prev" = "--out" ] && out="$a"; prev="$a"; done
if [ "$1" = train ] && [ -n "$out" ]; then
    mkdir -p "$out" && : > "$out/adapter_model.safetensors"
fi
echo "GPU kernels: 3 compiled in 0.1 s, 0 loaded from the cache, 1 autotune decisions"
"#;

/// One run of the script with the stand-in: whether it passed, its output, its steps (name,
/// status) and the stand-in's calls.
struct Run {
    passed: bool,
    stdout: String,
    steps: Vec<(String, String)>,
    /// Each step's `kernels_compiled` (`None` for a skipped one).
    kernels: Vec<Option<u64>>,
    calls: String,
    /// The commit the report says the binary was built from.
    commit: String,
}

impl Run {
    /// The stand-in's call that starts with `starts` and has `has` in it.
    fn call(&self, starts: &str, has: &str) -> String {
        self.calls
            .lines()
            .find(|l| l.starts_with(starts) && l.contains(has))
            .unwrap_or_else(|| panic!("no call {starts} … {has} in\n{}", self.calls))
            .to_string()
    }

    fn names(&self) -> Vec<&str> {
        self.steps.iter().map(|s| s.0.as_str()).collect()
    }
}

/// `scripts/gpu-check.sh ARGS` with the stand-in as its engram and `env` set.
fn run_script(args: &[&str], env: &[(&str, &str)]) -> Run {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("engram");
    std::fs::write(&fake, FAKE).unwrap();
    // As build-cuda.sh writes it beside the bundle's launcher.
    std::fs::write(
        dir.path().join("BUILD-INFO"),
        "commit=0123abc\ndirty=true\nbuilt=2026-12-06T00:00:00Z\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let log = dir.path().join("calls.log");
    let out = dir.path().join("out");
    let run = Command::new("bash")
        .arg(repo.join("scripts/gpu-check.sh"))
        .arg("--engram")
        .arg(&fake)
        .args(args)
        .arg("--out")
        .arg(&out)
        .env("FAKE_LOG", &log)
        .envs(env.iter().copied())
        .current_dir(&repo)
        .output()
        .unwrap();
    let stdout = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("gpu-check.json")).unwrap_or_else(|e| panic!("{e}: {stdout}")),
    )
    .unwrap();
    let steps = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    let kernels = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kernels_compiled"].as_u64())
        .collect();
    Run {
        passed: run.status.success(),
        stdout,
        steps,
        kernels,
        calls: std::fs::read_to_string(&log).unwrap(),
        commit: report["engram_commit"].as_str().unwrap().to_string(),
    }
}

/// The kernel cache a call was given.
fn cache(line: &str) -> String {
    line.split("cache=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn gpu_check_runs_the_cuda_steps_in_order_each_on_its_own_cache() {
    let run = run_script(
        &[
            "--backend",
            "cuda",
            "--compilers",
            "llvm,nvrtc",
            "--autotune-levels",
            "minimal",
            "--ranks",
            "8,256",
            "--no-wgpu",
        ],
        &[],
    );
    let stdout = &run.stdout;
    assert!(run.passed, "{stdout}");
    assert_eq!(
        run.commit, "0123abc-dirty",
        "the bundle's BUILD-INFO, in the report"
    );
    let steps = &run.steps;
    let names = run.names();
    assert_eq!(
        names,
        [
            "selftest cuda llvm cold ahead",
            "selftest cuda llvm warm",
            "bench train r 8",
            "bench train r 8 warm",
            "bench train r 8 graph",
            "memorization cuda",
            "memorization cpu",
            "memorization cuda graph",
            "memorization cpu graph",
            "selftest cuda llvm cold serial",
            "bench matmul llvm",
            "bench matmul nvrtc",
            "bench matmul llvm autotune minimal",
            "bench matmul llvm r 256",
            "bench train r 256",
            "bench train r 8 bf16-lora",
            "bench generate",
            "selftest cuda TF32 off",
            "memorization exact match",
        ],
        "{stdout}"
    );
    // NVRTC is run where the machine has it and skipped, named, where it has not.
    let nvrtc = steps[11].1.as_str();
    assert!(nvrtc == "ok" || nvrtc == "skipped", "{steps:?}");
    let calls = &run.calls;
    let call = |starts: &str, has: &str| run.call(starts, has);
    // The first selftest compiles ahead; it and the training benches share the first
    // compiler's cache.
    let selftest = call("selftest --backend cuda", "compiler=llvm");
    assert!(selftest.contains("ahead=on"), "{selftest}");
    let train = call("bench train", "--ranks 8 ");
    assert!(cache(&selftest).ends_with("/llvm"), "{selftest}");
    assert_eq!(cache(&train), cache(&selftest), "{train}");
    // Each matmul bench has its own.
    let matmul = call("bench matmul", "--rank 8 ");
    assert!(cache(&matmul).ends_with("/matmul-llvm"), "{matmul}");
    let minimal = call("bench matmul", "level=minimal");
    assert!(
        cache(&minimal).ends_with("/matmul-llvm-autotune-minimal"),
        "{minimal}"
    );
    let r256 = call("bench matmul", "--rank 256");
    assert!(r256.contains("--only lora"), "{r256}");
    assert!(cache(&r256).ends_with("/matmul-llvm-r-256"), "{r256}");
    if nvrtc == "ok" {
        let line = call("bench matmul", "compiler=nvrtc");
        assert!(cache(&line).ends_with("/matmul-nvrtc"), "{line}");
    }
    // The captured step: the warm cache, at the first rank.
    let graph = call("bench train", "--graph");
    assert!(graph.contains("--ranks 8 "), "{graph}");
    assert_eq!(cache(&graph), cache(&selftest), "{graph}");
    // f32 matmuls kept in f32 for that selftest only.
    assert!(call("selftest", "tf32=off").contains("compiler=llvm"));
    assert_eq!(calls.matches("tf32=off").count(), 1, "{calls}");
    // The first selftest ran to its report, so everything after it compiles ahead too…
    assert!(train.contains("ahead=on"), "{train}");
    assert!(graph.contains("ahead=on"), "{graph}");
    // …but the comparison: cold, on the device's thread, on a cache of its own.
    let serial = call("selftest --backend cuda", "ahead=off");
    assert!(cache(&serial).ends_with("/llvm-serial"), "{serial}");
    assert_eq!(calls.matches("ahead=off").count(), 1, "{calls}");
}

#[test]
fn gpu_check_compiles_on_the_devices_thread_after_a_selftest_that_crashed_compiling_ahead() {
    let run = run_script(
        &["--backend", "cuda", "--ranks", "8", "--no-wgpu"],
        &[("FAKE_AHEAD_CRASHES", "1")],
    );
    let stdout = &run.stdout;
    // The crash is a failed step, so the run fails; everything after it still runs.
    assert!(!run.passed, "{stdout}");
    let steps = &run.steps;
    assert_eq!(
        steps[0],
        ("selftest cuda llvm cold ahead".into(), "failed".into()),
        "{stdout}"
    );
    let names = run.names();
    assert_eq!(
        names[1..6],
        [
            "selftest cuda llvm cold",
            "selftest cuda llvm warm",
            "bench train r 8",
            "bench train r 8 warm",
            "bench train r 8 graph",
        ],
        "{stdout}"
    );
    // No comparison to make: the run never compiled ahead after the crash.
    assert!(
        !names.contains(&"selftest cuda llvm cold serial"),
        "{names:?}"
    );
    let calls = &run.calls;
    let crashed = run.call("selftest --backend cuda", "ahead=on");
    assert!(cache(&crashed).ends_with("/llvm"), "{crashed}");
    // The rest: on the device's thread, on a cache the crash did not touch.
    let cold = run.call("selftest --backend cuda", "ahead=off");
    assert!(cache(&cold).ends_with("/llvm-serial"), "{cold}");
    let train = run.call("bench train", "--ranks 8 ");
    assert!(train.contains("ahead=off"), "{train}");
    assert_eq!(cache(&train), cache(&cold), "{train}");
    assert_eq!(calls.matches("ahead=on").count(), 1, "{calls}");
    // The crashed step counts the kernels its last progress line named (it printed no summary).
    assert_eq!(run.kernels[0], Some(41), "{stdout}");
}

/// A stand-in Python for the PEFT side: records each call and writes `{}` where `--json` asks.
const FAKE_PYTHON: &str = r#"#!/usr/bin/env bash
echo "python $*" >> "$FAKE_LOG"
json="" prev=""
for a in "$@"; do [ "$prev" = "--json" ] && json="$a"; prev="$a"; done
[ -z "$json" ] || echo '{}' > "$json"
"#;

#[test]
fn gpu_check_names_a_peft_side_that_lacks_the_adapter_checks_files() {
    let dir = tempfile::tempdir().unwrap();
    let python = dir.path().join("python");
    std::fs::write(&python, FAKE_PYTHON).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let peers = dir.path().join("peers");
    std::fs::create_dir_all(&peers).unwrap();
    for f in ["peft_random_bench.py", "peft_check_adapter.py"] {
        std::fs::write(peers.join(f), "").unwrap();
    }
    let script = peers.join("peft_random_bench.py");
    let args = [
        "--backend",
        "cuda",
        "--ranks",
        "8",
        "--no-wgpu",
        "--deadline",
        "600",
        "--peft-python",
        python.to_str().unwrap(),
        "--peft-script",
        script.to_str().unwrap(),
    ];
    // Without peer_common.py beside it the adapter check cannot import: skipped, and named.
    let run = run_script(&args, &[]);
    let step = run
        .steps
        .iter()
        .find(|s| s.0 == "peft loads the cuda adapter")
        .unwrap_or_else(|| panic!("{:?}\n{}", run.steps, run.stdout));
    assert_eq!(step.1, "skipped", "{}", run.stdout);
    assert!(run.stdout.contains("peer_common.py"), "{}", run.stdout);
    assert!(
        !run.calls.contains("peft_check_adapter.py"),
        "{}",
        run.calls
    );
    // With it, PEFT loads the adapter the cuda run wrote.
    std::fs::write(peers.join("peer_common.py"), "").unwrap();
    let run = run_script(&args, &[]);
    let call = run.call("python", "peft_check_adapter.py");
    assert!(call.contains("/memorize-cuda"), "{call}");
    assert!(
        run.steps
            .iter()
            .any(|s| s.0 == "peft loads the cuda adapter" && s.1 == "ok"),
        "{:?}",
        run.steps
    );
}

#[test]
fn gpu_check_runs_wgpu_twice_on_one_cache_then_serially_and_wgsl_where_spirv_is_refused() {
    let cpu = [
        "--backend",
        "cpu",
        "--arch",
        "tests/fixtures/tiny-f32/config.json",
        "--dtype",
        "f32",
        "--ranks",
        "4",
        "--wgpu",
    ];
    let wgpu_steps = |run: &Run| -> Vec<(String, String)> {
        run.steps
            .iter()
            .filter(|s| s.0.starts_with("selftest wgpu"))
            .cloned()
            .collect()
    };
    let step = |name: &str, status: &str| (name.to_string(), status.to_string());

    // SPIR-V taken: a cold and a warm selftest on one cache, then a cold one compiling on the
    // device's thread on a cache of its own; no WGSL.
    let run = run_script(&cpu, &[]);
    assert!(run.passed, "{}", run.stdout);
    assert_eq!(
        wgpu_steps(&run),
        [
            step("selftest wgpu", "ok"),
            step("selftest wgpu warm", "ok"),
            step("selftest wgpu serial", "ok")
        ]
    );
    let calls: Vec<&str> = run
        .calls
        .lines()
        .filter(|l| l.starts_with("selftest --backend wgpu"))
        .collect();
    assert_eq!(calls.len(), 3, "{}", run.calls);
    assert_eq!(cache(calls[0]), cache(calls[1]));
    assert!(cache(calls[2]).ends_with("/wgpu-serial"), "{}", calls[2]);
    assert!(
        calls[..2].iter().all(|c| c.contains(" threads= ")),
        "the default pool: {calls:?}"
    );
    assert!(calls[2].contains(" threads=0 "), "{}", calls[2]);
    assert!(
        calls.iter().all(|c| c.ends_with("wgpu_compiler=")),
        "{calls:?}"
    );

    // SPIR-V refused: the run is marked failed, and the selftest runs again on WGSL, on a cache
    // of its own, instead of the warm run.
    let run = run_script(&cpu, &[("FAKE_SPIRV_FAILS", "1")]);
    assert!(!run.passed, "{}", run.stdout);
    assert_eq!(
        wgpu_steps(&run),
        [
            step("selftest wgpu", "failed"),
            step("selftest wgpu wgsl", "ok")
        ]
    );
    let wgsl = run.call("selftest --backend wgpu", "wgpu_compiler=wgsl");
    assert!(cache(&wgsl).ends_with("/wgpu-wgsl"), "{wgsl}");
    let spirv = run
        .calls
        .lines()
        .find(|l| l.starts_with("selftest --backend wgpu") && l.ends_with("wgpu_compiler="))
        .unwrap();
    assert_ne!(cache(spirv), cache(&wgsl));
}

/// `scripts/gpu-carry.sh` in a scratch repository of its own: a 3 MiB tree, a 5 MiB bundle.
fn carry(repo: &Path, args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(repo.join("scripts/gpu-carry.sh"))
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap()
}

#[test]
fn gpu_carry_splits_the_bundle_so_that_every_call_fits() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gpu-carry.sh");
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    std::fs::create_dir_all(repo.join("scripts")).unwrap();
    std::fs::create_dir_all(repo.join("dist")).unwrap();
    std::fs::copy(&source, repo.join("scripts/gpu-carry.sh")).unwrap();
    let mib = 1usize << 20;
    // Bytes that no two parts share, so a part out of place shows.
    let noise = |n: usize, seed: u64| -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect()
    };
    std::fs::write(repo.join("fixture.bin"), noise(3 * mib - 4096, 1)).unwrap();
    std::fs::write(repo.join(".gitignore"), "/dist/\n").unwrap();
    let bundle = noise(5 * mib, 2);
    std::fs::write(
        repo.join("dist/engram-cuda-0.1.0-x86_64-linux.tar.xz"),
        &bundle,
    )
    .unwrap();
    let extra = repo.join("dist/libvulkan1.deb");
    std::fs::write(&extra, noise(mib / 4, 3)).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(repo)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);

    // Roomy: one call.
    let out = carry(repo, &[]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("one call: carry dist/engram-cuda"), "{said}");

    // 6 MiB a call: the bundle travels in parts, the extra with the last.
    let out = carry(repo, &["--limit-mib", "6", "dist/libvulkan1.deb"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut parts: Vec<_> = std::fs::read_dir(repo.join(".carry"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("bundle.part-")
        })
        .collect();
    parts.sort();
    assert!(parts.len() >= 2, "{said}");
    let tree =
        3 * mib - 4096 + "/dist/\n".len() + std::fs::metadata(&source).unwrap().len() as usize;
    let joined: Vec<u8> = parts
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(joined == bundle, "the parts join into the bundle");
    for (i, p) in parts.iter().enumerate() {
        let mut size = tree + std::fs::metadata(p).unwrap().len() as usize;
        if i == parts.len() - 1 {
            size += mib / 4;
        }
        assert!(
            size <= 6 * mib,
            "call {} would carry {size} bytes: {said}",
            i + 1
        );
    }
    assert_eq!(said.matches("  call ").count(), parts.len(), "{said}");
    let exclude = std::fs::read_to_string(repo.join(".git/info/exclude")).unwrap();
    assert!(exclude.lines().any(|l| l == "/.carry/"), "{exclude}");
    // The last call unpacks the joined parts and runs the check, with no PEFT side (no peers
    // folder beside this scratch repository).
    assert!(
        said.contains("| tar -C /tmp -xJf - && scripts/gpu-check.sh --engram /tmp/engram-cuda-0.1.0-x86_64-linux/engram --compilers llvm,nvrtc --out $OUT"),
        "{said}"
    );

    // The PEFT scripts are copied where the last call carries them, all three (the adapter check
    // imports peer_common.py), and the check is told where they are.
    let peers = repo.join("peers");
    std::fs::create_dir_all(&peers).unwrap();
    for f in ["peft_random_bench.py", "peft_check_adapter.py"] {
        std::fs::write(peers.join(f), f).unwrap();
    }
    let out = carry(repo, &["--peers", "peers"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a missing peer_common.py is named"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no peers/peer_common.py"), "{err}");
    std::fs::write(peers.join("peer_common.py"), "common").unwrap();
    let out = carry(
        repo,
        &["--peers", "peers", "--vulkan-deb", "dist/libvulkan1.deb"],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "peft_random_bench.py",
        "peft_check_adapter.py",
        "peer_common.py",
    ] {
        assert_eq!(
            std::fs::read(repo.join(".carry/peers").join(f)).unwrap(),
            std::fs::read(peers.join(f)).unwrap()
        );
    }
    assert!(
        said.contains("one call: carry dist/engram-cuda-0.1.0-x86_64-linux.tar.xz .carry/peers dist/libvulkan1.deb"),
        "{said}"
    );
    assert!(
        said.contains("--peft-python python3 --peft-script .carry/peers/peft_random_bench.py --vulkan-deb dist/libvulkan1.deb --compilers llvm,nvrtc --out $OUT"),
        "{said}"
    );
    let out = carry(repo, &["--peers", "peers", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));

    // A tree too big for any part: named, exit status 2.
    let out = carry(repo, &["--limit-mib", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing of the bundle fits"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
