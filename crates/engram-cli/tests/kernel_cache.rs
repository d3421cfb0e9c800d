//! The GPU kernel cache as a user meets it, on wgpu (Mesa's llvmpipe without a GPU, which
//! compiles kernels as a GPU driver does): processes that share a cache directory at once both
//! finish, the next identical process makes no autotune decision and compiles no kernel (SPIR-V,
//! like CUDA's PTX, is kept; in a build without the `vulkan` feature the driver compiles the WGSL
//! kernels it runs in every process, so it compiles fewer), and a cache directory that cannot be
//! written or a database that is not one costs a warning, never the run.

#![cfg(feature = "wgpu")]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::engram;

/// `engram generate` on the tiny fixture on wgpu, with the kernel cache in `cache`.
fn generate(cache: &Path) -> Command {
    generate_on(cache, "wgpu")
}

/// `engram generate` on the tiny fixture on `backend`, with the kernel cache in `cache`.
fn generate_on(cache: &Path, backend: &str) -> Command {
    let mut c = engram();
    c.current_dir(engram_testkit::repo())
        .env("ENGRAM_KERNEL_CACHE", cache)
        .args([
            "generate",
            "--model",
            "tests/fixtures/tiny-f32",
            "-p",
            "hello",
            "--max-new-tokens",
            "3",
            "--backend",
            backend,
        ]);
    c
}

/// The kernels compiled and autotune decisions made, as the run's summary line says; asserts
/// that it succeeded.
fn counts(out: &Output) -> (u64, u64) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("GPU kernels: "))
        .unwrap_or_else(|| panic!("no summary line in: {err}"));
    let number_before = |word: &str| -> u64 {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words
            .iter()
            .position(|w| w.starts_with(word))
            .unwrap_or_else(|| panic!("no `{word}` in {line}"));
        words[at - 1]
            .parse()
            .unwrap_or_else(|_| panic!("no count before `{word}` in {line}"))
    };
    (number_before("compiled"), number_before("autotune"))
}

#[test]
fn kernels_are_compiled_once_by_processes_that_share_a_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("kernels");
    // Two processes at once on an empty cache: both compile, both finish.
    let a = generate(&cache).spawn_output();
    let b = generate(&cache).output().unwrap();
    let a = a.wait_with_output().unwrap();
    let ((ca, ta), (cb, tb)) = (counts(&a), counts(&b));
    assert!(ca > 0 && cb > 0, "cold runs compiled {ca} and {cb}");
    assert!(ta > 0 && tb > 0, "cold runs autotuned {ta} and {tb}");
    let said = String::from_utf8_lossy(&b.stderr);
    assert!(
        said.contains(&format!("(cache {}", cache.display())),
        "{said}"
    );
    assert!(
        said.contains(" s (CubeCL ") && said.contains(", driver "),
        "{said}"
    );
    // The next identical process autotunes nothing and, with SPIR-V (the `vulkan` feature, on
    // Linux's Vulkan adapters), loads every kernel it runs from the cache; on WGSL the kernels it
    // runs are compiled again, so it compiles fewer.
    let warm = generate(&cache).output().unwrap();
    let (cw, tw) = counts(&warm);
    assert_eq!(tw, 0, "{}", String::from_utf8_lossy(&warm.stderr));
    if cfg!(all(feature = "vulkan", target_os = "linux")) {
        assert_eq!(cw, 0, "{}", String::from_utf8_lossy(&warm.stderr));
    } else {
        assert!(cw < ca.min(cb), "warm {cw} vs cold {ca}, {cb}");
    }
    assert_eq!(
        a.stdout, warm.stdout,
        "the cached decisions compute the same tokens"
    );

    // A database file that is not one: moved aside with a warning, the run compiles anew.
    let db = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "db"))
        .expect("the cache's database");
    std::fs::write(&db, b"not a database: cut short by a full disk").unwrap();
    let out = generate(&cache).output().unwrap();
    assert!(counts(&out).1 > 0, "the decisions were made anew");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("was not a database"), "{said}");
    assert_eq!(said.matches("was not a database").count(), 1, "{said}");
    assert_eq!(out.stdout, warm.stdout);
    assert_eq!(counts(&generate(&cache).output().unwrap()).1, 0);

    // A cache that cannot be created: one warning, the run goes on without it. (Run with
    // CubeCL's own debug log on, whose compile lines carry each kernel's source: the count
    // reads those too.)
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let debug_log = dir.path().join("cubecl.log");
    let out = generate(&file.join("kernels"))
        .env("CUBECL_DEBUG_LOG", &debug_log)
        .output()
        .unwrap();
    let compiled = counts(&out).0;
    let logged = std::fs::read_to_string(&debug_log).unwrap();
    assert!(compiled > 0, "{logged:.2000}");
    assert_eq!(
        compiled as usize,
        logged.matches("[START_KERNEL_COMPILATION]").count()
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(said.matches("cannot be created").count(), 1, "{said}");
    assert!(said.contains("no kernel cache"), "{said}");
    assert_eq!(out.stdout, warm.stdout);
}

