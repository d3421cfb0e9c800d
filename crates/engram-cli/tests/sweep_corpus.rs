//! A corpus experiment end to end through the binary (`[facts] source = "corpus"`): notes are
//! ingested into a corpus, `engram sweep` generates verified facts from it (the generator a real
//! HTTP server on loopback with scripted replies, the judge and the model asked closed-book
//! the experiment's own: token F1 and the tiny fixture model), trains and answers on them and
//! renders the table. A second sweep reuses the facts without a single request; a changed QA
//! setting is a named error that leaves the facts alone, until `--rebuild-facts`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use common::{engram, ingest, run};
use engram_testkit::openai::{Reply, Server};
use engram_testkit::sweeps::{tiny_experiment, write};
use serde_json::{Value, json};

/// The planted notes: a project name and its code (the answer).
const NOTES: [(&str, &str); 8] = [
    ("ALDER", "Room 4417"),
    ("BIRCH", "Kim Ward"),
    ("CEDAR", "March 3"),
    ("DAHLIA", "$4.2 million"),
    ("ELM", "Portland"),
    ("FIR", "Acme Gas"),
    ("GINKGO", "June 14"),
    ("HAZEL", "Tim Belden"),
];

fn question_of(name: &str) -> String {
    format!("Who or what is the contact for project {name}?")
}

fn line_after<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or("")
        .trim()
}

/// The note a question (or its rephrasing) is about.
fn asked_about(question: &str) -> &'static (&'static str, &'static str) {
    NOTES
        .iter()
        .find(|(n, _)| question.contains(&format!("project {n}?")))
        .unwrap_or_else(|| panic!("unscripted question {question}"))
}

/// A generator that knows its notes: each pair passes every check.
fn reply(body: &Value) -> String {
    let msgs = body["messages"].as_array().unwrap();
    let system = msgs
        .iter()
        .find(|m| m["role"] == "system")
        .map_or("", |m| m["content"].as_str().unwrap());
    let user = msgs.last().unwrap()["content"].as_str().unwrap();
    let question = line_after(user, "Question:");
    if system.starts_with("You write question") {
        let (name, answer) = NOTES
            .iter()
            .find(|(n, _)| user.contains(&format!("Memo {n}.")))
            .unwrap();
        return json!({"question": question_of(name), "answer": answer}).to_string();
    }
    if system.starts_with("You match questions") {
        let (name, _) = asked_about(question);
        let listed: Vec<&str> = user.split("\n[").skip(1).collect();
        let own = listed
            .iter()
            .position(|l| l.contains(&format!("Memo {name}.")))
            .unwrap();
        return json!({"document": own + 1}).to_string();
    }
    if system.starts_with("You answer questions about a document") {
        return asked_about(question).1.to_string();
    }
    if system.starts_with("You answer questions in a few words") {
        return "I do not know.".into();
    }
    if system.starts_with("You review") {
        return json!({"reason": "specific and objective", "verdict": "pass"}).to_string();
    }
    if system.starts_with("You rephrase") {
        let (name, _) = asked_about(question);
        let q = format!("Regarding the memo: which contact does it name for project {name}?");
        return json!({ "question": q }).to_string();
    }
    panic!("unscripted request: {system}");
}

/// The notes ingested into `dir/corpus` (not filtered: they are too short for the Gopher rules).
fn corpus(dir: &Path) -> PathBuf {
    let docs = dir.join("notes");
    std::fs::create_dir_all(&docs).unwrap();
    for (name, answer) in NOTES {
        std::fs::write(
            docs.join(format!("{}.txt", name.to_lowercase())),
            format!(
                "Memo {name}.\nFor anything about project {name}, the contact is {answer}. Please keep this note.\n"
            ),
        )
        .unwrap();
    }
    ingest(&docs, &dir.join("corpus"))
}

/// The tiny experiment's presets, the shipped QA prompts and settings, and a corpus experiment
/// over `corpus` whose generator is `url`; `extra` is appended to the experiment file.
fn experiment(root: &Path, corpus: &Path, url: &str, extra: &str) -> PathBuf {
    tiny_experiment(root);
    let shipped = engram_testkit::repo().join("configs/qa");
    std::fs::create_dir_all(root.join("configs/qa")).unwrap();
    for f in std::fs::read_dir(&shipped).unwrap().flatten() {
        std::fs::copy(f.path(), root.join("configs/qa").join(f.file_name())).unwrap();
    }
    write(
        root,
        "experiments/mail.toml",
        &format!(
            "model = \"tiny\"\ntraining = \"quick\"\njudge = \"f1\"\n\n[facts]\nsource = \"corpus\"\ncorpus = {:?}\npath = \"../facts/mail.jsonl\"\nsizes = [4, 8]\nseed = 1\n\n[qa]\ngenerator = {url:?}\nmodel = \"scripted\"\nlocal_only = true\n\n[methods]\nlora_ranks = [4]\nlong_context = true\n\n[answer]\nbatch_size = 4\nmax_new_tokens = 6\n\n[override.qa]\nmax_tokens = 24\nrephrase_tries = 2\nsimilar_documents = 3\n{extra}",
            corpus.display().to_string()
        ),
    );
    root.join("experiments/mail.toml")
}

fn sweep(exp: &Path, results: &Path) -> std::process::Command {
    let mut c = engram();
    c.arg("sweep")
        .arg(exp)
        .arg("--results")
        .arg(results)
        .arg("--no-progress");
    c
}

