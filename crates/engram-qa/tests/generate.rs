//! QA generation end to end against a real HTTP server on loopback whose replies are scripted
//! per request (the shipped prompts, the shipped LLM-judge prompt): a pair for each way a pair
//! can end — kept, kept after a refinement, dropped by each check, by malformed replies, by an
//! unverified rephrasing, as a duplicate — with 429s, 500s, a garbled response body and a
//! timeout along the way. A rerun asks nothing and writes the same bytes; a run killed by a
//! dead endpoint resumes without asking any answered call again and ends as a clean run does;
//! `--local-only` refuses a remote endpoint before anything is sent; the API key reaches the
//! server and no file.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engram_corpus::{Corpus, ingest};
use engram_io::{Quiet, Stop};
use engram_judge::ClientConfig;
use engram_judge::JudgeCache;
use engram_judge::{JudgePrompt, OpenAiJudge, OpenAiJudgeConfig};
use engram_qa::{
    ChatRequest, Completion, Llm, OpenAiLlm, PairRecord, QaConfig, QaError, QaPrompts, QaSpec,
    generate_facts, run_dir,
};
use engram_testkit::openai::{Reply, Server};
use serde_json::{Value, json};

const KEY_VAR: &str = "ENGRAM_QA_TEST_KEY";
const KEY: &str = "sk-test-0123456789-secret";

/// One planted document: its marker, the pair the generator writes for it, and how it ends.
struct Planted {
    name: &'static str,
    question: &'static str,
    answer: &'static str,
    end: &'static str,
}

const PLANTED: [Planted; 10] = [
    Planted {
        name: "ALPHA",
        question: "When is the ALPHA pipeline review?",
        answer: "March 3",
        end: "kept",
    },
    Planted {
        name: "BRAVO",
        question: "Who wrote the BRAVO memo?",
        answer: "Kim Ward",
        end: "specific",
    },
    Planted {
        name: "CHARLIE",
        question: "What is the CHARLIE budget?",
        answer: "$4 million",
        end: "objective",
    },
    Planted {
        name: "DELTA",
        question: "What is the capital of France, per the DELTA memo?",
        answer: "Paris",
        end: "grounded",
    },
    Planted {
        name: "ECHO",
        question: "What does ECHO say?",
        answer: "things",
        end: "quality",
    },
    Planted {
        name: "FOXTROT",
        question: "",
        answer: "",
        end: "malformed",
    },
    Planted {
        name: "GOLF",
        question: "Which room hosts the GOLF offsite?",
        answer: "Room 12",
        end: "kept",
    },
    Planted {
        name: "HOTEL",
        question: "Which vendor won the HOTEL bid?",
        answer: "Acme Corp",
        end: "rephrase-unverified",
    },
    Planted {
        name: "INDIA",
        question: "when is the  ALPHA pipeline review",
        answer: "March 3",
        end: "duplicate-question",
    },
    Planted {
        name: "JULIET",
        question: "Who chairs the JULIET board?",
        answer: "Ann Lee",
        end: "grounded-target",
    },
];

/// GOLF's first pair, failed by the rubric and then refined into the planted one.
const GOLF_FIRST: (&str, &str) = ("What is in GOLF?", "a thing");
const REPHRASED: &str = "In other words, ";

fn planted(name: &str) -> &'static Planted {
    PLANTED.iter().find(|p| p.name == name).unwrap()
}

/// The planted document a text is about (its `Memo NAME.` marker).
fn about(text: &str) -> Option<&'static Planted> {
    PLANTED
        .iter()
        .find(|p| text.contains(&format!("Memo {}.", p.name)))
}

/// Whose question this is (the rephrasing marker aside).
fn asker(question: &str) -> Option<&'static Planted> {
    let q = question.strip_prefix(REPHRASED).unwrap_or(question);
    if q == GOLF_FIRST.0 {
        return Some(planted("GOLF"));
    }
    PLANTED
        .iter()
        .find(|p| !p.question.is_empty() && p.question == q)
}

fn line_after<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or("")
        .trim()
}

fn pair(q: &str, a: &str) -> String {
    json!({"question": q, "answer": a}).to_string()
}

