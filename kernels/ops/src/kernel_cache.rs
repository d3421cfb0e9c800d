//! GPU kernels compiled once, ever — and the compile work a process still does, counted.
//!
//! CubeCL, the compiler under Burn's cuda and wgpu backends, compiles every kernel on the host
//! the first time a process launches it (on an H200: 3 to 5 kernels a second, the GPU idle),
//! and can keep what it compiled — PTX on CUDA, SPIR-V on Vulkan (the `vulkan` feature, on by
//! default) — and its autotune decisions in one database, an "environment". [`configure`] turns
//! both on in a directory engram owns, before the first GPU device opens; [`activity`] and
//! [`summary`] count what is still compiled. On wgpu's WGSL path (Metal, DX12, a build without
//! `vulkan`, or `CUBECL_WGPU_COMPILER=wgsl`) the driver compiles every shader in every process,
//! so there the cache keeps the autotune decisions (a later process compiles no autotune
//! candidates) but not the kernels.
//!
//! - **Where**: `$ENGRAM_KERNEL_CACHE` (a directory, or `off`), else `kernels/` in engram's cache
//!   (`$ENGRAM_CACHE`, `$XDG_CACHE_HOME/engram`, `~/.cache/engram`).
//! - **Keys**: CubeCL keys a compiled kernel by the kernel (its type, compile-time arguments and
//!   launch settings), by the running binary's build id (another engram build never reuses an
//!   entry) and by the device kind (CUDA: the `sm` architecture, the compiler and the PTX
//!   version, which follows the driver; Vulkan: the adapter's vendor and device ids); autotune
//!   results by their key and the device's fingerprint. engram names the database after its own
//!   version as well.
//! - **Sharing**: one SQLite database a directory, shared by the processes of one node (a writer
//!   waits up to 5 s for another's lock; a write that still fails costs one recompile in a later
//!   run). On a network file system (NFS, Lustre, GPFS, BeeGFS, CIFS), whose file locks cannot be
//!   trusted across hosts, each host gets a database of its own in the shared directory.
//! - **Failure** never fails a run: a directory that cannot be created or written, or a database
//!   file that is not a database (moved aside, so the next run starts a fresh one), is reported
//!   once through [`take_warnings`] and the run compiles without the cache.
//!
//! Only the CubeCL backends compile kernels; on the CPU backend, or in a build without a GPU
//! backend, [`configure`] does nothing and the counts stay zero.

// Without a GPU backend nothing compiles kernels: the cache's machinery stays unused.
#![cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use crate::compile_phases::CompilePhases;

/// The variable that moves the kernel cache (a directory) or turns it off (`off`).
pub const CACHE_ENV: &str = "ENGRAM_KERNEL_CACHE";

/// The first bytes of every SQLite database file (CubeCL's store is SQLite-compatible).
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Sessions (processes that changed the cache) whose compile records the database keeps.
const KEEP_SESSIONS: u32 = 32;

/// Where the kernel cache is to live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheSetting {
    /// In this directory.
    Dir(PathBuf),
    /// Nowhere: every process compiles what it launches.
    Off,
}

impl CacheSetting {
    /// `$ENGRAM_KERNEL_CACHE` (`off`, `0`, `false` or `none` turn it off), else [`default_dir`].
    pub fn from_env() -> Self {
        Self::from_value(std::env::var_os(CACHE_ENV))
    }

    /// The setting a value of `$ENGRAM_KERNEL_CACHE` asks for (`None`: unset).
    pub fn from_value(value: Option<std::ffi::OsString>) -> Self {
        match value {
            Some(v) if ["off", "0", "false", "none"].contains(&v.to_string_lossy().as_ref()) => {
                Self::Off
            }
            Some(v) if !v.is_empty() => Self::Dir(PathBuf::from(v)),
            _ => Self::Dir(default_dir()),
        }
    }
}

/// The kernel cache's default directory: `kernels/` in engram's cache.
pub fn default_dir() -> PathBuf {
    engram_checkpoint::model_store::cache_root().join("kernels")
}

/// What [`configure`] set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheState {
    /// The database compiled kernels and autotune results go to; `None` without a cache.
    pub database: Option<PathBuf>,
    /// Whether engram's settings took effect: `false` when CubeCL's configuration had already
    /// been read (something used a GPU backend before [`configure`]), or without a GPU backend.
    pub applied: bool,
}

static STATE: OnceLock<CacheState> = OnceLock::new();

