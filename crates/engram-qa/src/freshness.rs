//! Whether a fact file is what QA settings would produce now, so that a sweep reuses verified
//! facts only while nothing that decides them has changed: the settings (less those that only
//! pace a run), the prompts, the generator, the model asked closed-book and the judge.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::QaConfig;
use crate::error::{QaError, Result};
use crate::manifest::{QaManifest, run_dir};
use crate::prompts::QaPrompts;

/// Settings that pace a run without changing what it produces: left out of the hash.
const PACING: [&str; 2] = ["concurrency", "breaker_after"];

/// What decides a run's facts.
pub struct RunIdentity<'a> {
    /// The settings.
    pub cfg: &'a QaConfig,
    /// The prompts.
    pub prompts: &'a QaPrompts,
    /// The generator's model ([`crate::Llm::model`]).
    pub generator: String,
    /// The model asked closed-book, when one is.
    pub target: Option<String>,
    /// The judge's fingerprint (`engram_judge::Judge::fingerprint`: its name, and for the LLM
    /// judge a hash of its prompt and verdict format).
    pub judge: String,
    /// The corpus's fingerprint (`engram_corpus::Corpus::fingerprint`: a hash of the documents
    /// generation reads).
    pub corpus: String,
}

/// The settings as the hash and the comparison see them (pacing keys left out).
fn deciding(cfg: &QaConfig) -> serde_json::Map<String, Value> {
    let Value::Object(mut m) = serde_json::to_value(cfg).expect("settings serialize") else {
        unreachable!("settings are a table")
    };
    for k in PACING {
        m.remove(k);
    }
    m
}

impl RunIdentity<'_> {
    /// SHA-256 over all of it: the same hash, the same facts.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(serde_json::to_vec(&deciding(self.cfg)).expect("settings serialize"));
        h.update(self.prompts.fingerprint());
        h.update(&self.generator);
        if let Some(t) = &self.target {
            h.update(b"\0target\0");
            h.update(t);
        }
        h.update(b"\0judge\0");
        h.update(&self.judge);
        h.update(b"\0corpus\0");
        h.update(&self.corpus);
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// What differs from the run `m` records, one `key: old → new` each; the prompts when
    /// nothing else does.
    pub fn changes_since(&self, m: &QaManifest) -> Vec<String> {
        let (old, new) = (deciding(&m.settings), deciding(self.cfg));
        let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
        keys.sort();
        keys.dedup();
        let show = |v: Option<&Value>| v.map_or("unset".to_string(), Value::to_string);
        let mut changed: Vec<String> = keys
            .into_iter()
            .filter(|k| old.get(*k) != new.get(*k))
            .map(|k| format!("{k}: {} → {}", show(old.get(k)), show(new.get(k))))
            .collect();
        if m.generator.model != self.generator {
            changed.push(format!(
                "generator: {} → {}",
                m.generator.model, self.generator
            ));
        }
        let old_target = m.target.as_ref().map(|t| t.model.clone());
        if old_target != self.target {
            let name = |t: &Option<String>| t.clone().unwrap_or_else(|| "none".into());
            changed.push(format!(
                "model asked closed-book: {} → {}",
                name(&old_target),
                name(&self.target)
            ));
        }
        if m.judge != self.judge {
            changed.push(format!("judge: {} → {}", m.judge, self.judge));
        }
        match &m.corpus_sha256 {
            Some(old) if *old == self.corpus => {}
            Some(old) => changed.push(format!(
                "the corpus's documents ({}: sha256 {} → {})",
                m.corpus,
                &old[..old.len().min(12)],
                &self.corpus[..self.corpus.len().min(12)]
            )),
            None => changed.push(format!(
                "the corpus's documents ({}: not recorded by the engram {} that made them)",
                m.corpus, m.engram
            )),
        }
        if changed.is_empty() {
            changed.push(format!(
                "the prompts (then in {}, now in {})",
                m.prompts,
                self.prompts.dir.display()
            ));
        }
        changed
    }
}

/// Where a fact file stands against the settings that would make it now.
#[derive(Debug, Clone)]
pub enum Freshness {
    /// Neither the fact file nor a record of a run.
    Missing,
    /// A run was started and not finished (or its fact file is gone): its calls are cached.
    Unfinished,
    /// Made with these very settings.
    Fresh(Box<QaManifest>),
    /// Made with other settings: what changed since.
    Stale(Vec<String>),
    /// A fact file with no record of a QA run beside it: not made by `engram qa generate`.
    Foreign,
}

/// The manifest of the run that wrote fact file `out`, if there is one.
pub fn read_manifest(out: &Path) -> Result<Option<QaManifest>> {
    let path = run_dir(out).join("manifest.json");
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(QaError::file(&path)(e)),
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| QaError::File {
            path,
            problem: format!("not a QA manifest: {e}"),
        })
}