/// What the scripted LLM (and judge) answers to a request's messages.
fn content(body: &Value) -> String {
    let msgs = body["messages"].as_array().unwrap();
    let system = msgs
        .iter()
        .find(|m| m["role"] == "system")
        .map_or("", |m| m["content"].as_str().unwrap());
    let user = msgs.last().unwrap()["content"].as_str().unwrap();
    let question = line_after(user, "Question:");
    if user.contains("Candidate answer:") {
        let same = line_after(user, "Gold answer:").to_lowercase()
            == line_after(user, "Candidate answer:").to_lowercase();
        let verdict = if same { "correct" } else { "incorrect" };
        return json!({"reason": "compared", "verdict": verdict}).to_string();
    }
    if system.starts_with("You write question") {
        let doc = about(user).unwrap();
        return match doc.name {
            "FOXTROT" => "Here is a great question about the memo!".into(),
            "GOLF" if !user.contains("failed a check") => pair(GOLF_FIRST.0, GOLF_FIRST.1),
            _ => pair(doc.question, doc.answer),
        };
    }
    if system.starts_with("You match questions") {
        let owner = asker(question).unwrap();
        let listed: Vec<&str> = user.split("\n[").skip(1).collect();
        let own = listed
            .iter()
            .position(|l| l.contains(&format!("Memo {}.", owner.name)))
            .unwrap()
            + 1;
        let pick = if owner.name == "BRAVO" {
            own % listed.len() + 1
        } else {
            own
        };
        return json!({"document": pick}).to_string();
    }
    if system.starts_with("You answer questions about a document") {
        let doc = about(user).unwrap();
        if doc.name == "CHARLIE" {
            // Each independent answer (its own seed) differs from the gold answer.
            return format!("$4.{} million", body["seed"].as_u64().unwrap());
        }
        if doc.name == "HOTEL" && question.starts_with(REPHRASED) {
            return "Nobody".into();
        }
        if question == GOLF_FIRST.0 {
            return GOLF_FIRST.1.into();
        }
        return asker(question).unwrap().answer.into();
    }
    if system.starts_with("You answer questions in a few words") {
        return if question.contains("DELTA") {
            "Paris"
        } else {
            "I do not know."
        }
        .into();
    }
    if system.starts_with("You review") {
        let fail = question.contains("ECHO") || question == GOLF_FIRST.0;
        let verdict = if fail { "fail" } else { "pass" };
        return json!({"reason": "rubric", "verdict": verdict}).to_string();
    }
    if system.starts_with("You rephrase") {
        return json!({"question": format!("{REPHRASED}{question}")}).to_string();
    }
    panic!("unscripted request: {system} / {user}");
}

/// A scripted server: the replies above, with a 429, a 500, a garbled body and a timeout the
/// first time certain requests arrive; `fail_after`: every request after that many answered
/// ones gets a 500 (a dead endpoint). `answered` collects the bodies that got a 200.
fn server(fail_after: Option<usize>, answered: Arc<Mutex<Vec<String>>>) -> Server {
    let seen: Mutex<HashSet<String>> = Mutex::new(HashSet::new());
    Server::start(move |body| {
        let key = body.to_string();
        let first = seen.lock().unwrap().insert(key.clone());
        if let Some(n) = fail_after
            && answered.lock().unwrap().len() >= n
        {
            return Reply::status(500, "down");
        }
        let text = content(body);
        if first {
            let user = body.to_string();
            if user.contains("Memo BRAVO.") && user.contains("You write question") {
                let mut r = Reply::status(429, "slow down");
                r.headers.push("Retry-After: 0".into());
                return r;
            }
            if user.contains("Memo CHARLIE.") && user.contains("You write question") {
                return Reply::status(500, "oops");
            }
            if user.contains("Memo GOLF.") && user.contains("You write question") {
                return Reply::status(200, "{not json");
            }
            if user.contains("Memo ECHO.") && user.contains("You write question") {
                // Past the client's timeout: the client never reads this reply.
                std::thread::sleep(Duration::from_millis(1500));
                return Reply::completion(&text);
            }
        }
        answered.lock().unwrap().push(key);
        Reply::completion(&text)
    })
}

/// The model to train: it knows JULIET's answer, nothing else.
struct Target;

impl Llm for Target {
    fn model(&self) -> String {
        "local:scripted-target".into()
    }
    fn endpoint(&self) -> String {
        self.model()
    }
    fn is_local(&self) -> bool {
        true
    }
    fn complete(&self, req: &ChatRequest) -> Result<Completion, String> {
        let user = &req.messages.last().unwrap().content;
        let text = if user.contains("JULIET") {
            "Ann Lee"
        } else {
            "No idea."
        };
        Ok(Completion {
            text: text.into(),
            prompt_tokens: 10,
            completion_tokens: 2,
        })
    }
}

