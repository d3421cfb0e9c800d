//! How the LLM judge asks for verdicts, against a real HTTP server on loopback whose replies
//! are scripted per request: JSON-schema verdicts parsed; a server that rejects
//! `response_format` → one fallback, the rest of the run in text mode (and an error when the
//! preset insists on JSON); an answer without a verdict → exactly one follow-up turn in the same
//! conversation, both turns cached; a follow-up without one → no verdict, both raw outputs kept.

use engram_judge::FOLLOW_UP;
use engram_judge::JudgeCache;
use engram_judge::{
    Judge, JudgeItem, JudgePrompt, OpenAiJudge, OpenAiJudgeConfig, Verdict, VerdictFormat,
};
use engram_testkit::openai::{Reply, Server};

fn judge(url: &str, cache: &std::path::Path, format: VerdictFormat) -> OpenAiJudge {
    let mut cfg = OpenAiJudgeConfig::new(url, "judge-model");
    cfg.concurrency = 1;
    cfg.client.max_retries = 1;
    cfg.client.backoff = std::time::Duration::from_millis(10);
    cfg.format = format;
    let prompt = JudgePrompt::from_text(
        std::path::Path::new("p.txt"),
        "Question: {question}\nGold: {gold}\nCandidate: {answer}\nExplain, then give the verdict."
            .into(),
    )
    .unwrap();
    OpenAiJudge::new(cfg, prompt, JudgeCache::open(cache).unwrap()).unwrap()
}

fn item(id: &str) -> JudgeItem {
    JudgeItem {
        id: id.into(),
        question: format!("{id}?"),
        gold: "gold".into(),
        answer: Some("candidate".into()),
        document: None,
    }
}

fn judged(j: &OpenAiJudge, ids: &[&str]) -> Vec<Verdict> {
    let items: Vec<_> = ids.iter().map(|i| item(i)).collect();
    j.judge(&items).unwrap()
}

#[test]
fn json_schema_verdicts_are_asked_for_and_parsed() {
    let srv = Server::start(|req| {
        let schema = &req["response_format"]["json_schema"]["schema"];
        assert_eq!(req["response_format"]["type"], "json_schema");
        assert_eq!(
            schema["properties"]["verdict"]["enum"],
            serde_json::json!(["correct", "incorrect"])
        );
        let q = req["messages"][0]["content"].as_str().unwrap();
        let verdict = if q.contains("right?") {
            "correct"
        } else {
            "incorrect"
        };
        Reply::completion(&format!(
            r#"{{"reason": "compared with gold", "verdict": "{verdict}"}}"#
        ))
    });
    let dir = tempfile::tempdir().unwrap();
    let j = judge(&srv.url, &dir.path().join("c.jsonl"), VerdictFormat::Auto);
    let v = judged(&j, &["right", "wrong"]);
    assert_eq!(v[0].correct, Some(true));
    assert_eq!(v[1].correct, Some(false));
    assert_eq!(v[0].rationale.as_deref(), Some("compared with gold"));
    assert!(v.iter().all(|x| x.follow_up.is_none()));
    assert_eq!(j.requests(), 2);
    assert!(j.notes().is_empty());
}

/// Rejects any request carrying `response_format` as older vLLM/TGI servers do; answers the
/// rest in text.
fn rejecting() -> Server {
    Server::start(|req| {
        if req.get("response_format").is_some() {
            let e = r#"{"error": {"message": "Unrecognized request argument supplied: response_format", "type": "invalid_request_error"}}"#;
            Reply::status(400, e)
        } else {
            Reply::completion("Same fact.\nVERDICT: CORRECT")
        }
    })
}

#[test]
fn a_server_that_rejects_the_format_is_judged_in_text_after_one_fallback() {
    let srv = rejecting();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("c.jsonl");
    let j = judge(&srv.url, &cache, VerdictFormat::Auto);
    let v = judged(&j, &["a", "b", "c"]);
    assert!(v.iter().all(|x| x.correct == Some(true)), "{v:?}");
    // One rejected request, then three in text: the format is not tried again.
    let bodies = srv.requests();
    assert_eq!(bodies.len(), 4);
    assert!(bodies[0].get("response_format").is_some());
    assert!(
        bodies[1..]
            .iter()
            .all(|b| b.get("response_format").is_none())
    );
    let notes = j.notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("response_format") && notes[0].contains("text mode"),
        "{notes:?}"
    );
    assert!(j.notes().is_empty(), "a note is handed out once");
    // A rerun in auto mode is served by the text answers cached: no request.
    let again = judge(&srv.url, &cache, VerdictFormat::Auto);
    assert_eq!(judged(&again, &["a", "b", "c"]), {
        let mut cached = v.clone();
        cached.iter_mut().for_each(|x| x.cached = true);
        cached
    });
    assert_eq!(again.requests(), 0);
    // A preset that insists on JSON gets an error naming the field and the way out.
    let strict = judge(&srv.url, &dir.path().join("d.jsonl"), VerdictFormat::Json);
    let e = strict.judge(&[item("a")]).unwrap_err().to_string();
    assert!(
        e.contains("response_format") && e.contains("verdict_format"),
        "{e}"
    );
    // Text mode never sends the field.
    let text = judge(&srv.url, &dir.path().join("e.jsonl"), VerdictFormat::Text);
    assert_eq!(judged(&text, &["a"])[0].correct, Some(true));
    assert_eq!(text.requests(), 1);
}

#[test]
fn an_answer_without_a_verdict_gets_one_cached_follow_up() {
    let srv = Server::start(|req| {
        let m = req["messages"].as_array().unwrap();
        let q = m[0]["content"].as_str().unwrap();
        if m.len() == 1 {
            assert!(req.get("response_format").is_none(), "text mode");
            return Reply::completion(
                "The candidate gives the same information as the gold answer.",
            );
        }
        // The follow-up continues the conversation: the first answer, then the question.
        assert_eq!(m.len(), 3);
        assert_eq!(m[1]["role"], "assistant");
        assert_eq!(
            m[1]["content"],
            "The candidate gives the same information as the gold answer."
        );
        assert_eq!(m[2]["content"], FOLLOW_UP);
        if q.contains("stubborn?") {
            Reply::completion("As I said, the same information.")
        } else {
            Reply::completion("VERDICT: CORRECT")
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("c.jsonl");
    let j = judge(&srv.url, &cache, VerdictFormat::Text);
    let v = judged(&j, &["plain"]);
    assert_eq!(v[0].correct, Some(true));
    assert_eq!(
        v[0].raw,
        "The candidate gives the same information as the gold answer."
    );
    assert_eq!(v[0].follow_up.as_deref(), Some("VERDICT: CORRECT"));
    assert_eq!(j.requests(), 2, "exactly one follow-up");

    // A follow-up that still gives none: no verdict, both raw outputs kept.
    let v = judged(&j, &["stubborn"]);
    assert_eq!(v[0].correct, None);
    assert!(v[0].error.as_deref().unwrap().contains("follow-up"));
    assert_eq!(
        v[0].follow_up.as_deref(),
        Some("As I said, the same information.")
    );
    assert_eq!(j.requests(), 4);

    // Both turns were cached: a rerun makes no request and gives the same verdicts.
    let again = judge(&srv.url, &cache, VerdictFormat::Text);
    let v2 = judged(&again, &["plain", "stubborn"]);
    assert_eq!(again.requests(), 0);
    assert_eq!(v2[0].correct, Some(true));
    assert_eq!(v2[1].correct, None);
    assert!(v2.iter().all(|x| x.cached && x.follow_up.is_some()));
}
