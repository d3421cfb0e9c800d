//! The 600 real Enron messages of `../shared/data/enron-emails/`: read and filtered with the
//! paper's settings, the counts per kind, reason and rule match the committed golden manifest
//! (`tests/fixtures/corpus/enron-600.json`; `ENGRAM_BLESS=1` rewrites it after a deliberate
//! change); every drop is checked against its own definition by code independent of the
//! filter's (exact texts, a brute-force Jaccard over word 5-grams, the container's text);
//! MinHash LSH is measured against a brute-force all-pairs Jaccard; and the decisions are the
//! same on one thread as on two.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use engram_corpus::comparable;
use engram_corpus::{Document, FilterConfig, filter, ingest};
use engram_corpus::{Hasher, NearDupConfig, candidates, shingles};
use engram_io::Quiet;
use serde_json::json;

fn shared() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/enron-emails/maildir");
    p.is_dir().then_some(p)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Word 5-grams as strings, the brute-force way.
fn grams(text: &str) -> HashSet<String> {
    let w: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if w.len() <= 5 {
        return HashSet::from([w.join(" ")]);
    }
    w.windows(5).map(|g| g.join(" ")).collect()
}

fn brute_jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    a.intersection(b).count() as f64 / a.union(b).count() as f64
}

fn read() -> Option<Vec<Document>> {
    let Some(dir) = shared() else {
        eprintln!("SKIPPED: ../shared/data/enron-emails/maildir is absent");
        return None;
    };
    Some(ingest(&[dir], &Quiet).unwrap().documents)
}

#[test]
fn the_600_messages_give_the_golden_counts_and_every_drop_is_what_it_says() {
    let Some(dir) = shared() else {
        eprintln!("SKIPPED: ../shared/data/enron-emails/maildir is absent");
        return;
    };
    let got = ingest(&[dir], &Quiet).unwrap();
    let docs = &got.documents;
    let report = filter(docs, &FilterConfig::default(), &Quiet).unwrap();
    let mut by_reason = BTreeMap::<String, usize>::new();
    for u in &got.unreadable {
        *by_reason.entry(u.reason.clone()).or_default() += 1;
    }
    let counts = json!({
        "files": got.files,
        "documents": docs.len(),
        "unreadable_by_reason": by_reason,
        "kept": report.kept().len(),
        "dropped_by_rule": report.dropped_by_rule,
    });
    let golden = repo().join("tests/fixtures/corpus/enron-600.json");
    if std::env::var_os("ENGRAM_BLESS").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(
            &golden,
            serde_json::to_string_pretty(&counts).unwrap() + "\n",
        )
        .unwrap();
    }
    let want: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&golden).unwrap()).unwrap();
    assert_eq!(
        counts, want,
        "counts changed (ENGRAM_BLESS=1 rewrites the golden file)"
    );

    let by_id: BTreeMap<&str, &Document> = docs.iter().map(|d| (d.id.as_str(), d)).collect();
    let other = |detail: &str| -> &Document {
        let id = detail
            .split_whitespace()
            .find(|w| w.starts_with('d') && w.len() == 17)
            .unwrap_or_else(|| panic!("no document named in {detail:?}"));
        by_id[id]
    };
    let mut checked = BTreeMap::<String, usize>::new();
    for (d, dec) in docs.iter().zip(&report.decisions) {
        let (Some(rule), Some(detail)) = (&dec.rule, &dec.detail) else {
            continue;
        };
        match rule.as_str() {
            "exact-duplicate" => assert_eq!(d.text, other(detail).text),
            "near-duplicate" => {
                let j = brute_jaccard(&grams(&d.text), &grams(&other(detail).text));
                assert!(j >= 0.9, "{} ~ {detail}: Jaccard {j}", d.id);
                eprintln!(
                    "near-duplicate pair: {} {detail} (brute force {j:.3})",
                    d.id
                );
            }
            "quoted-subset" => {
                let c = other(detail);
                assert!(
                    comparable(&c.text).contains(&comparable(&d.text)),
                    "{} in {}",
                    d.id,
                    c.id
                );
                assert!(c.text.len() > d.text.len());
            }
            _ => {}
        }
        *checked.entry(rule.clone()).or_default() += 1;
    }
    eprintln!("drops checked by rule: {checked:?}");
}

#[test]
fn minhash_lsh_finds_the_pairs_a_brute_force_jaccard_finds() {
    let Some(mut docs) = read() else { return };
    // The messages, and for each long one a copy with a short footer added: near-duplicates of
    // known similarity, as a mail archive holds them (the same message signed differently).
    let originals = docs.len();
    for i in 0..originals {
        if docs[i].text.split_whitespace().count() >= 150 {
            let mut copy = docs[i].clone();
            copy.id = format!("{}-footer", copy.id);
            copy.text
                .push_str("\n\nSent from the trading floor; please do not forward.");
            docs.push(copy);
        }
    }
    let cfg = NearDupConfig::default();
    let sets: Vec<HashSet<String>> = docs.iter().map(|d| grams(&d.text)).collect();
    let hasher = Hasher::new(&cfg);
    let sigs: Vec<Vec<u64>> = docs
        .iter()
        .map(|d| hasher.signature(&shingles(&d.text, &cfg)))
        .collect();
    let cand: HashSet<(usize, usize)> = candidates(&sigs, &cfg).into_iter().collect();
    let (mut near, mut found) = (0, 0);
    let mut below = 0;
    for a in 0..docs.len() {
        for b in a + 1..docs.len() {
            let j = brute_jaccard(&sets[a], &sets[b]);
            let c = cand.contains(&(a, b));
            if j >= cfg.jaccard {
                near += 1;
                found += c as usize;
            } else if c {
                below += 1;
            }
        }
    }
    let recall = found as f64 / near as f64;
    let fp = below as f64 / cand.len().max(1) as f64;
    eprintln!(
        "{} documents: {near} pairs with Jaccard ≥ {} (brute force), {found} of them LSH candidates (recall {recall:.3}); {} candidates, {below} below the threshold ({:.3} of candidates, each rejected by the exact check)",
        docs.len(),
        cfg.jaccard,
        cand.len(),
        fp
    );
    assert!(near >= 100, "too few near pairs to measure: {near}");
    assert!(recall >= 0.9, "recall {recall:.3}");
}

#[test]
fn decisions_are_the_same_on_one_thread_and_on_two() {
    let Some(docs) = read() else { return };
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                filter(&docs, &FilterConfig::default(), &Quiet)
                    .unwrap()
                    .decisions
            })
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(1));
}
