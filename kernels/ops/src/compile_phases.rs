//! Where a process's GPU compile time goes: for each kernel compiled, CubeCL expanding it to its
//! IR, the backend's compiler (to SPIR-V, WGSL or PTX: LLVM or NVRTC) and the driver loading
//! the result (building a Vulkan pipeline, JIT-compiling PTX), summed by phase and by kernel type.
//!
//! engram's patched cubecl-wgpu and cubecl-cuda (`vendor/*/src/compile_phases.rs`) log one line
//! per compiled kernel on the target [`TARGET`]: `<compiler> <expand ns> <compile ns> <driver
//! ns> <kernel type>`; the kernel cache's log sink hands each to [`record`]. A cold start that is
//! mostly the compiler is cut by a cheaper compiler or fewer kernels; one that is mostly the
//! driver, by the driver's own cache or JIT settings.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// The `log` target of the patched CubeCL's lines.
pub const TARGET: &str = "cubecl::compile_phases";

/// Compile time of one kind of kernel.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelCompile {
    /// The kernel's type, without its path and generic arguments (`MatmulEntry`).
    pub kernel: String,
    /// Kernels of that type compiled.
    pub compiled: u64,
    /// Their compile time, all phases, in seconds.
    pub seconds: f64,
}

/// Compile time by phase, summed over the kernels compiled.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CompilePhases {
    /// The backend compilers that ran (`LLVM`, `NVRTC`, `SPIR-V`, `WGSL`), joined by `+`.
    pub compiler: String,
    /// Kernels compiled.
    pub kernels: u64,
    /// Seconds CubeCL spent expanding kernels to its IR.
    pub expand_s: f64,
    /// Seconds in the backend's compiler.
    pub compile_s: f64,
    /// Seconds in the driver (pipeline creation; PTX loading and its JIT).
    pub driver_s: f64,
    /// By kernel type, the most seconds first.
    pub by_kernel: Vec<KernelCompile>,
    /// Of the kernels, those compiled ahead of their launch on the compile threads of engram's
    /// patched cubecl-runtime, which its cubecl-wgpu and cubecl-cuda share (autotune's
    /// candidates, side by side: [`crate::compile_ahead`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ahead: u64,
    /// How many of those threads compiled them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ahead_threads: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CompilePhases {
    /// The three phases' seconds together.
    pub fn total_s(&self) -> f64 {
        self.expand_s + self.compile_s + self.driver_s
    }

    /// The work since `earlier` (taken before in the same process): every figure less
    /// `earlier`'s, kernel types with nothing left dropped; `None` when nothing was compiled
    /// since.
    pub fn since(&self, earlier: Option<&CompilePhases>) -> Option<CompilePhases> {
        let Some(e) = earlier else {
            return (self.kernels > 0).then(|| self.clone());
        };
        let less = |a: f64, b: f64| (a - b).max(0.0);
        let mut by_kernel: Vec<KernelCompile> = self
            .by_kernel
            .iter()
            .filter_map(|k| {
                let before = e.by_kernel.iter().find(|b| b.kernel == k.kernel);
                let compiled = k.compiled.saturating_sub(before.map_or(0, |b| b.compiled));
                (compiled > 0).then(|| KernelCompile {
                    kernel: k.kernel.clone(),
                    compiled,
                    seconds: less(k.seconds, before.map_or(0.0, |b| b.seconds)),
                })
            })
            .collect();
        sort(&mut by_kernel);
        let kernels = self.kernels.saturating_sub(e.kernels);
        (kernels > 0).then(|| CompilePhases {
            compiler: self.compiler.clone(),
            kernels,
            expand_s: less(self.expand_s, e.expand_s),
            compile_s: less(self.compile_s, e.compile_s),
            driver_s: less(self.driver_s, e.driver_s),
            by_kernel,
            ahead: self.ahead.saturating_sub(e.ahead),
            ahead_threads: self.ahead_threads,
        })
    }
}

impl std::fmt::Display for CompilePhases {
    /// "CubeCL 9.1 s, LLVM 60.2 s, driver 23.7 s; most in MatmulEntry (209, 61.0 s)".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CubeCL {:.1} s, {} {:.1} s, driver {:.1} s",
            self.expand_s, self.compiler, self.compile_s, self.driver_s
        )?;
        if let Some(top) = self.by_kernel.first() {
            write!(
                f,
                "; most in {} ({}, {:.1} s)",
                top.kernel, top.compiled, top.seconds
            )?;
        }
        if self.ahead > 0 {
            let threads = self.ahead_threads;
            let s = if threads == 1 { "" } else { "s" };
            write!(f, "; {} compiled ahead on {threads} thread{s}", self.ahead)?;
        }
        Ok(())
    }
}