fn corpus(dir: &Path) -> PathBuf {
    let notes: Vec<(&str, &str)> = PLANTED.iter().map(|p| (p.name, p.answer)).collect();
    corpus_of(dir, &notes)
}

/// A corpus of one note per `(name, answer)`.
fn corpus_of(dir: &Path, notes: &[(&str, &str)]) -> PathBuf {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (name, answer) in notes {
        let text = format!(
            "Memo {name}.\nThis note is about {name} and what the team decided: {answer} is the answer to the question people asked.\n"
        );
        std::fs::write(docs.join(format!("{}.txt", name.to_lowercase())), text).unwrap();
    }
    let got = ingest(std::slice::from_ref(&docs), &Quiet).unwrap();
    let out = dir.join("corpus");
    Corpus::at(&out).write_ingested(&[docs], &got).unwrap();
    out
}

fn settings() -> QaConfig {
    QaConfig {
        rephrase_tries: 3,
        concurrency: 3,
        ..QaConfig::default()
    }
}

fn prompts() -> QaPrompts {
    QaPrompts::load(&engram_testkit::repo().join("configs/qa")).unwrap()
}

/// Runs generation into `out` against `url`; returns the result and the HTTP requests sent by
/// the generator and the judge.
fn run(corpus: &Path, out: &Path, url: &str) -> (Result<engram_qa::QaSummary, QaError>, usize) {
    // SAFETY: set before any thread of this test reads the environment; every test sets the
    // same value.
    unsafe { std::env::set_var(KEY_VAR, KEY) };
    let mut client = ClientConfig::new(url);
    client.api_key_env = Some(KEY_VAR.into());
    client.timeout = Duration::from_secs(1);
    client.backoff = Duration::from_millis(10);
    client.max_retries = 3;
    let generator = OpenAiLlm::new(client, "scripted-generator").unwrap();
    let mut jc = OpenAiJudgeConfig::new(url, "scripted-judge");
    jc.client.api_key_env = Some(KEY_VAR.into());
    jc.client.backoff = Duration::from_millis(10);
    jc.client.max_retries = 3;
    let prompt =
        JudgePrompt::load(&engram_testkit::repo().join("configs/judges/enronqa-judge.txt"))
            .unwrap();
    let cache = JudgeCache::open_shared(&run_dir(out).join("judge-cache")).unwrap();
    let judge = OpenAiJudge::new(jc, prompt, cache).unwrap();
    let cfg = settings();
    let prompts = prompts();
    let spec = QaSpec {
        corpus,
        out,
        cfg: &cfg,
        prompts: &prompts,
        generator: &generator,
        target: Some(&Target),
        judge: &judge,
        judge_endpoint: Some(url.into()),
        local_only: true,
    };
    let r = generate_facts(&spec, &Stop::new(), &Quiet);
    (r, generator.requests() + judge.requests())
}

/// Each document id's planted name.
fn doc_names(corpus: &Path) -> BTreeMap<String, &'static str> {
    Corpus::at(corpus)
        .documents()
        .unwrap()
        .iter()
        .map(|d| (d.id.clone(), about(&d.text).unwrap().name))
        .collect()
}

