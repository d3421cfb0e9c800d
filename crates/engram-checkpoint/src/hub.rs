//! Models from the Hugging Face hub, through `hf-hub`: files land in the standard HF cache
//! (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`), `HF_TOKEN` (or the
//! token file `huggingface-cli login` writes) authenticates gated repos, and with
//! `HF_HUB_OFFLINE=1` — or when the hub cannot be reached — files come from the cache alone.

use std::path::{Path, PathBuf};

use hf_hub::{Cache, Repo, RepoType};

use crate::{CheckpointError, Result};

/// Files engram wants from a model repository; the first group is required.
const REQUIRED: &[&str] = &["config.json"];
const OPTIONAL: &[&str] = &[
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    crate::checkpoint::CHAT_TEMPLATE_FILE,
    "special_tokens_map.json",
];

/// Where the hub cache lives, following huggingface_hub's environment variables.
pub fn cache_dir() -> PathBuf {
    if let Ok(p) = std::env::var("HF_HUB_CACHE") {
        return PathBuf::from(p);
    }
    Cache::from_env().path().clone()
}

/// True when `HF_HUB_OFFLINE` asks for cache-only operation.
pub fn offline() -> bool {
    matches!(
        std::env::var("HF_HUB_OFFLINE").as_deref(),
        Ok("1") | Ok("true") | Ok("TRUE") | Ok("yes") | Ok("ON") | Ok("on")
    )
}

/// True when `spec` looks like a hub repo id (`owner/name`, optionally `@revision`) rather than
/// a local path.
pub fn looks_like_repo_id(spec: &str) -> bool {
    let id = spec.split('@').next().unwrap_or(spec);
    let parts: Vec<&str> = id.split('/').collect();
    parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
        && !id.starts_with('.')
}

fn repo_of(spec: &str) -> Repo {
    match spec.split_once('@') {
        Some((id, rev)) => Repo::with_revision(id.to_string(), RepoType::Model, rev.to_string()),
        None => Repo::new(spec.to_string(), RepoType::Model),
    }
}

/// Something that turns a repo file name into a local path.
trait Fetch {
    fn fetch(&self, file: &str) -> std::result::Result<PathBuf, String>;
}

struct CacheOnly(hf_hub::CacheRepo);

impl Fetch for CacheOnly {
    fn fetch(&self, file: &str) -> std::result::Result<PathBuf, String> {
        self.0
            .get(file)
            .ok_or_else(|| "not in the local cache (offline)".to_string())
    }
}

struct Online {
    api: hf_hub::api::sync::ApiRepo,
    cache: hf_hub::CacheRepo,
}

impl Fetch for Online {
    fn fetch(&self, file: &str) -> std::result::Result<PathBuf, String> {
        match self.api.get(file) {
            Ok(p) => Ok(p),
            Err(e) => {
                let msg = e.to_string();
                // A file the repo lacks is a real answer; a network failure falls back to the
                // cache so that cached models keep working without the hub.
                if msg.contains("404") {
                    return Err(msg);
                }
                self.cache
                    .get(file)
                    .ok_or_else(|| format!("{msg} (and not in the local cache)"))
            }
        }
    }
}

/// A hub client over `cache`: `HF_TOKEN` (or the cached login token), `HF_ENDPOINT`, progress
/// bars on downloads.
pub fn api(
    cache: &Cache,
) -> std::result::Result<hf_hub::api::sync::Api, hf_hub::api::sync::ApiError> {
    let token = std::env::var("HF_TOKEN").ok().or_else(|| cache.token());
    let mut builder = hf_hub::api::sync::ApiBuilder::from_cache(cache.clone())
        .with_token(token)
        .with_progress(true);
    if let Ok(endpoint) = std::env::var("HF_ENDPOINT") {
        builder = builder.with_endpoint(endpoint);
    }
    builder.build()
}

