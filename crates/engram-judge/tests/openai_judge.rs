//! The LLM judge against a real HTTP server on loopback that speaks the OpenAI protocol with
//! canned verdicts, a 500, a timeout, a 429 with Retry-After, malformed JSON, an unparseable
//! verdict and refusals (400, 401); the cache serves a rerun with zero requests; the API key
//! appears in no result.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engram_judge::JudgeCache;
use engram_judge::{
    Judge, JudgeError, JudgeItem, JudgePrompt, OpenAiJudge, OpenAiJudgeConfig, VerdictFormat,
};
use engram_testkit::openai::{self, Reply};

const KEY: &str = "sk-test-5ecret-key";

/// An OpenAI-compatible server whose behaviour is chosen by the question in the prompt and
/// the number of times it was asked, with the count per question.
struct Server {
    url: String,
    seen: Arc<Mutex<HashMap<String, usize>>>,
    auth: Arc<Mutex<Vec<String>>>,
    hits: Arc<AtomicUsize>,
}

fn server() -> Server {
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let counts = seen.clone();
    let srv = openai::Server::start(move |req| {
        assert_eq!(req["temperature"], 0);
        let prompt = req["messages"][0]["content"].as_str().unwrap().to_string();
        let tag = [
            "normal", "flaky", "slow", "limited", "garbled", "unsure", "wrong", "long", "locked",
            "odd",
        ]
        .into_iter()
        .find(|t| prompt.contains(&format!("Question: {t}")))
        .unwrap_or("normal");
        let n = {
            let mut s = counts.lock().unwrap();
            let c = s.entry(tag.to_string()).or_insert(0);
            *c += 1;
            *c
        };
        match (tag, n) {
            ("flaky", 1) => Reply::status(500, "{}"),
            ("slow", 1) => {
                std::thread::sleep(Duration::from_millis(1500));
                Reply::completion("late\nVERDICT: CORRECT")
            }
            ("limited", 1) => Reply {
                headers: vec!["Retry-After: 1".into()],
                ..Reply::status(429, "{}")
            },
            ("garbled", 1) => Reply::status(200, "{not json"),
            // A Retry-After that is no duration: the client's own backoff, not a panic.
            ("odd", 1) => Reply {
                headers: vec!["Retry-After: -1".into()],
                ..Reply::status(429, "{}")
            },
            // Longer than the judge's context, say: refused however often it is asked.
            ("long", _) => Reply::status(400, r#"{"error": "too many tokens"}"#),
            ("locked", _) => Reply::status(401, "{}"),
            ("unsure", _) => Reply::completion("I cannot decide."),
            ("wrong", _) => Reply::completion("Different fact.\nVERDICT: INCORRECT"),
            _ => Reply::completion("Same fact.\nVERDICT: CORRECT"),
        }
    });
    Server {
        url: srv.url,
        seen,
        auth: srv.auth,
        hits: srv.hits,
    }
}

fn item(tag: &str) -> JudgeItem {
    JudgeItem {
        id: tag.into(),
        question: tag.into(),
        gold: "gold".into(),
        answer: Some("candidate".into()),
        document: None,
    }
}

fn prompt() -> JudgePrompt {
    let path = Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"),
    )
    .join("../../configs/judges/enronqa-judge.txt");
    JudgePrompt::load(&path).unwrap()
}

fn judge(url: &str, cache: &Path) -> OpenAiJudge {
    let mut cfg = OpenAiJudgeConfig::new(url, "judge-model");
    cfg.client.api_key_env = Some("ENGRAM_TEST_JUDGE_KEY".into());
    cfg.client.timeout = Duration::from_millis(700);
    cfg.client.backoff = Duration::from_millis(20);
    cfg.client.max_retries = 3;
    cfg.breaker_after = 2;
    OpenAiJudge::new(cfg, prompt(), JudgeCache::open(cache).unwrap()).unwrap()
}

fn set_key() {
    // SAFETY: every test sets the same value before any judge reads it.
    unsafe { std::env::set_var("ENGRAM_TEST_JUDGE_KEY", KEY) };
}

#[test]
fn judges_through_failures_and_caches_everything() {
    set_key();
    let srv = server();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("judge-cache.jsonl");
    let tags = [
        "normal", "flaky", "slow", "limited", "garbled", "unsure", "wrong", "odd",
    ];
    let mut items: Vec<JudgeItem> = tags.iter().map(|t| item(t)).collect();
    items.push(JudgeItem {
        answer: None,
        ..item("na")
    });
    let j = judge(&srv.url, &cache);
    let v = j.judge(&items).unwrap();
    let by: HashMap<&str, _> = v.iter().map(|x| (x.id.as_str(), x)).collect();
    for t in ["normal", "flaky", "slow", "limited", "garbled", "odd"] {
        assert_eq!(by[t].correct, Some(true), "{t}: {:?}", by[t]);
        assert_eq!(
            by[t].rationale.as_deref().map(|r| r.is_empty()),
            Some(false),
            "{t}"
        );
    }
    assert_eq!(by["wrong"].correct, Some(false));
    assert_eq!(by["unsure"].correct, None);
    assert_eq!(by["unsure"].raw, "I cannot decide.");
    // No verdict in the answer: one follow-up turn, which gives none either.
    assert_eq!(by["unsure"].follow_up.as_deref(), Some("I cannot decide."));
    assert!(by["unsure"].error.is_some());
    assert_eq!(by["na"].correct, None);
    assert!(v.iter().all(|x| x.judge == "openai:judge-model"));
    let seen = srv.seen.lock().unwrap().clone();
    for t in ["flaky", "slow", "limited", "garbled", "odd"] {
        assert_eq!(seen[t], 2, "{t} is retried once");
    }
    // 8 answers, 5 retried once, 1 follow-up.
    assert_eq!(j.requests(), 14);
    // The key went to the server, and nowhere else.
    assert!(srv.auth.lock().unwrap().iter().all(|a| a.ends_with(KEY)));
    let cache_text = std::fs::read_to_string(&cache).unwrap();
    assert!(!cache_text.contains(KEY));
    assert!(!serde_json::to_string(&v).unwrap().contains(KEY));

    // A rerun is served from the cache: no request at all.
    let before = srv.hits.load(Ordering::SeqCst);
    let again = judge(&srv.url, &cache);
    let v2 = again.judge(&items).unwrap();
    assert_eq!(again.requests(), 0);
    assert_eq!(srv.hits.load(Ordering::SeqCst), before);
    for (a, b) in v.iter().zip(&v2) {
        assert_eq!((a.correct, &a.raw), (b.correct, &b.raw));
    }
    assert!(v2.iter().filter(|x| x.id != "na").all(|x| x.cached));
}