/// The most seconds first, then by name.
fn sort(by_kernel: &mut [KernelCompile]) {
    by_kernel.sort_by(|a, b| {
        b.seconds
            .total_cmp(&a.seconds)
            .then_with(|| a.kernel.cmp(&b.kernel))
    });
}

/// Running totals of this process.
#[derive(Default)]
struct Tally {
    compilers: Vec<String>,
    kernels: u64,
    ns: [u128; 3],
    by_kernel: BTreeMap<String, (u64, u128)>,
    ahead: u64,
    ahead_threads: Vec<String>,
}

/// The name prefix of the compile threads of engram's patched cubecl-runtime
/// (`vendor/cubecl-runtime`, `src/dry_run/pool.rs`); a build without a GPU backend has none.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
const AHEAD_THREAD: Option<&str> = Some(cubecl_runtime::dry_run::pool::THREAD_PREFIX);
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
const AHEAD_THREAD: Option<&str> = None;

fn tally() -> &'static Mutex<Tally> {
    static TALLY: OnceLock<Mutex<Tally>> = OnceLock::new();
    TALLY.get_or_init(Mutex::default)
}

/// One compiled kernel's line from the patched CubeCL; a line that does not parse is ignored.
pub(crate) fn record(line: &str) {
    let Some((compiler, ns, kernel)) = parse(line) else {
        return;
    };
    let mut t = tally().lock().unwrap_or_else(|e| e.into_inner());
    let compiler = compiler_name(compiler);
    if !t.compilers.iter().any(|c| c == compiler) {
        t.compilers.push(compiler.to_owned());
    }
    t.kernels += 1;
    for (sum, n) in t.ns.iter_mut().zip(ns) {
        *sum += n;
    }
    let entry = t
        .by_kernel
        .entry(short_kernel(kernel).to_owned())
        .or_default();
    entry.0 += 1;
    entry.1 += ns.iter().sum::<u128>();
    // The line is logged on the thread that compiled the kernel.
    if let Some(thread) = std::thread::current()
        .name()
        .filter(|n| AHEAD_THREAD.is_some_and(|prefix| n.starts_with(prefix)))
    {
        t.ahead += 1;
        if !t.ahead_threads.iter().any(|n| n == thread) {
            t.ahead_threads.push(thread.to_owned());
        }
    }
}

/// This process's phases so far; `None` before the first kernel compiled (or where the
/// backend does not report them).
pub fn phases() -> Option<CompilePhases> {
    let t = tally().lock().unwrap_or_else(|e| e.into_inner());
    if t.kernels == 0 {
        return None;
    }
    let s = |ns: u128| ns as f64 * 1e-9;
    let mut by_kernel: Vec<KernelCompile> = t
        .by_kernel
        .iter()
        .map(|(kernel, &(compiled, ns))| KernelCompile {
            kernel: kernel.clone(),
            compiled,
            seconds: s(ns),
        })
        .collect();
    sort(&mut by_kernel);
    Some(CompilePhases {
        compiler: t.compilers.join("+"),
        kernels: t.kernels,
        expand_s: s(t.ns[0]),
        compile_s: s(t.ns[1]),
        driver_s: s(t.ns[2]),
        by_kernel,
        ahead: t.ahead,
        ahead_threads: t.ahead_threads.len() as u64,
    })
}

/// `<compiler> <expand ns> <compile ns> <driver ns> <kernel type>` → its parts.
fn parse(line: &str) -> Option<(&str, [u128; 3], &str)> {
    let mut parts = line.splitn(5, ' ');
    let compiler = parts.next()?;
    let mut ns = [0u128; 3];
    for n in &mut ns {
        *n = parts.next()?.parse().ok()?;
    }
    let kernel = parts.next().filter(|k| !k.is_empty())?;
    Some((compiler, ns, kernel))
}

/// A compiler's name for people.
fn compiler_name(tag: &str) -> &str {
    match tag {
        "llvm" => "LLVM",
        "nvrtc" => "NVRTC",
        "spirv" => "SPIR-V",
        "wgsl" => "WGSL",
        other => other,
    }
}