fn records(out: &Path) -> Vec<PairRecord> {
    std::fs::read_to_string(run_dir(out).join("checks.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn each_pair_ends_as_planted_and_a_rerun_asks_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let answered = Arc::new(Mutex::new(Vec::new()));
    let srv = server(None, answered.clone());
    let out = tmp.path().join("facts.jsonl");
    let (r, requests) = run(&corpus, &out, &srv.url);
    let summary = r.unwrap();

    // Every pair slot ends as planted, with its reason.
    let recs = records(&out);
    let names = doc_names(&corpus);
    let ends: BTreeMap<&str, String> = recs
        .iter()
        .map(|r| {
            let end = if r.kept() {
                "kept".to_string()
            } else {
                r.reason.clone().unwrap()
            };
            (names[&r.document], end)
        })
        .collect();
    for p in &PLANTED {
        assert_eq!(
            ends.get(p.name).map(String::as_str),
            Some(p.end),
            "{}: {ends:?}",
            p.name
        );
    }
    let m = &summary.manifest;
    assert_eq!((m.pairs, m.kept, m.complete), (10, 2, true));
    assert_eq!(m.dropped_by_reason.values().sum::<usize>(), 8);

    // The records say what happened: GOLF refined once; the failures' details.
    let golf = recs
        .iter()
        .find(|r| {
            r.rounds
                .iter()
                .any(|x| x.question.as_deref() == Some(GOLF_FIRST.0))
        })
        .unwrap();
    assert_eq!(golf.rounds.len(), 2);
    assert_eq!(golf.rounds[0].failed().unwrap().check, "quality");
    let bravo = recs
        .iter()
        .find(|r| r.reason.as_deref() == Some("specific"))
        .unwrap();
    assert_eq!(bravo.rounds.len(), 3, "generation and two refinements");
    assert!(
        bravo.rounds[0]
            .failed()
            .unwrap()
            .detail
            .contains("instead of its own")
    );
    let charlie = recs
        .iter()
        .find(|r| r.reason.as_deref() == Some("objective"))
        .unwrap();
    assert!(
        charlie.rounds[0].failed().unwrap().detail.contains("\"$4."),
        "{charlie:?}"
    );
    let hotel = recs
        .iter()
        .find(|r| r.reason.as_deref() == Some("rephrase-unverified"))
        .unwrap();
    assert_eq!(hotel.rephrasings.len(), 3);

    // The fact file: engram's fact JSONL, the rephrasing verified, the source named.
    let facts = engram_facts::read_facts(&out).unwrap();
    assert_eq!(facts.len(), 2);
    let alpha = facts.iter().find(|f| f.answer == "March 3").unwrap();
    assert_eq!(alpha.question, planted("ALPHA").question);
    assert_eq!(
        alpha.rephrased_question,
        format!("{REPHRASED}{}", alpha.question)
    );
    assert!(alpha.source.as_deref().unwrap().starts_with('d'));

    // The key went to the server in the Authorization header, and into no file.
    assert!(srv.auth.lock().unwrap().iter().all(|a| a.ends_with(KEY)));
    for f in files_under(tmp.path()) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "{}",
            f.display()
        );
    }
    // The send log names each document's text sent to the endpoint (the target is local and
    // sees no document).
    let sent = std::fs::read_to_string(run_dir(&out).join("sent.jsonl")).unwrap();
    assert_eq!(sent.lines().count(), 10, "{sent}");
    assert!(sent.lines().all(|l| l.contains(&srv.url)));

    // A rerun asks nothing and writes the same bytes.
    let facts_bytes = std::fs::read(&out).unwrap();
    let checks_bytes = std::fs::read(run_dir(&out).join("checks.jsonl")).unwrap();
    let before = srv.requests().len();
    let (again, requests_again) = run(&corpus, &out, &srv.url);
    let again = again.unwrap();
    assert_eq!(requests_again, 0);
    assert_eq!(srv.requests().len(), before);
    assert!(requests > 0);
    assert_eq!(std::fs::read(&out).unwrap(), facts_bytes);
    assert_eq!(
        std::fs::read(run_dir(&out).join("checks.jsonl")).unwrap(),
        checks_bytes
    );
    let g = &again.manifest.calls["generator"];
    assert_eq!(g.asked, 0);
    assert_eq!(again.manifest.judged, again.manifest.judged_cached);
}