/// `CUBECL_COMPILE_THREADS=2` (engram's patched cubecl-runtime and cubecl-wgpu): the candidates
/// of each new autotune key are compiled ahead on two threads of their own before any is
/// benchmarked. The run tunes the same keys as one that compiles every kernel on the device's
/// thread (`0`), computes the same tokens, says how many kernels it compiled ahead, and leaves a
/// cache on which the next process compiles nothing. A count that is not one is named before the
/// device opens.
///
/// Both runs measure every candidate of a key's first batch (CubeCL's adaptive scheduler and
/// its short circuit off): by default which candidates are measured depends on their times, and
/// with them which keys nested in a candidate (burn's fused-reduce fallback runs the tuned
/// reduce) are tuned at all, so two runs of either kind can tune different numbers of keys (CI
/// saw 30 against 32).
#[test]
fn autotune_candidates_compile_ahead_on_threads_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let run = |threads: &str, cache: &str| {
        generate(&dir.path().join(cache))
            .env("CUBECL_COMPILE_THREADS", threads)
            .env("CUBECL_AUTOTUNE_BENCH_ADAPTIVE", "0")
            .env("CUBECL_AUTOTUNE_SHORT_CIRCUIT", "0")
            .output()
            .unwrap()
    };
    let said = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let serial = run("0", "serial");
    let ahead = run("2", "ahead");
    let ((cs, ts), (ca, ta)) = (counts(&serial), counts(&ahead));
    assert!(cs > 0 && ts > 0, "{}", said(&serial));
    assert_eq!(ta, ts, "the same keys tuned: {}", said(&ahead));
    assert!(
        !said(&serial).contains("compiled ahead"),
        "{}",
        said(&serial)
    );
    let line = said(&ahead)
        .lines()
        .find(|l| l.starts_with("GPU kernels: "))
        .unwrap()
        .to_owned();
    let words: Vec<&str> = line.split([' ', ';', '(']).collect();
    let at = words
        .windows(2)
        .position(|w| w == ["compiled", "ahead"])
        .unwrap_or_else(|| panic!("nothing compiled ahead: {line}"));
    let compiled_ahead: u64 = words[at - 1].parse().unwrap();
    assert!(compiled_ahead > 0 && compiled_ahead <= ca, "{line}");
    assert!(line.contains("compiled ahead on 2 threads"), "{line}");
    assert_eq!(serial.stdout, ahead.stdout, "the same tokens");

    let warm = run("2", "ahead");
    let (cw, tw) = counts(&warm);
    assert_eq!(tw, 0, "{}", said(&warm));
    if cfg!(all(feature = "vulkan", target_os = "linux")) {
        assert_eq!(
            cw,
            0,
            "the kernels compiled ahead were stored: {}",
            said(&warm)
        );
    }
    assert_eq!(warm.stdout, ahead.stdout);

    let bad = run("many", "bad");
    assert!(!bad.status.success());
    assert!(
        said(&bad).contains("CUBECL_COMPILE_THREADS=many"),
        "{}",
        said(&bad)
    );
}

/// `CUBECL_WGPU_COMPILER=wgsl` asks a `vulkan` build for WGSL on a Vulkan adapter, with no
/// rebuild: WGSL is compiled again in every process, so a second process on the same cache
/// compiles kernels where SPIR-V's compiles none (the test above), its autotune decisions are
/// kept in a database of their own, and the tokens are the CPU's. A value that names neither
/// compiler is an error that names it.
#[cfg(all(feature = "vulkan", target_os = "linux"))]
#[test]
fn a_vulkan_build_runs_wgsl_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("kernels");

    let bad = generate(&cache)
        .env("CUBECL_WGPU_COMPILER", "glsl")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        said.contains("CUBECL_WGPU_COMPILER=glsl: use spirv or wgsl"),
        "{said}"
    );

    let wgsl = || {
        generate(&cache)
            .env("CUBECL_WGPU_COMPILER", "wgsl")
            .output()
            .unwrap()
    };
    let cold = wgsl();
    let (cc, tc) = counts(&cold);
    assert!(cc > 0 && tc > 0, "cold: {cc} compiled, {tc} autotuned");
    // The summary line says where the compile time went, the compiler named.
    let said = String::from_utf8_lossy(&cold.stderr);
    assert!(
        said.contains(" s (CubeCL ") && said.contains(", WGSL "),
        "{said}"
    );
    let warm = wgsl();
    let (cw, tw) = counts(&warm);
    assert_eq!(tw, 0, "{}", String::from_utf8_lossy(&warm.stderr));
    assert!(
        cw > 0,
        "WGSL kernels are compiled in every process: {}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let databases: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".db"))
        .collect();
    assert!(
        !databases.is_empty() && databases.iter().all(|n| n.contains("-wgsl")),
        "{databases:?}"
    );

    let cpu = generate_on(&cache, "cpu").output().unwrap();
    assert!(
        cpu.status.success(),
        "{}",
        String::from_utf8_lossy(&cpu.stderr)
    );
    assert_eq!(cold.stdout, cpu.stdout);
    assert_eq!(warm.stdout, cpu.stdout);
}

/// `Command::spawn` with its output captured, for a process that runs beside another.
trait SpawnOutput {
    fn spawn_output(&mut self) -> std::process::Child;
}

impl SpawnOutput for Command {
    fn spawn_output(&mut self) -> std::process::Child {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}