/// The fetcher for `repo` over the cache at `cache_dir`: the cache alone when `offline`, else
/// the hub with the cache as fallback. `label` names the repo in errors.
fn fetcher(repo: Repo, cache_dir: &Path, offline: bool, label: &str) -> Result<Box<dyn Fetch>> {
    let cache = Cache::new(cache_dir.to_path_buf());
    let cache_repo = cache.repo(repo.clone());
    if offline {
        return Ok(Box::new(CacheOnly(cache_repo)));
    }
    let api = api(&cache).map_err(|e| CheckpointError::Hub {
        repo: label.into(),
        file: "-".into(),
        message: e.to_string(),
    })?;
    Ok(Box::new(Online {
        api: api.repo(repo),
        cache: cache_repo,
    }))
}

/// Resolves a hub repo id to a local directory in the HF cache that holds its config, tokenizer
/// and safetensors weights (downloading what is missing unless offline), and returns that
/// snapshot directory. Reads `HF_HUB_CACHE`/`HF_HOME`, `HF_HUB_OFFLINE`, `HF_TOKEN` and
/// `HF_ENDPOINT` from the environment.
pub fn resolve_repo(spec: &str) -> Result<PathBuf> {
    resolve_repo_in(spec, &cache_dir(), offline())
}

/// As [`resolve_repo`], with the cache directory and offline mode given explicitly.
pub fn resolve_repo_in(spec: &str, cache_dir: &Path, offline: bool) -> Result<PathBuf> {
    let fetcher = fetcher(repo_of(spec), cache_dir, offline, spec)?;
    fetch_model_files(spec, fetcher.as_ref())
}

/// Local paths of `files` of the dataset repo `id` at `revision`, through the HF cache exactly
/// as models are fetched (downloaded when missing unless `HF_HUB_OFFLINE`; an unreachable hub
/// falls back to the cache). Errors name `id@revision` and the file.
pub fn fetch_dataset_files(id: &str, revision: &str, files: &[&str]) -> Result<Vec<PathBuf>> {
    let label = format!("{id}@{revision}");
    let repo = Repo::with_revision(id.to_string(), RepoType::Dataset, revision.to_string());
    let fetcher = fetcher(repo, &cache_dir(), offline(), &label)?;
    files
        .iter()
        .map(|file| {
            fetcher.fetch(file).map_err(|message| CheckpointError::Hub {
                repo: label.clone(),
                file: file.to_string(),
                message,
            })
        })
        .collect()
}