/// Configures CubeCL's caches and compile counting once per process, from
/// [`CacheSetting::from_env`]; later calls return the first call's state. Call it before the
/// first GPU device opens ([`crate::device_from_name`] does).
pub fn configure() -> &'static CacheState {
    STATE.get_or_init(|| apply(&CacheSetting::from_env()))
}

/// The state [`configure`] set up, if it ran.
pub fn state() -> Option<&'static CacheState> {
    STATE.get()
}

/// Whether a GPU device of this process opened and ran its first operation.
static OPENED: AtomicBool = AtomicBool::new(false);

/// Notes that a GPU device opened ([`crate::open_device`] calls it once its first operation
/// ran).
pub fn note_device_opened() {
    OPENED.store(true, Ordering::Relaxed);
}

/// Whether this process's compile work (`summary`, where a GPU backend was asked for) is worth
/// a summary line: a GPU device opened, or kernels were compiled, loaded or autotuned. Where a
/// GPU backend was asked for but never opened (built without it, no driver), the error says why
/// and a line of zeros would only stand before it.
pub fn worth_a_summary(summary: &CompileSummary) -> bool {
    OPENED.load(Ordering::Relaxed) || !summary.is_idle()
}

/// Where `setting` puts the database, after checking that the directory can be written
/// (and moving aside a file that is not a database): `Err` says why there is no cache.
fn prepare(setting: &CacheSetting) -> Result<Option<(PathBuf, String)>, String> {
    let CacheSetting::Dir(dir) = setting else {
        return Ok(None);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("kernel cache {} cannot be created ({e})", dir.display()))?;
    let probe = dir.join(format!(".write-test-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .map_err(|e| format!("kernel cache {} is not writable ({e})", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    let name = environment_name(dir);
    let database = dir.join(format!("{name}.db"));
    if let Some(why) = not_a_database(&database) {
        let aside = dir.join(format!(
            "{name}.db.corrupt-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        ));
        std::fs::rename(&database, &aside).map_err(|e| {
            format!(
                "kernel cache {} is not a database ({why}) and cannot be moved aside ({e})",
                database.display()
            )
        })?;
        warn(format!(
            "kernel cache {} was not a database ({why}): moved to {}; kernels are compiled anew",
            database.display(),
            aside.display()
        ));
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(dir.join(format!("{name}.db{suffix}")));
        }
    }
    Ok(Some((dir.clone(), name)))
}

/// Why `database` is not an SQLite database, if it exists and is not one.
fn not_a_database(database: &Path) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(database).ok()?;
    let mut head = [0u8; 16];
    match file.read(&mut head) {
        Ok(0) => None,
        Ok(n) if n == 16 && &head == SQLITE_MAGIC => None,
        Ok(_) => Some("no SQLite header".into()),
        Err(e) => Some(format!("unreadable: {e}")),
    }
}

/// The database's name: engram's version, `-tf32-off` where CUDA's TF32 is turned off
/// ([`crate::device::TF32_VAR`]) and `-wgsl` where a Vulkan adapter is asked to run WGSL
/// ([`crate::device::WGPU_COMPILER_VAR`]) — their autotune results, chosen among other matmul
/// kernels, are kept apart —, and the host's name where `dir` is on a network file system (one
/// database a host there).
fn environment_name(dir: &Path) -> String {
    let tf32 = match crate::device::cuda_tf32() {
        Some(false) => "-tf32-off",
        _ => "",
    };
    let wgsl = if crate::device::wgpu_wgsl_forced() {
        "-wgsl"
    } else {
        ""
    };
    let base = format!("engram-{}{tf32}{wgsl}", env!("CARGO_PKG_VERSION"));
    match network_fs(dir) {
        Some(_) => format!("{base}-{}", host_name()),
        None => base,
    }
}

/// The network file system `dir` is on, by name, if it is on one (Linux's `statfs` magic).
#[cfg(target_os = "linux")]
pub fn network_fs(dir: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid NUL-terminated string and `stat` a valid out-pointer.
    if unsafe { libc::statfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    match stat.f_type as i64 {
        0x6969 => Some("nfs"),
        0x0BD0_0BD0 => Some("lustre"),
        0x4750_4653 => Some("gpfs"),
        0x1983_0326 => Some("beegfs"),
        0xFF53_4D42 => Some("cifs"),
        0xFE53_4D42 => Some("smb2"),
        0x6573_5546 => Some("fuse"),
        _ => None,
    }
}

/// Not known off Linux: one database for the directory.
#[cfg(not(target_os = "linux"))]
pub fn network_fs(_dir: &Path) -> Option<&'static str> {
    None
}

/// This host's name, for a database of its own (`HOSTNAME`, else `/etc/hostname`).
fn host_name() -> String {
    let raw = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_else(|| "host".into());
    raw.trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn apply(setting: &CacheSetting) -> CacheState {
    use cubecl_environment::config::logger::LogCrateLevel;
    use cubecl_environment::persistence::CacheConfig;
    use cubecl_runtime::config::compilation::CompilationLogLevel;
    use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};

    install_counter();
    let target = match prepare(setting) {
        Ok(t) => t,
        Err(why) => {
            warn(format!(
                "{why}: GPU kernels are compiled without a cache (set {CACHE_ENV} to a writable \
                 directory, or to off)"
            ));
            None
        }
    };
    // The user's cubecl.toml and CUBECL_* variables first, engram's cache and counting on top.
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    match &target {
        Some((dir, name)) => {
            config.environment.path = CacheConfig::Directory(dir.clone());
            config.environment.name = name.clone();
            config.environment.records.keep_sessions = Some(KEEP_SESSIONS);
            config.compilation.cache = true;
            config.autotune.disable_cache = false;
        }
        None => {
            config.compilation.cache = false;
            config.autotune.disable_cache = true;
        }
    }
    // A line per compiled kernel and per autotune decision, handed to the `log` crate, where
    // the counter below reads them (at the levels the user asked for, if higher).
    if matches!(
        config.compilation.logger.level,
        CompilationLogLevel::Disabled
    ) {
        config.compilation.logger.level = CompilationLogLevel::Basic;
    }
    config.compilation.logger.log = Some(LogCrateLevel::Info);
    config.autotune.logger.log = Some(LogCrateLevel::Info);
    let applied = CubeClRuntimeConfig::try_set(config);
    if !applied {
        warn(
            "CubeCL's configuration was read before engram set its kernel cache: this process \
             keeps CubeCL's defaults"
                .into(),
        );
    }
    CacheState {
        database: target
            .filter(|_| applied)
            .map(|(dir, name)| dir.join(format!("{name}.db"))),
        applied,
    }
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn apply(_setting: &CacheSetting) -> CacheState {
    CacheState {
        database: None,
        applied: false,
    }
}

/// Kernels compiled and autotune decisions made since the process started (counted from
/// CubeCL's log lines, which [`configure`] routes to the `log` crate).
#[derive(Default)]
struct Counts {
    compiled: AtomicU64,
    autotuned: AtomicU64,
    /// When the first and the latest kernel were compiled.
    times: Mutex<Option<(Instant, Instant)>>,
    warnings: Mutex<Vec<String>>,
    /// Every warning given, so each is given once.
    warned: Mutex<Vec<String>>,
}

fn counts() -> &'static Counts {
    static COUNTS: OnceLock<Counts> = OnceLock::new();
    COUNTS.get_or_init(Counts::default)
}

fn warn(text: String) {
    let c = counts();
    let mut warned = c.warned.lock().unwrap_or_else(|e| e.into_inner());
    if !warned.contains(&text) {
        warned.push(text.clone());
        c.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(text);
    }
}

/// Warnings about the kernel cache not yet taken (each given once per process): a directory
/// that cannot be written, a database that could not be opened or was not one.
pub fn take_warnings() -> Vec<String> {
    std::mem::take(&mut *counts().warnings.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The `log` sink that counts CubeCL's compile and autotune lines and keeps its cache warnings.
struct Sink;

impl log::Log for Sink {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        meta.target().starts_with("cubecl") && meta.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let c = counts();
        match record.target() {
            "cubecl::compilation" => {
                if is_compile_line(&record.args().to_string()) {
                    c.compiled.fetch_add(1, Ordering::Relaxed);
                    let now = Instant::now();
                    let mut t = c.times.lock().unwrap_or_else(|e| e.into_inner());
                    *t = Some((t.map_or(now, |(first, _)| first), now));
                }
            }
            crate::compile_phases::TARGET => {
                crate::compile_phases::record(&record.args().to_string());
            }
            "cubecl::autotune" => {
                if record.args().to_string().starts_with("Fastest result") {
                    c.autotuned.fetch_add(1, Ordering::Relaxed);
                }
            }
            target => {
                let text = record.args().to_string();
                if record.level() <= log::Level::Warn
                    && (target.contains("persistence") || text.contains("cache"))
                {
                    warn(format!("kernel cache: {text}"));
                }
            }
        }
    }

    fn flush(&self) {}
}

/// Whether a line of CubeCL's compilation log announces a kernel compiled: its basic form
/// ("[Compiling kernel] name"), or its full one, with the source, which `CUBECL_DEBUG_LOG` and
/// `CUBECL_DEBUG_OPTION=debug` turn on ("[START_KERNEL_COMPILATION]\nname: …").
fn is_compile_line(text: &str) -> bool {
    text.starts_with("[Compiling kernel]") || text.starts_with("[START_KERNEL_COMPILATION]")
}

/// Installs [`Sink`] as the process's logger, unless another logger was installed first (then
/// nothing is counted).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn install_counter() {
    static SINK: Sink = Sink;
    if log::set_logger(&SINK).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// The compile work done so far in this process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CompileActivity {
    /// GPU kernels compiled (not loaded from the cache).
    pub compiled: u64,
    /// Autotune decisions made (not read from the cache).
    pub autotuned: u64,
    /// Time since the first kernel was compiled, `None` before it.
    pub since_first: Option<Duration>,
    /// Time since the latest kernel was compiled, `None` before the first.
    pub since_last: Option<Duration>,
}

impl CompileActivity {
    /// The kernels compiled and autotune decisions made since `earlier` (an activity of the same
    /// process taken before), for a piece of work inside a longer process; the times stay this
    /// one's.
    pub fn since(&self, earlier: &CompileActivity) -> CompileActivity {
        CompileActivity {
            compiled: self.compiled.saturating_sub(earlier.compiled),
            autotuned: self.autotuned.saturating_sub(earlier.autotuned),
            ..*self
        }
    }

    /// The live line shown while kernels compile: "compiling GPU kernels: 120, 34 s — cached
    /// for next time".
    pub fn live_line(&self) -> String {
        let cached = match state().and_then(|s| s.database.as_ref()) {
            Some(_) => "cached for next time",
            None => "no kernel cache",
        };
        format!(
            "compiling GPU kernels: {}, {:.0} s — {cached}",
            self.compiled,
            self.since_first.unwrap_or_default().as_secs_f64()
        )
    }
}

/// What has been compiled so far: cheap, for a live line.
pub fn activity() -> CompileActivity {
    let c = counts();
    let times = *c.times.lock().unwrap_or_else(|e| e.into_inner());
    CompileActivity {
        compiled: c.compiled.load(Ordering::Relaxed),
        autotuned: c.autotuned.load(Ordering::Relaxed),
        since_first: times.map(|(first, _)| first.elapsed()),
        since_last: times.map(|(_, last)| last.elapsed()),
    }
}

/// A process's compile work, for a summary line, bench JSON and run records.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CompileSummary {
    /// GPU kernels compiled by this process.
    pub kernels_compiled: u64,
    /// Seconds those compiles took (CubeCL's own timing of each, from definition to the kernel
    /// loaded on the device), where the cache's records hold them; `None` without a cache.
    pub compile_seconds: Option<f64>,
    /// Kernels read from the cache instead (where its records say).
    pub kernels_loaded: Option<u64>,
    /// Autotune decisions made by this process (each benchmarks its candidates on the device).
    pub autotune_decisions: u64,
    /// The kernel cache's database, `None` without one.
    pub cache: Option<PathBuf>,
    /// Where the compile time went: CubeCL, the backend's compiler and the driver, and by
    /// kernel type (engram's patched CubeCL reports them); `None` where nothing was compiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<CompilePhases>,
}

impl std::fmt::Display for CompileSummary {
    /// The summary for people: "GPU kernels: 463 compiled in 93.0 s, 2 loaded from the cache,
    /// 36 autotune decisions (cache /c/engram-0.1.0.db)".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GPU kernels: {} compiled", self.kernels_compiled)?;
        if let Some(t) = self.compile_seconds {
            write!(f, " in {t:.1} s")?;
        }
        if let Some(p) = &self.phases {
            write!(f, " ({p})")?;
        }
        if let Some(n) = self.kernels_loaded {
            write!(f, ", {n} loaded from the cache")?;
        }
        write!(f, ", {} autotune decisions (", self.autotune_decisions)?;
        match &self.cache {
            Some(p) => write!(f, "cache {})", p.display()),
            None => write!(f, "no kernel cache)"),
        }
    }
}

