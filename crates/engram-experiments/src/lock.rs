//! Cell claims, so that many sweeps — processes, hosts, Slurm tasks — can share one results
//! directory (NFS and Lustre included) and run each cell once.
//!
//! A claim is the file `locks/<cell>.lock`, created exclusively (`O_CREAT | O_EXCL`, atomic on
//! NFSv3+ and Lustre), holding who took it (host, pid, Slurm job, a random token). Its heartbeat
//! is the file's modification time, refreshed by a thread through the open handle while the
//! claim is held, so a holder that died stops beating. A claim whose heartbeat is older than
//! [`LockSettings::stale_after`] may be taken over, and so may one whose holder ran on this host
//! and no longer exists, or was an earlier run of this process's own Slurm job (requeued: a
//! higher `SLURM_RESTART_COUNT`); a live one never is. Takers go one at a time, holding
//! `locks/<cell>.lock.takeover` (created exclusively); under it a taker judges the claim again,
//! renames the stale file away, checks that what it moved is the file it judged stale (else it
//! puts it back without overwriting anything), and only then creates its own claim exclusively
//! — so two takers never both hold the cell. A holder checks
//! that the claim is still its own ([`CellLock::still_held`]) before it writes the cell's
//! record: one suspended past `stale_after` (a paused VM, Slurm's suspend) finds its cell taken
//! over and leaves the record to the sweep that took it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use engram_io::hostname;
use serde::{Deserialize, Serialize};

/// How often a held claim beats by default.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(30);
/// How old a heartbeat must be before the claim counts as abandoned, by default (20 missed
/// beats: long enough for a loaded NFS server, short enough to pick up a killed task's cell).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(600);

/// Claims made by this process (part of each claim's token).
static CLAIMS: AtomicUsize = AtomicUsize::new(0);

/// How claims beat and when they go stale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockSettings {
    /// Time between heartbeats of a held claim.
    pub heartbeat: Duration,
    /// Age of the last heartbeat after which a claim may be taken over.
    pub stale_after: Duration,
}

impl Default for LockSettings {
    fn default() -> Self {
        Self {
            heartbeat: DEFAULT_HEARTBEAT,
            stale_after: DEFAULT_STALE_AFTER,
        }
    }
}

/// Who holds a claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Slurm job (`SLURM_JOB_ID`, with `_<task>` for an array task), if any.
    pub job: Option<String>,
    /// Slurm's restart count of that job (`SLURM_RESTART_COUNT`: how often it was requeued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
    /// The holder's pid namespace (`/proc/self/ns/pid`, as `pid:[4026531836]`), where the
    /// host has one: containers that share a host name (`--network=host`) number their
    /// processes apart, so a pid is only looked up in its own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_namespace: Option<String>,
    /// When the claim was taken (Unix seconds).
    pub since_unix: u64,
    /// Tells this claim from any other on the same path.
    pub token: String,
}

impl Holder {
    /// This process.
    pub fn me() -> Self {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            host: hostname(),
            pid: std::process::id(),
            job: slurm_job(),
            restarts: slurm_restarts(),
            pid_namespace: pid_namespace(),
            since_unix: now.as_secs(),
            token: format!(
                "{:x}-{:x}-{}",
                now.as_nanos(),
                std::process::id(),
                CLAIMS.fetch_add(1, Ordering::SeqCst)
            ),
        }
    }

    /// Whether this claim was taken by an earlier run (a lower restart count) of Slurm job
    /// `job` in its run number `restarts`.
    fn earlier_run_of(&self, job: Option<&str>, restarts: Option<u32>) -> bool {
        job.is_some()
            && self.job.as_deref() == job
            && restarts.unwrap_or(0) > self.restarts.unwrap_or(0)
    }

    /// Whether this holder's pid can be looked up here: the same host, and the same pid
    /// namespace where both claims say (a claim that does not say is taken as this one's).
    fn same_processes(&self) -> bool {
        self.host == hostname()
            && match (&self.pid_namespace, pid_namespace()) {
                (Some(theirs), Some(ours)) => *theirs == ours,
                _ => true,
            }
    }

    /// `host H, pid P[, job J]`.
    pub fn describe(&self) -> String {
        let job = self
            .job
            .as_ref()
            .map_or(String::new(), |j| format!(", job {j}"));
        format!("host {}, pid {}{job}", self.host, self.pid)
    }
}