#[test]
fn an_unreachable_judge_is_named_and_keeps_what_was_judged() {
    set_key();
    let srv = server();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.jsonl");
    // Two items judged while the server is up...
    judge(&srv.url, &cache)
        .judge(&[item("normal"), item("wrong")])
        .unwrap();
    // ...then the endpoint goes away.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let mut items = vec![item("normal"), item("wrong")];
    // Enough new ones to keep every worker busy when the breaker opens.
    for n in 0..6 {
        items.push(JudgeItem {
            id: format!("x{n}"),
            ..item(&format!("normal{n}"))
        });
    }
    let e = judge(&dead, &cache).judge(&items).unwrap_err();
    assert!(matches!(e, JudgeError::Unreachable { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(&dead) && !msg.contains(KEY), "{msg}");
    assert!(msg.contains("judge-model"), "the model is named: {msg}");
    // The last error is the endpoint's, not the breaker stopping the other workers.
    assert!(
        msg.contains("transport") && !msg.contains("breaker"),
        "{msg}"
    );
    // The cached two are not asked again when the judge is back.
    let back = judge(&srv.url, &cache);
    let v = back.judge(&items).unwrap();
    assert_eq!(back.requests(), 6);
    assert_eq!(v.len(), 8);
}

#[test]
fn a_refused_request_is_named_with_its_item_and_not_asked_again() {
    set_key();
    let srv = server();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.jsonl");
    judge(&srv.url, &cache).judge(&[item("normal")]).unwrap();
    let items = [item("normal"), item("long"), item("wrong")];
    let e = judge(&srv.url, &cache).judge(&items).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, JudgeError::Refused { status: 400, .. }),
        "{msg}"
    );
    assert!(
        msg.contains("for long") && msg.contains("HTTP 400") && msg.contains("context"),
        "{msg}"
    );
    assert!(!msg.contains("unreachable") && !msg.contains(KEY), "{msg}");
    // A client error is not retried: asking again would get the same answer.
    assert_eq!(srv.seen.lock().unwrap()["long"], 1);
    // What was judged before stays cached.
    let again = judge(&srv.url, &cache);
    again.judge(&[item("normal")]).unwrap();
    assert_eq!(again.requests(), 0);
    // A refused key is told apart from a refused prompt.
    let e = judge(&srv.url, &cache)
        .judge(&[item("locked")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("HTTP 401") && e.contains("api_key_env") && !e.contains(KEY),
        "{e}"
    );
}

#[test]
fn bad_prompts_and_missing_keys_are_named() {
    let e = JudgePrompt::from_text(Path::new("judge.txt"), "Q {question} A {answer}".into())
        .unwrap_err()
        .to_string();
    assert!(e.contains("judge.txt") && e.contains("{gold}"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = OpenAiJudgeConfig::new("http://127.0.0.1:9/v1", "m");
    cfg.client.api_key_env = Some("ENGRAM_TEST_UNSET_KEY_VAR".into());
    let e = OpenAiJudge::new(
        cfg,
        prompt(),
        JudgeCache::open(&dir.path().join("c")).unwrap(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("ENGRAM_TEST_UNSET_KEY_VAR"), "{e}");
}

#[test]
fn the_fingerprint_follows_the_prompt_and_format_not_the_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let make = |url: &str, text: &str, format: VerdictFormat| {
        let mut cfg = OpenAiJudgeConfig::new(url, "judge-model");
        cfg.format = format;
        let prompt = JudgePrompt::from_text(Path::new("judge.txt"), text.into()).unwrap();
        let cache = JudgeCache::open(&dir.path().join("c.jsonl")).unwrap();
        OpenAiJudge::new(cfg, prompt, cache).unwrap().fingerprint()
    };
    let text = "Q {question} G {gold} A {answer}";
    let base = make("http://127.0.0.1:9/v1", text, VerdictFormat::Auto);
    assert!(base.starts_with("openai:judge-model ("), "{base}");
    assert_eq!(
        make("http://127.0.0.1:10/v1", text, VerdictFormat::Auto),
        base,
        "another endpoint serving the same model"
    );
    for other in [
        make(
            "http://127.0.0.1:9/v1",
            "Question {question} Gold {gold} Answer {answer}",
            VerdictFormat::Auto,
        ),
        make(
            "http://127.0.0.1:9/v1",
            &format!("### system\nBe strict.\n### user\n{text}"),
            VerdictFormat::Auto,
        ),
        make("http://127.0.0.1:9/v1", text, VerdictFormat::Text),
    ] {
        assert_ne!(other, base);
    }
}