impl CompileSummary {
    /// Whether no kernel was compiled or loaded and nothing autotuned (a fully warm run whose
    /// loads the records do not count is idle too; [`worth_a_summary`] tells them apart).
    pub fn is_idle(&self) -> bool {
        self.kernels_compiled == 0
            && self.autotune_decisions == 0
            && self.kernels_loaded.unwrap_or(0) == 0
    }

    /// The work done since `earlier` (a summary of the same process taken before): the counts
    /// and seconds less `earlier`'s, for a piece of work inside a longer process (a sweep's
    /// cell, a training run after its model loaded).
    pub fn since(&self, earlier: &CompileSummary) -> CompileSummary {
        let less =
            |now: Option<f64>, then: Option<f64>| now.map(|n| (n - then.unwrap_or(0.0)).max(0.0));
        CompileSummary {
            kernels_compiled: self
                .kernels_compiled
                .saturating_sub(earlier.kernels_compiled),
            compile_seconds: less(self.compile_seconds, earlier.compile_seconds),
            kernels_loaded: self
                .kernels_loaded
                .map(|n| n.saturating_sub(earlier.kernels_loaded.unwrap_or(0))),
            autotune_decisions: self
                .autotune_decisions
                .saturating_sub(earlier.autotune_decisions),
            cache: self.cache.clone(),
            phases: self
                .phases
                .as_ref()
                .and_then(|p| p.since(earlier.phases.as_ref())),
        }
    }
}