/// `cubek_matmul::launch::MatmulEntry<f32, (A, B)>` → `MatmulEntry`.
fn short_kernel(name: &str) -> &str {
    let base = name.split('<').next().unwrap_or(name);
    base.rsplit("::").next().unwrap_or(base).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_names_shorten() {
        assert_eq!(
            parse("llvm 1000 2000 3000 cubek::MatmulEntry<f32, (A, B)>"),
            Some((
                "llvm",
                [1000, 2000, 3000],
                "cubek::MatmulEntry<f32, (A, B)>"
            ))
        );
        assert_eq!(parse("llvm 1000 x 3000 K"), None);
        assert_eq!(parse("llvm 1000 2000 3000"), None);
        assert_eq!(parse("llvm 1000 2000 3000 "), None);
        assert_eq!(
            short_kernel("cubek::MatmulEntry<f32, (A, B)>"),
            "MatmulEntry"
        );
        assert_eq!(short_kernel("ReduceKernel"), "ReduceKernel");
        assert_eq!(compiler_name("spirv"), "SPIR-V");
    }

    #[test]
    fn work_since_an_earlier_tally_is_the_difference() {
        let k = |kernel: &str, compiled, seconds| KernelCompile {
            kernel: kernel.into(),
            compiled,
            seconds,
        };
        let at = |kernels, e, c, d, by: Vec<KernelCompile>| CompilePhases {
            compiler: "LLVM".into(),
            kernels,
            expand_s: e,
            compile_s: c,
            driver_s: d,
            by_kernel: by,
            ahead: 0,
            ahead_threads: 0,
        };
        let before = at(
            3,
            1.0,
            4.0,
            1.0,
            vec![k("Matmul", 2, 5.0), k("Reduce", 1, 1.0)],
        );
        let after = at(
            6,
            1.5,
            7.0,
            2.5,
            vec![k("Matmul", 3, 7.0), k("Reduce", 1, 1.0), k("Cast", 2, 3.0)],
        );
        let since = after.since(Some(&before)).unwrap();
        assert_eq!(
            since,
            at(
                3,
                0.5,
                3.0,
                1.5,
                vec![k("Cast", 2, 3.0), k("Matmul", 1, 2.0)]
            )
        );
        assert_eq!(since.total_s(), 5.0);
        assert_eq!(after.since(Some(&after)), None, "nothing compiled between");
        assert_eq!(after.since(None), Some(after.clone()));
        assert_eq!(
            after.to_string(),
            "CubeCL 1.5 s, LLVM 7.0 s, driver 2.5 s; most in Matmul (3, 7.0 s)"
        );
        let ahead = |ahead, threads| CompilePhases {
            ahead,
            ahead_threads: threads,
            ..after.clone()
        };
        let earlier = CompilePhases {
            ahead: 1,
            ahead_threads: 2,
            ..before.clone()
        };
        let since = ahead(5, 2).since(Some(&earlier)).unwrap();
        assert_eq!((since.ahead, since.ahead_threads), (4, 2));
        assert!(
            ahead(5, 2)
                .to_string()
                .ends_with("; most in Matmul (3, 7.0 s); 5 compiled ahead on 2 threads"),
            "{}",
            ahead(5, 2)
        );
        assert!(
            ahead(1, 1)
                .to_string()
                .ends_with("1 compiled ahead on 1 thread")
        );
        let json = serde_json::to_string(&after).unwrap();
        assert!(!json.contains("ahead"), "left out when nothing was: {json}");
    }

    /// A line logged on one of the patched cubecl-runtime's compile threads counts as compiled
    /// ahead, with the thread; one logged elsewhere does not.
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    #[test]
    fn lines_from_the_compile_threads_count_as_compiled_ahead() {
        let before = phases().map_or(0, |p| p.ahead);
        record("spirv 10 20 30 AheadProbe");
        assert_eq!(phases().unwrap().ahead, before);
        std::thread::Builder::new()
            .name(format!("{}7", cubecl_runtime::dry_run::pool::THREAD_PREFIX))
            .spawn(|| record("spirv 10 20 30 AheadProbe"))
            .unwrap()
            .join()
            .unwrap();
        let p = phases().unwrap();
        assert_eq!(p.ahead, before + 1);
        assert!(p.ahead_threads >= 1);
    }
}