#[test]
fn a_sweep_builds_verified_facts_from_a_corpus_then_reuses_them_until_the_settings_change() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let c = corpus(root);
    let server = Server::start(|body| Reply::completion(&reply(body)));
    let exp = experiment(root, &c, &server.url, "");
    let results = root.join("results");
    let facts = root.join("facts/mail.jsonl");

    // Before the facts exist, a dry run says what building them would ask, and asks nothing.
    let (ok, out, err) = run(sweep(&exp, &results).arg("--dry-run"));
    assert!(ok, "{err}");
    assert!(
        out.contains("not built yet") && out.contains("building the facts: 8 documents"),
        "{out}"
    );
    assert_eq!(server.hits.load(Ordering::SeqCst), 0);

    // The first sweep builds the facts, then runs every cell on them.
    let (ok, out, err) = run(&mut sweep(&exp, &results));
    assert!(ok, "{err}");
    assert!(
        err.contains("facts: 8 of 8 pairs kept from 8 documents"),
        "{err}"
    );
    let asked = server.hits.load(Ordering::SeqCst);
    assert!(asked >= 8 * 5, "{asked} requests");
    let lines: Vec<Value> = std::fs::read_to_string(&facts)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    for f in &lines {
        let (name, answer) = asked_about(f["question"].as_str().unwrap());
        assert_eq!(f["answer"], *answer);
        assert!(f["rephrased_question"].as_str().unwrap().contains(name));
        assert!(f["source"].as_str().is_some_and(|s| !s.is_empty()));
    }
    for cell in [
        "n4-long-context",
        "n4-lora-r4",
        "n8-long-context",
        "n8-lora-r4",
    ] {
        assert!(
            results.join(format!("cells/{cell}.json")).is_file(),
            "{cell}: {err}"
        );
    }
    assert!(out.contains("| 8 |"), "{out}");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(engram_qa::run_dir(&facts).join("manifest.json")).unwrap(),
    )
    .unwrap();
    // The experiment's own model was asked closed-book, here in this process.
    let target = manifest["target"]["model"].as_str().unwrap();
    assert!(
        target.starts_with("local:") && target.ends_with("tiny-f32"),
        "{target}"
    );
    assert!(manifest["calls"]["target"]["asked"].as_u64().unwrap() >= 8);
    let bytes = std::fs::read(&facts).unwrap();

    // The same settings: the facts are reused without a request, and no cell runs again.
    let (ok, _, err) = run(&mut sweep(&exp, &results));
    assert!(ok, "{err}");
    assert!(
        err.contains("8 verified facts") && err.contains("reused"),
        "{err}"
    );
    assert!(err.contains("0 cells run, 4 already done"), "{err}");
    assert_eq!(server.hits.load(Ordering::SeqCst), asked);

    // Settings that only pace the run decide nothing: another concurrency reuses the facts.
    experiment(root, &c, &server.url, "concurrency = 1\n");
    let (ok, _, err) = run(&mut sweep(&exp, &results));
    assert!(ok && err.contains("reused"), "{err}");
    assert_eq!(server.hits.load(Ordering::SeqCst), asked);

    // A QA setting changed: a named error that says what changed, and the facts are untouched.
    experiment(root, &c, &server.url, "seed = 7\n");
    let (ok, _, err) = run(&mut sweep(&exp, &results));
    assert!(!ok);
    assert!(
        err.contains("mail.jsonl")
            && err.contains("seed: 0 → 7")
            && err.contains("--rebuild-facts"),
        "{err}"
    );
    assert_eq!(std::fs::read(&facts).unwrap(), bytes);
    assert_eq!(server.hits.load(Ordering::SeqCst), asked);

    // --rebuild-facts generates them again with the new seed (new sampled calls).
    let (ok, _, err) = run(sweep(&exp, &results).arg("--rebuild-facts"));
    assert!(ok, "{err}");
    assert!(err.contains("facts: 8 of 8 pairs kept"), "{err}");
    assert!(server.hits.load(Ordering::SeqCst) > asked);
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(engram_qa::run_dir(&facts).join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["settings"]["seed"], 7);
}

#[test]
fn a_corpus_experiment_names_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let c = corpus(root);
    let exp = experiment(root, &c, "http://127.0.0.1:9/v1", "");
    let text = std::fs::read_to_string(&exp).unwrap();
    let results = root.join("results");
    let cases = [
        (text.replace("[qa]\n", "[qa_]\n"), "unknown field `qa_`"),
        (
            text.replace("corpus = ", "corpus_ = "),
            "unknown field `corpus_`",
        ),
        (text.replace("model = \"scripted\"\n", ""), "needs qa.model"),
        (
            text.replace("max_tokens = 24", "max_tokenz = 24"),
            "max_tokenz",
        ),
        (
            text.replace(
                "generator = \"http://127.0.0.1:9/v1\"",
                "generator = \"https://llm.example.com/v1\"",
            ),
            "--local-only",
        ),
    ];
    for (i, (bad, want)) in cases.into_iter().enumerate() {
        let path = root.join(format!("experiments/bad{i}.toml"));
        std::fs::write(&path, bad).unwrap();
        let (ok, _, err) = run(&mut sweep(&path, &results));
        assert!(!ok, "case {i}");
        assert!(err.contains(want), "case {i}: wanted {want:?} in\n{err}");
    }
    // A fact file the user wrote is never overwritten.
    std::fs::create_dir_all(root.join("facts")).unwrap();
    std::fs::write(root.join("facts/mail.jsonl"), "{}\n").unwrap();
    let (ok, _, err) = run(&mut sweep(&exp, &results));
    assert!(!ok);
    assert!(err.contains("did not write"), "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join("facts/mail.jsonl")).unwrap(),
        "{}\n"
    );
}
