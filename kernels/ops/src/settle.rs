//! Letting wgpu devices finish their queued work before the process exits.
//!
//! Mesa's software Vulkan device (llvmpipe, Mesa 22.3: what CI and the tests run on) executes
//! command buffers on a queue thread of its own and JIT-compiles a kernel there the first time a
//! dispatch runs it. When the process exits with such work still queued, the exit handlers
//! (LLVM's static destructors, lavapipe's own) run while that thread is compiling, and the
//! process dies of a SIGSEGV or a `free(): invalid pointer` abort after its work is done: a test
//! binary whose tests all passed, or an `engram` command that has written its results, ends
//! with signal 11 or 6. (Seen in CI once in about ten runs, and locally once in 25–50 runs of one
//! test binary; the core dumps show the main thread in `__run_exit_handlers` and lavapipe's
//! thread in `llvm::MCJIT`.)
//!
//! [`at_exit`] registers, once per process, an exit handler that waits for every wgpu device
//! opened through [`crate::open_device`] to finish its queue. It is registered after the device
//! has started (and loaded the driver and LLVM, whose handlers are registered as they load), and
//! exit handlers run in reverse order of registration, so it runs before theirs.

use std::sync::{Mutex, Once, mpsc};
use std::time::Duration;

use burn::tensor::Device;

/// How long the exit handler waits for the queues before letting the process exit anyway (a
/// device that hangs must not hang the exit).
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

static DEVICES: Mutex<Vec<Device>> = Mutex::new(Vec::new());
static REGISTER: Once = Once::new();

/// Has `device`'s queue waited for before the process exits (see the module's docs).
pub(crate) fn at_exit(device: &Device) {
    let mut devices = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    if !devices.contains(device) {
        devices.push(device.clone());
    }
    drop(devices);
    REGISTER.call_once(|| {
        // SAFETY: `settle` is an `extern "C" fn()` that does not unwind.
        unsafe {
            libc::atexit(settle);
        }
    });
}

/// The exit handler: syncs every registered device on a thread of its own (the exiting thread's
/// thread-locals, which the backends' clients use, are already destroyed when exit handlers
/// run), waiting at most [`SETTLE_LIMIT`].
extern "C" fn settle() {
    let devices = std::mem::take(&mut *DEVICES.lock().unwrap_or_else(|e| e.into_inner()));
    if devices.is_empty() {
        return;
    }
    let (done, finished) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("engram-settle".into())
        .spawn(move || {
            for device in &devices {
                // A device that failed has nothing left to finish: its error is not ours to
                // report here.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device.sync()));
            }
            let _ = done.send(());
        });
    if spawned.is_ok() {
        let _ = finished.recv_timeout(SETTLE_LIMIT);
    }
}