#[test]
fn a_run_stopped_by_a_dead_endpoint_resumes_without_asking_again() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    // A clean run, for reference.
    let clean_out = tmp.path().join("clean.jsonl");
    let clean_srv = server(None, Arc::default());
    run(&corpus, &clean_out, &clean_srv.url).0.unwrap();

    // The endpoint dies after 40 answered requests.
    let answered = Arc::new(Mutex::new(Vec::new()));
    let dying = server(Some(40), answered.clone());
    let out = tmp.path().join("facts.jsonl");
    let e = run(&corpus, &out, &dying.url).0.unwrap_err();
    // The breaker's error, or — where the endpoint died among the last documents, fewer in a
    // row than its limit — the first document left, with its call's error.
    assert!(
        matches!(e, QaError::Unreachable { .. } | QaError::CallsFailed { .. }),
        "{e}"
    );
    let msg = e.to_string();
    assert!(msg.contains("rerun") && msg.contains("cached"), "{msg}");
    assert!(!out.exists(), "no fact file from an unfinished run");
    let m: Value =
        serde_json::from_slice(&std::fs::read(run_dir(&out).join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["complete"], false);
    let first_run: HashSet<String> = answered.lock().unwrap().iter().cloned().collect();
    // (Identical judge requests in flight at once are both answered, so fewer distinct.)
    assert!((30..=40).contains(&first_run.len()), "{}", first_run.len());
    let m_calls = m["calls"]["generator"]["asked"].as_u64().unwrap();
    assert!(m_calls > 0, "{m}");

    // Rerun against a live endpoint: nothing answered before is asked again, and the result
    // is the clean run's, byte for byte.
    let again = Arc::new(Mutex::new(Vec::new()));
    let live = server(None, again.clone());
    run(&corpus, &out, &live.url).0.unwrap();
    let repeated = again
        .lock()
        .unwrap()
        .iter()
        .filter(|b| first_run.contains(*b))
        .count();
    assert_eq!(repeated, 0);
    assert!(!again.lock().unwrap().is_empty());
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&clean_out).unwrap()
    );
    assert_eq!(
        std::fs::read(run_dir(&out).join("checks.jsonl")).unwrap(),
        std::fs::read(run_dir(&clean_out).join("checks.jsonl")).unwrap()
    );
}

#[test]
fn local_only_refuses_a_remote_endpoint_before_sending_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let out = tmp.path().join("facts.jsonl");
    let cfg = settings();
    let prompts = prompts();
    let remote = OpenAiLlm::new(ClientConfig::new("https://llm.example.com/v1"), "m").unwrap();
    let judge = engram_judge::ExactMatchJudge;
    let mut spec = QaSpec {
        corpus: &corpus,
        out: &out,
        cfg: &cfg,
        prompts: &prompts,
        generator: &remote,
        target: None,
        judge: &judge,
        judge_endpoint: None,
        local_only: true,
    };
    let e = generate_facts(&spec, &Stop::new(), &Quiet)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--local-only") && e.contains("llm.example.com") && e.contains("generator"),
        "{e}"
    );
    assert_eq!(remote.requests(), 0);
    assert!(!run_dir(&out).exists());

    let local = OpenAiLlm::new(ClientConfig::new("http://127.0.0.1:9/v1"), "m").unwrap();
    spec.generator = &local;
    spec.judge_endpoint = Some("http://10.1.2.3:8000/v1".into());
    let e = generate_facts(&spec, &Stop::new(), &Quiet)
        .unwrap_err()
        .to_string();
    assert!(e.contains("judge") && e.contains("10.1.2.3"), "{e}");
    assert_eq!(local.requests(), 0);
}

#[test]
fn shipped_settings_and_prompts_load() {
    let repo = engram_testkit::repo();
    assert_eq!(
        QaConfig::from_file(&repo.join("configs/qa/default.toml")).unwrap(),
        QaConfig::default(),
        "configs/qa/default.toml states the defaults"
    );
    prompts();
    // A prompt without a placeholder its stage fills is named.
    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(repo.join("configs/qa")).unwrap() {
        let p = f.unwrap().path();
        std::fs::copy(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
    }
    let broken = std::fs::read_to_string(tmp.path().join("quality.txt"))
        .unwrap()
        .replace("{answer}", "");
    std::fs::write(tmp.path().join("quality.txt"), broken).unwrap();
    let e = QaPrompts::load(tmp.path()).unwrap_err().to_string();
    assert!(e.contains("quality.txt") && e.contains("{answer}"), "{e}");
}

#[test]
fn an_empty_corpus_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("a.txt"), "Memo ALPHA. A short note.\n").unwrap();
    let got = ingest(std::slice::from_ref(&docs), &Quiet).unwrap();
    let c = tmp.path().join("corpus");
    let corpus = Corpus::at(&c);
    let mut m = corpus.write_ingested(&[docs], &got).unwrap();
    corpus
        .write_filtered(
            &mut m,
            &[],
            &[],
            engram_corpus::FilterSummary {
                settings: engram_corpus::FilterConfig::default(),
                kept: 0,
                dropped_by_rule: vec![("quality:words".into(), 1)],
            },
        )
        .unwrap();
    let e = engram_qa::corpus_documents(&c).unwrap_err().to_string();
    assert!(
        e.contains("the filter kept none of its 1 documents: quality:words 1")
            && e.contains("corpus"),
        "{e}"
    );
}

