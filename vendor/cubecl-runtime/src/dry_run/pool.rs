//! engram patch: the pool of threads that compile kernels ahead of their launch, for every
//! server of the process (moved here from engram's cubecl-wgpu, so that cubecl-cuda shares it).
//!
//! Upstream compiles a kernel on the server's thread, inside the launch that first needs it, so
//! the candidates autotune benchmarks for a key are compiled one after another, each while the
//! device waits. Under [`set_compile_ahead`](super::set_compile_ahead) the tuner runs each
//! candidate of a key once as a [`LaunchMode::Prepare`](super::LaunchMode::Prepare) launch before
//! any is benchmarked; a server that can compile off its thread hands each such kernel to this
//! pool ([`spawn`]) and returns at once, so the candidates compile side by side. The launch that
//! next needs one of them waits for its compile.
//!
//! The pool has `CUBECL_COMPILE_THREADS` threads (read once per process; default: one less than
//! the host's parallelism, at most 16, which leaves a core to the server's thread; `0` turns it
//! off, and every kernel is compiled on the server's thread again, as upstream does). It is
//! started on first use. With one thread there is nothing to overlap — the server waits for the
//! first candidate while the thread compiles them in turn — so a caller turns compiling ahead on
//! only from two ([`threads`]).

use std::boxed::Box;
use std::format;
use std::sync::{Mutex, OnceLock, mpsc};

/// The variable that sets the pool's size; `0` turns compiling in the background off.
pub const THREADS_VAR: &str = "CUBECL_COMPILE_THREADS";

/// The name of each of the pool's threads, before its index (`cubecl-compile-0`, …): a logger
/// can tell the lines logged on them, a compile ahead, from the server's.
pub const THREAD_PREFIX: &str = "cubecl-compile-";

/// The most threads the pool starts by default.
const MAX_DEFAULT_THREADS: usize = 16;

/// A compile handed to the pool.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// The pool's queue, or `None` when it is off.
static POOL: OnceLock<Option<Mutex<mpsc::Sender<Job>>>> = OnceLock::new();

/// How many threads compile in the background: `CUBECL_COMPILE_THREADS`, else one less than
/// the host's parallelism (at least 1, at most 16). A value that is not a number is ignored.
pub fn threads() -> usize {
    let parsed = std::env::var(THREADS_VAR)
        .ok()
        .and_then(|value| value.trim().parse::<usize>().ok());
    parsed.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get().saturating_sub(1).clamp(1, MAX_DEFAULT_THREADS))
            .unwrap_or(1)
    })
}

/// Whether kernels can be compiled in the background in this process.
pub fn enabled() -> bool {
    pool().is_some()
}

fn pool() -> Option<&'static Mutex<mpsc::Sender<Job>>> {
    POOL.get_or_init(|| {
        let count = threads();
        if count == 0 {
            return None;
        }
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = std::sync::Arc::new(Mutex::new(receiver));
        let mut started = 0;
        for index in 0..count {
            let receiver = receiver.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{THREAD_PREFIX}{index}"))
                .spawn(move || {
                    loop {
                        // The lock is held only while waiting for the next job.
                        let job = match receiver.lock() {
                            Ok(queue) => queue.recv(),
                            Err(_) => return,
                        };
                        match job {
                            // A job that panics loses its result (its launch then compiles on the
                            // server's thread, and meets the panic there), not the thread.
                            Ok(job) => {
                                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                            }
                            Err(_) => return,
                        }
                    }
                });
            if spawned.is_ok() {
                started += 1;
            }
        }
        (started > 0).then(|| Mutex::new(sender))
    })
    .as_ref()
}

/// Queues `job` on the pool; hands it back when there is no pool.
fn spawn(job: Job) -> Result<(), Job> {
    let Some(pool) = pool() else {
        return Err(job);
    };
    let sender = match pool.lock() {
        Ok(sender) => sender,
        Err(_) => return Err(job),
    };
    sender.send(job).map_err(|mpsc::SendError(job)| job)
}

/// The compiles a server has handed to the pool, by key (a kernel's id), each with where its
/// result arrives; the server's thread collects them ([`Pending::wait`], [`Pending::finished`]).
pub struct Pending<K, T> {
    jobs: std::collections::HashMap<K, mpsc::Receiver<T>>,
}

impl<K, T> core::fmt::Debug for Pending<K, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pending")
            .field("compiles", &self.jobs.len())
            .finish()
    }
}

impl<K: core::hash::Hash + Eq + Clone, T: Send + 'static> Default for Pending<K, T> {
    fn default() -> Self {
        Self {
            jobs: std::collections::HashMap::new(),
        }
    }
}

impl<K: core::hash::Hash + Eq + Clone, T: Send + 'static> Pending<K, T> {
    /// Whether `key`'s compile is on its way.
    pub fn contains(&self, key: &K) -> bool {
        self.jobs.contains_key(key)
    }

    /// Runs `work` on the pool as `key`'s compile. Returns `false`, `work` dropped, where there
    /// is no pool.
    pub fn spawn(&mut self, key: K, work: impl FnOnce() -> T + Send + 'static) -> bool {
        let (sender, receiver) = mpsc::channel();
        let job = Box::new(move || {
            let _ = sender.send(work());
        });
        let spawned = spawn(job).is_ok();
        if spawned {
            self.jobs.insert(key, receiver);
        }
        spawned
    }

    /// Waits for `key`'s result and forgets the compile: `None` where none was on its way, or
    /// where its job was lost (it panicked).
    pub fn wait(&mut self, key: &K) -> Option<T> {
        self.jobs.remove(key)?.recv().ok()
    }

    /// The results that have arrived, their compiles forgotten (a lost job is forgotten too).
    pub fn finished(&mut self) -> std::vec::Vec<(K, T)> {
        let mut done = std::vec::Vec::new();
        self.jobs.retain(|key, receiver| match receiver.try_recv() {
            Ok(result) => {
                done.push((key.clone(), result));
                false
            }
            Err(mpsc::TryRecvError::Empty) => true,
            Err(mpsc::TryRecvError::Disconnected) => false,
        });
        done
    }
}