/// This process's compile work so far, with the compile seconds read back from the cache's
/// records (a database read: call it at the end of a piece of work, not in a loop).
pub fn summary() -> CompileSummary {
    let a = activity();
    let (seconds, loaded) = recorded().unzip();
    CompileSummary {
        kernels_compiled: a.compiled,
        compile_seconds: seconds,
        kernels_loaded: loaded,
        autotune_decisions: a.autotuned,
        cache: state().and_then(|s| s.database.clone()),
        phases: crate::compile_phases::phases(),
    }
}

/// Seconds compiling and kernels loaded, from the records CubeCL keeps of this process's
/// session in the cache's database.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn recorded() -> Option<(f64, u64)> {
    use cubecl_environment::persistence::Database;
    use cubecl_environment::records::Records;
    use cubecl_server::compiler::{CompilationOutcome, CompilationRecord};

    state()?.database.as_ref()?;
    let database = Database::open_active()?;
    let records = Records::new(&database);
    let me = std::process::id();
    let session = records
        .sessions()
        .into_iter()
        .filter(|s| s.process == me)
        .max_by_key(|s| s.id)?;
    let (mut seconds, mut loaded) = (0.0, 0);
    for r in records.read::<CompilationRecord>() {
        if r.stamp.session != session.id {
            continue;
        }
        match r.record.outcome {
            CompilationOutcome::Compiled | CompilationOutcome::Rekeyed => {
                seconds += r.record.duration.as_secs_f64()
            }
            CompilationOutcome::Loaded => loaded += 1,
        }
    }
    Some((seconds, loaded))
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn recorded() -> Option<(f64, u64)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_reads_as_a_sentence() {
        let s = CompileSummary {
            kernels_compiled: 463,
            compile_seconds: Some(93.04),
            kernels_loaded: Some(2),
            autotune_decisions: 36,
            cache: Some("/c/engram-0.1.0.db".into()),
            phases: None,
        };
        assert_eq!(
            s.to_string(),
            "GPU kernels: 463 compiled in 93.0 s, 2 loaded from the cache, 36 autotune \
             decisions (cache /c/engram-0.1.0.db)"
        );
        assert_eq!(
            CompileSummary::default().to_string(),
            "GPU kernels: 0 compiled, 0 autotune decisions (no kernel cache)"
        );
        assert!(CompileSummary::default().is_idle());
        assert!(!s.is_idle());
        let warm = CompileSummary {
            kernels_compiled: 0,
            autotune_decisions: 0,
            kernels_loaded: Some(194),
            ..CompileSummary::default()
        };
        assert!(!warm.is_idle(), "a warm run loads from the cache");
        let phases = CompilePhases {
            compiler: "LLVM".into(),
            kernels: 463,
            expand_s: 9.12,
            compile_s: 60.2,
            driver_s: 23.7,
            by_kernel: vec![crate::compile_phases::KernelCompile {
                kernel: "MatmulEntry".into(),
                compiled: 209,
                seconds: 61.0,
            }],
            ahead: 0,
            ahead_threads: 0,
        };
        assert_eq!(
            CompileSummary {
                phases: Some(phases),
                ..s
            }
            .to_string(),
            "GPU kernels: 463 compiled in 93.0 s (CubeCL 9.1 s, LLVM 60.2 s, driver 23.7 s; most \
             in MatmulEntry (209, 61.0 s)), 2 loaded from the cache, 36 autotune decisions \
             (cache /c/engram-0.1.0.db)"
        );
    }

    #[test]
    fn work_since_an_earlier_summary_is_the_difference() {
        let at = |compiled, seconds, loaded, tuned| CompileSummary {
            kernels_compiled: compiled,
            compile_seconds: seconds,
            kernels_loaded: loaded,
            autotune_decisions: tuned,
            cache: Some("/c/engram-0.1.0.db".into()),
            phases: None,
        };
        let before = at(100, Some(30.0), Some(4), 20);
        let after = at(163, Some(41.5), Some(10), 26);
        assert_eq!(after.since(&before), at(63, Some(11.5), Some(6), 6));
        assert_eq!(after.since(&after), at(0, Some(0.0), Some(0), 0));
        // Without a cache there are no seconds or loads to subtract.
        let bare = |compiled| CompileSummary {
            kernels_compiled: compiled,
            ..Default::default()
        };
        assert_eq!(bare(7).since(&bare(2)), bare(5));
    }

    #[test]
    fn activity_since_an_earlier_one_counts_the_work_between() {
        let at = |compiled, autotuned| CompileActivity {
            compiled,
            autotuned,
            since_first: Some(Duration::from_secs(9)),
            since_last: Some(Duration::from_secs(1)),
        };
        assert_eq!(at(120, 7).since(&at(100, 4)), at(20, 3));
        assert_eq!(at(5, 0).since(&at(9, 2)), at(0, 0), "never below zero");
    }

    #[test]
    fn the_setting_comes_from_the_variable() {
        let from = |v: Option<&str>| CacheSetting::from_value(v.map(Into::into));
        for off in ["off", "0", "false", "none"] {
            assert_eq!(from(Some(off)), CacheSetting::Off);
        }
        assert_eq!(
            from(Some("/some/where")),
            CacheSetting::Dir("/some/where".into())
        );
        assert_eq!(from(None), CacheSetting::Dir(default_dir()));
        assert_eq!(from(Some("")), CacheSetting::Dir(default_dir()));
        assert!(default_dir().ends_with("kernels"));
    }

    #[test]
    fn a_file_that_is_not_a_database_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let setting = CacheSetting::Dir(dir.path().join("k"));
        let (kdir, name) = prepare(&setting).unwrap().unwrap();
        assert!(name.starts_with("engram-"));
        let db = kdir.join(format!("{name}.db"));
        // A real SQLite header passes; an empty file passes (a database being created).
        let mut good = SQLITE_MAGIC.to_vec();
        good.extend([0u8; 84]);
        std::fs::write(&db, &good).unwrap();
        assert_eq!(not_a_database(&db), None);
        std::fs::write(&db, b"").unwrap();
        assert_eq!(not_a_database(&db), None);
        std::fs::write(
            &db,
            b"this is not a database, it was cut off by a full disk",
        )
        .unwrap();
        assert!(not_a_database(&db).is_some());
        prepare(&setting).unwrap();
        assert!(!db.exists(), "the corrupt file was moved aside");
        let aside: Vec<_> = std::fs::read_dir(&kdir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".db.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1);
        assert!(
            take_warnings()
                .iter()
                .any(|w| w.contains("was not a database"))
        );
    }

    #[test]
    fn an_unwritable_directory_is_named() {
        // A path under a regular file can never be a directory, even for root.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let err = prepare(&CacheSetting::Dir(file.join("kernels"))).unwrap_err();
        assert!(err.contains("cannot be created"), "{err}");
        assert!(err.contains("plain-file"), "{err}");
        assert_eq!(prepare(&CacheSetting::Off).unwrap(), None);
    }

    #[test]
    fn a_local_directory_is_not_a_network_file_system() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(network_fs(dir.path()), None);
        assert_eq!(
            environment_name(dir.path()),
            format!("engram-{}", env!("CARGO_PKG_VERSION"))
        );
    }
}