/// A generator whose pairs are all sound, but which names the first listed document in every
/// specificity question (a position bias seen in small models).
struct FirstPicker;

impl Llm for FirstPicker {
    fn model(&self) -> String {
        "first-picker".into()
    }
    fn endpoint(&self) -> String {
        "local:first-picker".into()
    }
    fn is_local(&self) -> bool {
        true
    }
    fn complete(&self, req: &ChatRequest) -> Result<Completion, String> {
        let system = &req.messages[0].content;
        let user = &req.messages.last().unwrap().content;
        // The note's name, from the document (`Memo NAME.`) or the question (`…NAME?`).
        let name_in = |t: &str| {
            t.split("Memo ")
                .nth(1)
                .map(|r| r.split('.').next().unwrap().to_string())
        };
        let q = line_after(user, "Question:");
        let asked = q
            .rsplit(' ')
            .next()
            .unwrap_or("")
            .trim_end_matches('?')
            .to_string();
        let text = if system.starts_with("You write question") {
            let n = name_in(user).unwrap();
            pair(
                &format!("What did the team decide about {n}?"),
                &format!("Plan {n}"),
            )
        } else if system.starts_with("You match questions") {
            json!({"document": 1}).to_string()
        } else if system.starts_with("You answer questions about a document") {
            format!("Plan {asked}")
        } else if system.starts_with("You answer questions in a few words") {
            "I do not know.".into()
        } else if system.starts_with("You review") {
            json!({"reason": "fine", "verdict": "pass"}).to_string()
        } else {
            json!({"question": format!("In other words, what did the team decide about {asked}?")})
                .to_string()
        };
        Ok(Completion {
            text,
            prompt_tokens: 1,
            completion_tokens: 1,
        })
    }
}

#[test]
fn placements_catch_a_generator_that_always_names_the_first_document() {
    let tmp = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..30).map(|i| format!("N{i:02}")).collect();
    let notes: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "decided")).collect();
    let corpus = corpus_of(tmp.path(), &notes);
    let prompts = prompts();
    let kept = |trials: usize| {
        let out = tmp.path().join(format!("facts-{trials}.jsonl"));
        let cfg = QaConfig {
            specific_trials: trials,
            rephrase_tries: 1,
            ..QaConfig::default()
        };
        let spec = QaSpec {
            corpus: &corpus,
            out: &out,
            cfg: &cfg,
            prompts: &prompts,
            generator: &FirstPicker,
            target: None,
            judge: &engram_judge::ExactMatchJudge,
            judge_endpoint: None,
            local_only: true,
        };
        let r = generate_facts(&spec, &Stop::new(), &Quiet);
        let recs = records(&out);
        assert_eq!(recs.len(), 30);
        for rec in recs.iter().filter(|r| !r.kept()) {
            assert_eq!(rec.reason.as_deref(), Some("specific"), "{rec:?}");
        }
        (r.is_ok(), recs.iter().filter(|r| r.kept()).count(), recs)
    };
    // One listing: the pairs whose own document happens to be listed first pass by luck.
    let (ok, lucky, _) = kept(1);
    assert!(ok && (1..30).contains(&lucky), "{lucky}");
    // Two placements: its own is first in at most one of them, so nothing passes.
    let (ok, none, recs) = kept(2);
    assert!(!ok);
    assert_eq!(none, 0);
    let detail = &recs[0].rounds[0].checks[0].detail;
    assert!(detail.contains("placement"), "{detail}");
}