/// This process's Slurm job: `SLURM_JOB_ID`, or `<array job>_<task>` for an array task (the
/// id `scontrol requeue` takes).
pub fn slurm_job() -> Option<String> {
    let j = std::env::var("SLURM_JOB_ID").ok()?;
    Some(
        match (
            std::env::var("SLURM_ARRAY_JOB_ID"),
            std::env::var("SLURM_ARRAY_TASK_ID"),
        ) {
            (Ok(a), Ok(t)) => format!("{a}_{t}"),
            _ => j,
        },
    )
}

/// How often Slurm has requeued this process's job (`SLURM_RESTART_COUNT`; unset before the
/// first requeue).
pub fn slurm_restarts() -> Option<u32> {
    std::env::var("SLURM_RESTART_COUNT").ok()?.parse().ok()
}

/// What came of [`requeue_self`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Requeued: this is its restart number (1 for the first), at most the `max` asked for.
    Requeued(u32),
    /// Not requeued: the job was requeued this many times already, the `max` asked for.
    Exhausted(u32),
}

/// How long a task that requeued itself waits for Slurm to end it.
const REQUEUE_WAIT: Duration = Duration::from_secs(120);

/// `scontrol requeue JOB` for a task stopped by its time limit's warning, unless the job was
/// requeued `max` times already; after a requeue, waits (at most two minutes) for Slurm to end
/// this run with SIGTERM (seen through `stop`). Measured on slurm-wlm 22.05: a job that exits
/// by itself after its warning signal is recorded FAILED and not requeued, also when it asked
/// to be; one that waits to be ended is requeued (submitit's pattern).
pub fn requeue_self(job: &str, max: u32, stop: &engram_io::Stop) -> Result<Requeue, String> {
    let restarts = slurm_restarts().unwrap_or(0);
    if restarts >= max {
        return Ok(Requeue::Exhausted(restarts));
    }
    let out = std::process::Command::new("scontrol")
        .args(["requeue", job])
        .output()
        .map_err(|e| format!("Slurm job {job}: cannot run scontrol requeue: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "Slurm job {job}: scontrol requeue failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let t0 = std::time::Instant::now();
    while stop.requested() != Some(libc::SIGTERM as usize) && t0.elapsed() < REQUEUE_WAIT {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Requeue::Requeued(restarts + 1))
}

/// A claim seen from outside: its holder (`None` while it is being written) and the age of its
/// heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Who holds it.
    pub holder: Option<Holder>,
    /// Time since its last heartbeat.
    pub age: Duration,
}

impl Seen {
    /// Who holds it, as [`Holder::describe`] says, or `a sweep starting up` while the claim
    /// file is still being written.
    pub fn holder_name(&self) -> String {
        self.holder
            .as_ref()
            .map_or("a sweep starting up".to_string(), Holder::describe)
    }

    /// Whether it may be taken over: its heartbeat is older than `stale_after`, its holder
    /// ran on this host and is gone (a killed or Ctrl-C'd local sweep frees its cells at once),
    /// or its holder is an earlier run of this very Slurm job (a requeued task picks its cell up
    /// at once, on whichever node it lands: Slurm never runs two instances of one job).
    pub fn is_stale(&self, s: &LockSettings) -> bool {
        self.age > s.stale_after
            || self.holder.as_ref().is_some_and(|h| {
                (h.same_processes() && !process_alive(h.pid))
                    || h.earlier_run_of(slurm_job().as_deref(), slurm_restarts())
            })
    }
}

/// This process's pid namespace (`/proc/self/ns/pid`'s link), where the host has one.
fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Whether process `pid` exists on this host (Linux: `/proc/<pid>`; elsewhere assumed alive,
/// leaving the heartbeat to decide).
fn process_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

/// The claim at `path`, if there is one.
pub fn inspect(path: &Path) -> Option<Seen> {
    let meta = std::fs::metadata(path).ok()?;
    let age = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .unwrap_or_default();
    let holder = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    Some(Seen { holder, age })
}

/// A held claim: it beats until dropped, and dropping it removes the file (if it is still
/// this claim's).
pub struct CellLock {
    path: PathBuf,
    token: String,
    stop: Arc<AtomicBool>,
    beat: Option<JoinHandle<()>>,
}

impl Drop for CellLock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.beat.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        if self.still_held() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl CellLock {
    /// Whether the claim file still carries this claim: `false` once another sweep has taken
    /// the cell over — this holder was suspended past `stale_after` (a paused VM, Slurm's
    /// suspend), or lost a take-over race — and must then leave the cell's record to it.
    pub fn still_held(&self) -> bool {
        inspect(&self.path)
            .and_then(|s| s.holder)
            .is_some_and(|h| h.token == self.token)
    }
}

/// What [`claim`] found.
pub enum Claim {
    /// The cell is ours until the lock is dropped.
    Acquired(CellLock),
    /// Someone else holds it (a live claim, or one being written or taken over right now).
    Held(Seen),
}

/// Claims the cell whose claim file is `path` (its directory is created if needed).
pub fn claim(path: &Path, s: &LockSettings) -> std::io::Result<Claim> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if let Some(lock) = create(path, s)? {
        return Ok(Claim::Acquired(lock));
    }
    let Some(seen) = inspect(path) else {
        // Released between our attempt and our look: try once more.
        return Ok(match create(path, s)? {
            Some(lock) => Claim::Acquired(lock),
            None => Claim::Held(inspect(path).unwrap_or(Seen {
                holder: None,
                age: Duration::ZERO,
            })),
        });
    };
    if !seen.is_stale(s) {
        return Ok(Claim::Held(seen));
    }
    take_over(path, s, seen)
}

/// `<cell>.lock.takeover`: held (created exclusively) by the one sweep taking a stale claim
/// over.
fn takeover_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".takeover");
    path.with_file_name(name)
}

