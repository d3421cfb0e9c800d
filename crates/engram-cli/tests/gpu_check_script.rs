//! `scripts/gpu-check.sh`'s CUDA path, which CI's CPU run never takes: run with a stand-in for
//! the bundle's binary that records each call (its arguments and the compiler, kernel cache,
//! autotune level and TF32 setting it was given), the steps come in the documented order, each
//! `bench matmul` gets a kernel cache of its own, the other compilers and autotune levels get
//! theirs, and the rest runs on the first compiler's cache. A broken branch here would cost a
//! device call to find.

use std::path::Path;
use std::process::Command;

/// A stand-in `engram`: appends one line per call to `$FAKE_LOG` and writes a passing report
/// where `--json` asks for one.
const FAKE: &str = r#"#!/usr/bin/env bash
echo "$* | compiler=${CUBECL_CUDA_COMPILER:-} cache=${ENGRAM_KERNEL_CACHE:-} level=${CUBECL_AUTOTUNE_LEVEL:-} tf32=${ENGRAM_TF32:-}" >> "$FAKE_LOG"
json="" prev=""
for a in "$@"; do [ "$prev" = "--json" ] && json="$a"; prev="$a"; done
if [ -n "$json" ]; then
    if [ "$1" = selftest ]; then echo '{"passed": true}' > "$json"; else echo '{}' > "$json"; fi
fi
echo "GPU kernels: 3 compiled in 0.1 s, 0 loaded from the cache, 1 autotune decisions"
"#;

#[test]
fn gpu_check_runs_the_cuda_steps_in_order_each_on_its_own_cache() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("engram");
    std::fs::write(&fake, FAKE).unwrap();
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
        .args(["--backend", "cuda", "--compilers", "llvm,nvrtc"])
        .args([
            "--autotune-levels",
            "minimal",
            "--ranks",
            "8,256",
            "--no-wgpu",
        ])
        .arg("--out")
        .arg(&out)
        .env("FAKE_LOG", &log)
        .current_dir(&repo)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("gpu-check.json")).unwrap()).unwrap();
    let steps: Vec<(&str, &str)> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                s["status"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| s.0).collect();
    assert_eq!(
        names,
        [
            "selftest cuda llvm cold",
            "selftest cuda llvm warm",
            "bench matmul llvm",
            "bench train r 8",
            "bench train r 8 warm",
            "bench train r 8 graph",
            "memorization cuda",
            "memorization cpu",
            "memorization cuda graph",
            "memorization cpu graph",
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
    let nvrtc = steps[10].1;
    assert!(nvrtc == "ok" || nvrtc == "skipped", "{steps:?}");
    let calls = std::fs::read_to_string(&log).unwrap();
    let call = |starts: &str, has: &str| -> String {
        calls
            .lines()
            .find(|l| l.starts_with(starts) && l.contains(has))
            .unwrap_or_else(|| panic!("no call {starts} … {has} in\n{calls}"))
            .to_string()
    };
    let cache = |line: &str| {
        line.split("cache=")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .to_string()
    };
    // The selftest and the training benches share the first compiler's cache.
    let selftest = call("selftest --backend cuda", "compiler=llvm");
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
    // f32 matmuls kept in f32 for the last selftest only.
    assert!(call("selftest", "tf32=off").contains("compiler=llvm"));
    assert_eq!(calls.matches("tf32=off").count(), 1, "{calls}");
}
