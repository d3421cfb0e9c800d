//! Panics on CubeCL's device threads, kept off the terminal.
//!
//! CubeCL runs each GPU device's work on a thread of its own (its device service, named
//! `DSU-…` or `DSD-…`) and hands a panic there back to the caller as an error (or, for work
//! queued without waiting, as the failure of the next read), which engram then names: the
//! device, the step, what to lower. Rust's default panic hook would first print that panic's
//! raw text and source location from the device thread — an unexplained second copy of the
//! failure above engram's error. [`install`] leaves those out and prints every other panic as
//! the default hook does; with `RUST_BACKTRACE` set, device threads' panics print as before.
//! The last one left out is kept: [`last`] gives it to `main`, which adds it to an error whose
//! text does not already carry it, so that a cause is never lost.

use std::sync::Mutex;

/// The text of the last device-thread panic left out.
static LAST: Mutex<Option<String>> = Mutex::new(None);

/// Whether a thread of this name is one of CubeCL's device services (`DSU-<type>-<index>`,
/// `DSD-<type>-<index>`: cubecl-common's `DeviceClient::new`).
pub fn is_device_thread(name: &str) -> bool {
    name.starts_with("DSU-") || name.starts_with("DSD-")
}

/// Installs the hook (see the module docs). Panics on other threads go to the hook that was
/// installed before.
pub fn install() {
    if std::env::var_os("RUST_BACKTRACE").is_none() {
        set_hook();
    }
}

/// [`install`]'s hook, whatever the environment.
fn set_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let device = std::thread::current().name().is_some_and(is_device_thread);
        if !device {
            return default(info);
        }
        if let Ok(mut last) = LAST.lock() {
            *last = Some(engram_model::device::panic_text(info.payload()));
        }
    }));
}

/// The last device-thread panic [`install`]'s hook left out, for an error that does not
/// already say it: its first line that is not blank, `None` where there was none or `error`
/// contains it.
pub fn last(error: &str) -> Option<String> {
    let text = LAST.lock().ok()?.clone()?;
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    (!error.contains(line)).then(|| line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubecl_device_threads_are_told_from_others() {
        assert!(is_device_thread("DSU-3-0"));
        assert!(is_device_thread("DSD-12-1"));
        assert!(!is_device_thread("main"));
        assert!(!is_device_thread("rayon-worker-0"));
        assert!(!is_device_thread("DS"));
    }

    /// A device thread's panic is kept, not printed, and given to an error that lacks it.
    #[test]
    fn a_device_thread_panic_is_kept_for_the_error() {
        set_hook();
        let joined = std::thread::Builder::new()
            .name("DSU-7-0".into())
            .spawn(|| panic!("\n  can't allocate buffer of size: 42\nmore"))
            .unwrap()
            .join();
        assert!(joined.is_err());
        assert_eq!(
            last("rank 8: the device failed").as_deref(),
            Some("can't allocate buffer of size: 42")
        );
        assert_eq!(last("… can't allocate buffer of size: 42 …"), None);
        let _ = std::panic::take_hook();
    }
}