/// Removes the take-over guard when the take-over ends, however it ends.
struct Guard(PathBuf);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Takes over the stale claim `seen` at `path`. Takers go one at a time, each holding the
/// take-over guard ([`takeover_path`]): without it, one that judged the claim stale could move
/// aside a claim another taker had just made, and a third create one in the gap while it put
/// that back, leaving two sweeps running the cell. Under the guard the claim is judged again
/// (another taker may have finished first), moved aside, checked to be the one judged stale
/// (its holder may have released it and a new sweep claimed the cell), and only then replaced
/// by this sweep's own, created exclusively. A guard older than `stale_after` was left by a
/// taker that died in the milliseconds a take-over takes: it is removed, and tried once more.
fn take_over(path: &Path, s: &LockSettings, seen: Seen) -> std::io::Result<Claim> {
    let guard_path = takeover_path(path);
    let mut guard = None;
    for _ in 0..2 {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&guard_path)
        {
            Ok(_) => {
                guard = Some(Guard(guard_path.clone()));
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if inspect(&guard_path).is_none_or(|g| g.age <= s.stale_after) {
                    // Another sweep is taking it over now.
                    return Ok(Claim::Held(seen));
                }
                let _ = std::fs::remove_file(&guard_path);
            }
            Err(e) => return Err(e),
        }
    }
    let Some(_guard) = guard else {
        return Ok(Claim::Held(seen));
    };
    let token = |s: &Seen| s.holder.as_ref().map(|h| h.token.clone());
    let Some(now) = inspect(path) else {
        // Released (or taken over and released) meanwhile: free.
        return Ok(match create(path, s)? {
            Some(lock) => Claim::Acquired(lock),
            None => Claim::Held(inspect(path).unwrap_or(seen)),
        });
    };
    if token(&now) != token(&seen) || !now.is_stale(s) {
        return Ok(Claim::Held(now));
    }
    let aside = engram_io::unique_sibling(path, "stale");
    if std::fs::rename(path, &aside).is_err() {
        return Ok(Claim::Held(inspect(path).unwrap_or(seen)));
    }
    if inspect(&aside).map(|m| token(&m)) != Some(token(&seen)) {
        // Its holder released it and a new sweep claimed the cell in between: put that claim
        // back unless the path is taken again (a hard link never overwrites).
        let _ = std::fs::hard_link(&aside, path);
        let _ = std::fs::remove_file(&aside);
        return Ok(Claim::Held(inspect(path).unwrap_or(seen)));
    }
    let _ = std::fs::remove_file(&aside);
    Ok(match create(path, s)? {
        Some(lock) => Claim::Acquired(lock),
        None => Claim::Held(inspect(path).unwrap_or(seen)),
    })
}