/// Where fact file `out` stands against `id`.
pub fn freshness(out: &Path, id: &RunIdentity) -> Result<Freshness> {
    let manifest = read_manifest(out)?;
    Ok(match (out.is_file(), manifest) {
        (true, None) => Freshness::Foreign,
        (false, None) => Freshness::Missing,
        (true, Some(m)) if m.complete => {
            if m.settings_hash == id.hash() {
                Freshness::Fresh(Box::new(m))
            } else {
                Freshness::Stale(id.changes_since(&m))
            }
        }
        (_, Some(_)) => Freshness::Unfinished,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Endpoint, FORMAT};

    fn prompts() -> QaPrompts {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/qa");
        QaPrompts::load(&dir).unwrap()
    }

    fn manifest(cfg: &QaConfig, hash: String) -> QaManifest {
        QaManifest {
            format: FORMAT,
            engram: "test".into(),
            corpus: "c".into(),
            corpus_documents: 1,
            corpus_sha256: Some("c0".into()),
            documents: 1,
            complete: true,
            unfinished_documents: 0,
            truncated_documents: 0,
            generator: Endpoint {
                model: "gen".into(),
                endpoint: "http://127.0.0.1:1/v1".into(),
            },
            target: None,
            judge: "offline:exact-match".into(),
            settings: cfg.clone(),
            prompts: "configs/qa".into(),
            settings_hash: hash,
            pairs: 1,
            kept: 1,
            dropped_by_reason: Default::default(),
            calls: Default::default(),
            judged: 0,
            judged_cached: 0,
            llm_calls_per_kept_fact: None,
        }
    }

    #[test]
    fn the_hash_follows_what_decides_the_facts_and_names_each_change() {
        let p = prompts();
        let cfg = QaConfig::default();
        let id = |cfg: &QaConfig, target: Option<&str>| {
            RunIdentity {
                cfg,
                prompts: &p,
                generator: "gen".into(),
                target: target.map(String::from),
                judge: "offline:exact-match".into(),
                corpus: "c0".into(),
            }
            .hash()
        };
        let base = id(&cfg, None);
        let paced = QaConfig {
            concurrency: 9,
            breaker_after: 1,
            ..cfg.clone()
        };
        assert_eq!(id(&paced, None), base, "pacing decides nothing");
        let seeded = QaConfig {
            seed: 3,
            max_documents: Some(2),
            ..cfg.clone()
        };
        assert_ne!(id(&seeded, None), base);
        assert_ne!(id(&cfg, Some("local:m")), base);

        let m = manifest(&cfg, base.clone());
        let now = RunIdentity {
            cfg: &seeded,
            prompts: &p,
            generator: "gen2".into(),
            target: Some("local:m".into()),
            judge: "offline:token-f1>=0.5".into(),
            corpus: "c1".into(),
        };
        assert_eq!(
            now.changes_since(&m),
            [
                "max_documents: unset → 2",
                "seed: 0 → 3",
                "generator: gen → gen2",
                "model asked closed-book: none → local:m",
                "judge: offline:exact-match → offline:token-f1>=0.5",
                "the corpus's documents (c: sha256 c0 → c1)",
            ]
        );
        let same = RunIdentity {
            cfg: &cfg,
            prompts: &p,
            generator: "gen".into(),
            target: None,
            judge: "offline:exact-match".into(),
            corpus: "c0".into(),
        };
        // A manifest from before corpora were fingerprinted: the corpus is named.
        let old = QaManifest {
            corpus_sha256: None,
            ..manifest(&cfg, base.clone())
        };
        assert!(same.changes_since(&old)[0].contains("not recorded"));
        // Only the prompts can differ then.
        assert!(same.changes_since(&m)[0].starts_with("the prompts"));

        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("facts.jsonl");
        assert!(matches!(
            freshness(&out, &same).unwrap(),
            Freshness::Missing
        ));
        std::fs::write(&out, "{}\n").unwrap();
        assert!(matches!(
            freshness(&out, &same).unwrap(),
            Freshness::Foreign
        ));
        std::fs::create_dir_all(run_dir(&out)).unwrap();
        let write = |m: &QaManifest| {
            std::fs::write(
                run_dir(&out).join("manifest.json"),
                serde_json::to_vec(m).unwrap(),
            )
            .unwrap()
        };
        write(&m);
        assert!(matches!(
            freshness(&out, &same).unwrap(),
            Freshness::Fresh(_)
        ));
        assert!(matches!(freshness(&out, &now).unwrap(), Freshness::Stale(c) if c.len() == 6));
        write(&QaManifest {
            complete: false,
            ..m.clone()
        });
        assert!(matches!(
            freshness(&out, &now).unwrap(),
            Freshness::Unfinished
        ));
        std::fs::write(run_dir(&out).join("manifest.json"), "garbage").unwrap();
        let e = freshness(&out, &same).unwrap_err().to_string();
        assert!(
            e.contains("manifest.json") && e.contains("not a QA manifest"),
            "{e}"
        );
    }
}
