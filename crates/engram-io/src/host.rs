//! The machine a process runs on, as files written for other processes name it (claims of
//! cells, shared judge caches).

/// The host's name: the kernel's (`/proc/sys/kernel/hostname`), else `HOSTNAME`, else
/// `unknown`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}