fn fetch_model_files(spec: &str, f: &dyn Fetch) -> Result<PathBuf> {
    let err = |file: &str, message: String| CheckpointError::Hub {
        repo: spec.to_string(),
        file: file.to_string(),
        message,
    };
    let mut dir: Option<PathBuf> = None;
    for file in REQUIRED {
        let p = f.fetch(file).map_err(|m| err(file, m))?;
        dir = p.parent().map(Path::to_path_buf);
    }
    for file in OPTIONAL {
        let _ = f.fetch(file);
    }
    match f.fetch(crate::safetensors_dir::INDEX_FILE) {
        Ok(index) => {
            let text =
                std::fs::read_to_string(&index).map_err(|e| CheckpointError::io(&index, e))?;
            let json: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| CheckpointError::Json {
                    path: index.clone(),
                    message: e.to_string(),
                })?;
            let mut shards: Vec<String> = json["weight_map"]
                .as_object()
                .map(|m| {
                    m.values()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            shards.sort();
            shards.dedup();
            for shard in shards {
                f.fetch(&shard).map_err(|m| err(&shard, m))?;
            }
        }
        Err(_) => {
            f.fetch(crate::safetensors_dir::SINGLE_FILE)
                .map_err(|m| err(crate::safetensors_dir::SINGLE_FILE, m))?;
        }
    }
    dir.ok_or_else(|| err("config.json", "no snapshot directory".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lays out a repo in the HF cache the way huggingface_hub does:
    /// `models--owner--name/{refs/main, snapshots/<commit>/<files>}`.
    fn fake_cache(root: &Path, repo: &str, files: &[&str], sharded: bool) -> PathBuf {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let dir = root.join(format!("models--{}", repo.replace('/', "--")));
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::write(dir.join("refs/main"), commit).unwrap();
        let snap = dir.join("snapshots").join(commit);
        std::fs::create_dir_all(&snap).unwrap();
        for f in files {
            std::fs::write(snap.join(f), "{}").unwrap();
        }
        if sharded {
            std::fs::write(
                snap.join("model.safetensors.index.json"),
                r#"{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}"#,
            )
            .unwrap();
        }
        snap
    }

    #[test]
    fn offline_resolution_reads_the_hf_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let snap = fake_cache(
            tmp.path(),
            "meta-llama/Llama-3.1-8B-Instruct",
            &["config.json", "tokenizer.json", "model.safetensors"],
            false,
        );
        let got = resolve_repo_in("meta-llama/Llama-3.1-8B-Instruct", tmp.path(), true).unwrap();
        assert_eq!(got, snap);
    }

    #[test]
    fn offline_resolution_needs_every_shard() {
        let tmp = tempfile::tempdir().unwrap();
        let files = ["config.json", "model-00001-of-00002.safetensors"];
        fake_cache(tmp.path(), "org/sharded", &files, true);
        let e = resolve_repo_in("org/sharded", tmp.path(), true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("org/sharded")
                && e.contains("model-00002-of-00002.safetensors")
                && e.contains("offline"),
            "{e}"
        );
        fake_cache(
            tmp.path(),
            "org/sharded",
            &["model-00002-of-00002.safetensors"],
            true,
        );
        assert!(resolve_repo_in("org/sharded", tmp.path(), true).is_ok());
    }

    #[test]
    fn offline_miss_names_the_repo_and_file() {
        let tmp = tempfile::tempdir().unwrap();
        let e = resolve_repo_in("org/absent", tmp.path(), true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("org/absent") && e.contains("config.json") && e.contains("offline"),
            "{e}"
        );
    }

    /// An `Online` fetcher whose endpoint is a closed loopback port (every request fails fast),
    /// over the cache at `cache_dir`.
    fn unreachable_hub(cache_dir: &Path, spec: &str) -> Online {
        let cache = Cache::new(cache_dir.to_path_buf());
        let api = hf_hub::api::sync::ApiBuilder::from_cache(cache.clone())
            .with_endpoint("http://127.0.0.1:9".into())
            .with_progress(false)
            .with_retries(0)
            .build()
            .unwrap();
        let repo = repo_of(spec);
        Online {
            api: api.repo(repo.clone()),
            cache: cache.repo(repo),
        }
    }

    #[test]
    fn unreachable_hub_falls_back_to_the_cache() {
        // An endpoint on a closed loopback port: every request fails fast, the cache answers.
        let tmp = tempfile::tempdir().unwrap();
        let snap = fake_cache(
            tmp.path(),
            "org/cached",
            &["config.json", "model.safetensors"],
            false,
        );
        let online = unreachable_hub(tmp.path(), "org/cached");
        assert_eq!(fetch_model_files("org/cached", &online).unwrap(), snap);
        let empty = tempfile::tempdir().unwrap();
        let online = unreachable_hub(empty.path(), "org/cached");
        let e = fetch_model_files("org/cached", &online)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not in the local cache"), "{e}");
    }

    #[test]
    fn repo_ids_are_told_from_paths() {
        assert!(looks_like_repo_id("meta-llama/Llama-3.1-8B-Instruct"));
        assert!(looks_like_repo_id(
            "HuggingFaceTB/SmolLM2-135M-Instruct@main"
        ));
        assert!(!looks_like_repo_id("./models/x"));
        assert!(!looks_like_repo_id("/abs/path"));
        assert!(!looks_like_repo_id("a/b/c"));
        assert!(!looks_like_repo_id("model.gguf"));
    }
}