/// Creates the claim file exclusively; `None` if it exists.
fn create(path: &Path, s: &LockSettings) -> std::io::Result<Option<CellLock>> {
    let mut file = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
        Err(e) => return Err(e),
    };
    let me = Holder::me();
    file.write_all(&serde_json::to_vec(&me).expect("holder serializes"))?;
    file.sync_all()?;
    let stop = Arc::new(AtomicBool::new(false));
    let beat = spawn_heartbeat(file, s.heartbeat, stop.clone());
    Ok(Some(CellLock {
        path: path.to_path_buf(),
        token: me.token,
        stop,
        beat: Some(beat),
    }))
}

/// Refreshes the claim's modification time every `every` through its own handle (so a claim
/// that was taken over is never touched by its old holder).
fn spawn_heartbeat(file: File, every: Duration, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            std::thread::park_timeout(every);
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let _ = file.set_modified(SystemTime::now());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> LockSettings {
        LockSettings {
            heartbeat: Duration::from_millis(50),
            stale_after: Duration::from_secs(5),
        }
    }

    /// Writes at `path` the claim of a process that died an hour ago (heartbeat that old).
    fn plant_dead_claim(path: &Path) {
        let dead = Holder {
            pid: 1,
            token: "dead".into(),
            ..Holder::me()
        };
        std::fs::write(path, serde_json::to_vec(&dead).unwrap()).unwrap();
        age_an_hour(path);
    }

    fn age_an_hour(path: &Path) {
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
    }

    fn held(c: Claim) -> Seen {
        match c {
            Claim::Held(s) => s,
            Claim::Acquired(_) => panic!("expected the claim to be held elsewhere"),
        }
    }

    #[test]
    fn a_holder_can_tell_that_its_claim_was_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks/n10-rag.lock");
        let Claim::Acquired(first) = claim(&path, &quick()).unwrap() else {
            panic!("first claim")
        };
        assert!(first.still_held());
        // Another sweep took it over (as after this holder was suspended past stale_after).
        std::fs::remove_file(&path).unwrap();
        let Claim::Acquired(second) = claim(&path, &quick()).unwrap() else {
            panic!("the take-over")
        };
        assert!(!first.still_held() && second.still_held());
        // Dropping the old claim leaves the new one's file alone.
        drop(first);
        assert!(second.still_held());
    }

    #[test]
    fn a_live_claim_is_never_taken_and_a_released_one_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks/n10-rag.lock");
        let Claim::Acquired(lock) = claim(&path, &quick()).unwrap() else {
            panic!("first claim")
        };
        let seen = held(claim(&path, &quick()).unwrap());
        let holder = seen.holder.unwrap();
        assert_eq!(holder.pid, std::process::id());
        assert!(holder.describe().contains("pid"));
        // The heartbeat keeps it fresh past several stale periods of a strict observer.
        std::thread::sleep(Duration::from_millis(400));
        let strict = LockSettings {
            stale_after: Duration::from_millis(300),
            ..quick()
        };
        let seen = held(claim(&path, &strict).unwrap());
        assert!(seen.age < Duration::from_millis(300), "{:?}", seen.age);
        drop(lock);
        assert!(!path.exists(), "released");
        assert!(matches!(
            claim(&path, &quick()).unwrap(),
            Claim::Acquired(_)
        ));
    }

    #[test]
    fn a_stale_claim_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.lock");
        // A claim left by a process that died an hour ago.
        plant_dead_claim(&path);
        let Claim::Acquired(lock) = claim(&path, &quick()).unwrap() else {
            panic!("a stale claim is taken over")
        };
        let now = inspect(&path).unwrap().holder.unwrap();
        assert_eq!(now.pid, std::process::id());
        assert_ne!(now.token, "dead");
        // Nothing is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        drop(lock);
        // The same file an hour old but fresh by its heartbeat: not taken.
        plant_dead_claim(&path);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(SystemTime::now())
            .unwrap();
        held(claim(&path, &quick()).unwrap());
    }

    #[test]
    fn a_claim_of_a_process_gone_from_this_host_is_free_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.lock");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let gone = Holder {
            pid,
            ..Holder::me()
        };
        std::fs::write(&path, serde_json::to_vec(&gone).unwrap()).unwrap();
        assert!(matches!(
            claim(&path, &quick()).unwrap(),
            Claim::Acquired(_)
        ));
        // The same claim from another host is left to its heartbeat.
        let remote = Holder {
            pid,
            host: "elsewhere".into(),
            ..Holder::me()
        };
        std::fs::write(&path, serde_json::to_vec(&remote).unwrap()).unwrap();
        held(claim(&path, &quick()).unwrap());
        // So is one from another pid namespace of this host (a container sharing its name):
        // the pid means another process there.
        let contained = Holder {
            pid,
            pid_namespace: Some("pid:[1]".into()),
            ..Holder::me()
        };
        assert_ne!(contained.pid_namespace, pid_namespace());
        std::fs::write(&path, serde_json::to_vec(&contained).unwrap()).unwrap();
        held(claim(&path, &quick()).unwrap());
    }

    #[test]
    fn a_requeued_job_recognizes_its_earlier_runs_claim() {
        let earlier = Holder {
            host: "node-a".into(),
            job: Some("7_3".into()),
            restarts: None,
            ..Holder::me()
        };
        assert!(earlier.earlier_run_of(Some("7_3"), Some(1)));
        assert!(!earlier.earlier_run_of(Some("7_3"), None), "the same run");
        assert!(
            !earlier.earlier_run_of(Some("7_4"), Some(1)),
            "another task"
        );
        assert!(!earlier.earlier_run_of(None, Some(1)));
        let second = Holder {
            restarts: Some(2),
            ..earlier
        };
        assert!(!second.earlier_run_of(Some("7_3"), Some(1)), "a later run");
        assert!(second.earlier_run_of(Some("7_3"), Some(3)));
    }

    #[test]
    fn racing_take_overs_of_a_stale_claim_give_the_cell_to_one() {
        // Many sweeps finding the same abandoned claim at once (a Slurm array started after a
        // crash): one takes the cell; a taker must never move aside a claim that another has
        // just made, which a third could then replace while the first still runs the cell.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.lock");
        for round in 0..300 {
            plant_dead_claim(&path);
            let (start, tried) = (std::sync::Barrier::new(6), std::sync::Barrier::new(6));
            let won: Vec<bool> = std::thread::scope(|s| {
                let racers: Vec<_> = (0..6)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            let c = claim(&path, &quick()).unwrap();
                            // Held until every racer has tried.
                            tried.wait();
                            match c {
                                Claim::Acquired(l) => {
                                    assert!(l.still_held(), "round {round}: its claim was taken");
                                    true
                                }
                                Claim::Held(_) => false,
                            }
                        })
                    })
                    .collect();
                racers.into_iter().map(|r| r.join().unwrap()).collect()
            });
            assert_eq!(
                won.iter().filter(|w| **w).count(),
                1,
                "round {round}: {won:?}"
            );
            // The winner released its claim; nothing else is left.
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert!(left.is_empty(), "round {round}: {left:?}");
        }
    }

    #[test]
    fn a_take_over_guard_is_respected_and_an_abandoned_one_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.lock");
        plant_dead_claim(&path);
        // Another sweep is taking the stale claim over: left to it.
        let guard = takeover_path(&path);
        std::fs::write(&guard, b"").unwrap();
        held(claim(&path, &quick()).unwrap());
        assert_eq!(inspect(&path).unwrap().holder.unwrap().token, "dead");
        // A guard left by a taker that died mid-take-over: cleared, and the cell taken.
        age_an_hour(&guard);
        let Claim::Acquired(lock) = claim(&path, &quick()).unwrap() else {
            panic!("an abandoned guard is cleared")
        };
        assert!(lock.still_held() && !guard.exists());
    }

    #[test]
    fn racing_claims_give_the_cell_to_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.lock");
        let won: Vec<bool> = std::thread::scope(|s| {
            let racers: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| match claim(&path, &quick()).unwrap() {
                        Claim::Acquired(l) => {
                            std::thread::sleep(Duration::from_millis(200));
                            drop(l);
                            true
                        }
                        Claim::Held(_) => false,
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
    }
}