/// A local generator (`local:NAME`) whose replies a function makes.
struct Scripted(&'static str, fn(&ChatRequest) -> Result<Completion, String>);

impl Llm for Scripted {
    fn model(&self) -> String {
        format!("local:{}", self.0)
    }
    fn endpoint(&self) -> String {
        self.model()
    }
    fn is_local(&self) -> bool {
        true
    }
    fn complete(&self, req: &ChatRequest) -> Result<Completion, String> {
        (self.1)(req)
    }
}

/// `f` of a generation from `corpus` into `out` by a local `generator`, checked by the
/// exact-match judge with the test settings.
fn with_local_spec<T>(
    corpus: &Path,
    out: &Path,
    generator: &dyn Llm,
    f: impl FnOnce(&QaSpec) -> T,
) -> T {
    let (cfg, prompts) = (settings(), prompts());
    let judge = engram_judge::ExactMatchJudge;
    f(&QaSpec {
        corpus,
        out,
        cfg: &cfg,
        prompts: &prompts,
        generator,
        target: None,
        judge: &judge,
        judge_endpoint: None,
        local_only: false,
    })
}

/// Every reply unusable: no pair is ever kept.
fn mute(_: &ChatRequest) -> Result<Completion, String> {
    Ok(Completion {
        text: "Sorry, I cannot help with that.".into(),
        prompt_tokens: 1,
        completion_tokens: 1,
    })
}

#[test]
fn facts_follow_the_corpus_and_a_run_that_keeps_nothing_leaves_no_fact_file() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus_of(tmp.path(), &[("ALPHA", "Plan A"), ("BRAVO", "Plan B")]);
    let first = engram_qa::corpus_fingerprint(&c).unwrap();
    assert_eq!(engram_qa::corpus_fingerprint(&c).unwrap(), first);
    // A filter that keeps one document: the facts it decides are others.
    let corpus = Corpus::at(&c);
    let mut m = corpus.manifest().unwrap();
    let docs = corpus.documents().unwrap();
    corpus
        .write_filtered(
            &mut m,
            &[&docs[0]],
            &[],
            engram_corpus::FilterSummary {
                settings: engram_corpus::FilterConfig::default(),
                kept: 1,
                dropped_by_rule: vec![("quality:words".into(), 1)],
            },
        )
        .unwrap();
    let filtered = engram_qa::corpus_fingerprint(&c).unwrap();
    assert_ne!(filtered, first);

    // Facts of an earlier run stand at `out`; this run keeps nothing.
    let out = tmp.path().join("facts.jsonl");
    std::fs::write(&out, "{\"id\": \"old\"}\n").unwrap();
    let generator = Scripted("mute", mute);
    with_local_spec(&c, &out, &generator, |spec| {
        let e = generate_facts(spec, &Stop::new(), &Quiet).unwrap_err();
        assert!(matches!(e, QaError::NothingKept { .. }), "{e}");
        assert!(
            !out.exists(),
            "the earlier run's facts beside this run's manifest"
        );
        let id = spec.identity().unwrap();
        assert_eq!(id.corpus, filtered);
        assert!(matches!(
            engram_qa::freshness(&out, &id).unwrap(),
            engram_qa::Freshness::Missing | engram_qa::Freshness::Unfinished
        ));
        let manifest = engram_qa::read_manifest(&out).unwrap().unwrap();
        assert_eq!(manifest.corpus_sha256.as_deref(), Some(filtered.as_str()));
        // A manifest of these settings on another corpus: stale, and the corpus is named.
        let other = engram_qa::RunIdentity {
            corpus: first.clone(),
            ..id
        };
        let changed = other.changes_since(&manifest);
        assert!(
            changed
                .iter()
                .any(|c| c.starts_with("the corpus's documents")),
            "{changed:?}"
        );
    });
}

/// Prompts about BRAVO never fit the generator's window; the rest are unusable.
fn too_long_for_bravo(req: &ChatRequest) -> Result<Completion, String> {
    if req.messages.iter().any(|m| m.content.contains("BRAVO")) {
        return Err("a prompt has 9000 tokens, over the model's 8192".into());
    }
    mute(req)
}

#[test]
fn a_document_whose_calls_keep_failing_is_named_with_the_error() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus_of(
        tmp.path(),
        &[
            ("ALPHA", "Plan A"),
            ("BRAVO", "Plan B"),
            ("CHARLIE", "Plan C"),
        ],
    );
    let out = tmp.path().join("facts.jsonl");
    let generator = Scripted("small-window", too_long_for_bravo);
    let e = with_local_spec(&c, &out, &generator, |spec| {
        generate_facts(spec, &Stop::new(), &Quiet).unwrap_err()
    });
    let bravo = Corpus::at(&c)
        .documents()
        .unwrap()
        .into_iter()
        .find(|d| d.text.contains("BRAVO"))
        .unwrap()
        .id;
    let msg = e.to_string();
    assert!(matches!(e, QaError::CallsFailed { failed: 1, .. }), "{msg}");
    assert!(
        msg.contains(&format!("document {bravo}"))
            && msg.contains("9000 tokens")
            && msg.contains("local:small-window"),
        "{msg}"
    );
    assert!(!out.exists());
}
