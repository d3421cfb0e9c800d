//! Chat prompts and token ids equal transformers' `apply_chat_template` + tokenizer output
//! (reference: tests/fixtures/chat_templates.json, made by tests/peers/make_fixtures.py).

use std::path::PathBuf;

use engram_checkpoint::{Checkpoint, TokenizerFiles, model_store};
use engram_tokenizer::{ChatTokenizer, Message};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"))
        .join("../..")
}

fn reference() -> Value {
    let p = root().join("tests/fixtures/chat_templates.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn llama31() -> ChatTokenizer {
    let dir = root().join("../shared/models/llama-3.1-8b-instruct-tokenizer");
    let files = TokenizerFiles {
        tokenizer_json: Some(
            std::fs::read_to_string(dir.join("tokenizer.json"))
                .expect("shared Llama-3.1 tokenizer"),
        ),
        tokenizer_config: Some(
            serde_json::from_str(
                &std::fs::read_to_string(dir.join("tokenizer_config.json")).unwrap(),
            )
            .unwrap(),
        ),
        origin: dir.display().to_string(),
    };
    ChatTokenizer::from_files(&files).unwrap()
}

fn check(tok: &ChatTokenizer, cases: &Value) {
    let cases = cases.as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        let msgs: Vec<Message> = serde_json::from_value(c["messages"].clone()).unwrap();
        let add_gen = c["add_generation_prompt"].as_bool().unwrap();
        let text = tok.apply_chat_template(&msgs, add_gen).unwrap();
        assert_eq!(
            text,
            c["text"].as_str().unwrap(),
            "case {} gen={add_gen}",
            c["name"]
        );
        let ids = tok.encode(&text, false).unwrap();
        let want: Vec<u32> = serde_json::from_value(c["ids"].clone()).unwrap();
        assert_eq!(ids, want, "ids of case {} gen={add_gen}", c["name"]);
    }
}

#[test]
fn llama31_renderings_and_ids_equal_transformers() {
    check(&llama31(), &reference()["llama31"]);
}

#[test]
fn llama31_special_ids() {
    let t = llama31();
    assert_eq!(t.encode("Hello world", false).unwrap(), vec![9906, 1917]);
    assert_eq!(
        t.encode("Hello world", true).unwrap(),
        vec![128000, 9906, 1917]
    );
    assert_eq!(t.end_of_turn_id(), Some(128009));
    assert_eq!(t.pad_id(), Some(128004));
    let stops = t.stop_ids(&[128001, 128008, 128009]);
    for id in [128009, 128001, 128008] {
        assert!(stops.contains(&id), "{id} missing from {stops:?}");
    }
    // The default system header carries the knowledge and "today" dates of the template.
    let text = t.apply_chat_template(&[Message::user("hi")], true).unwrap();
    assert!(
        text.contains("Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024"),
        "{text}"
    );
}

#[test]
fn chatml_renderings_and_ids_equal_transformers_on_smollm2_gguf() {
    let path = model_store::find("smollm2-135m-instruct")
        .unwrap()
        .ensure(&engram_io::Quiet)
        .expect("SmolLM2 fetch");
    let ckpt = Checkpoint::open(path.to_str().unwrap()).unwrap();
    let tok = ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    check(&tok, &reference()["chatml"]);
    assert_eq!(tok.end_of_turn_id(), tok.token_id("<|im_end|>"));
    // SmolLM2's own tokenizer splits digits one by one (llama.cpp pre-tokenizer "smollm").
    let ids = tok.encode("2024", false).unwrap();
    assert_eq!(ids.len(), 4, "{ids:?}");
}

#[test]
fn tiny_fixture_tokenizer_cases_equal_transformers() {
    // reference_logits.py stores the tokenizer's ids for a few strings in its metadata.
    for name in ["tiny-f32", "tiny-bf16-tied"] {
        let dir = root().join("tests/fixtures").join(name);
        let bytes = std::fs::read(dir.join("reference.safetensors")).unwrap();
        let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        let cases: Value =
            serde_json::from_str(&meta.metadata().as_ref().unwrap()["tokenizer_cases"]).unwrap();
        let ckpt = Checkpoint::open(dir.to_str().unwrap()).unwrap();
        let tok = ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
        for (text, want) in cases.as_object().unwrap() {
            let with: Vec<u32> = serde_json::from_value(want["with_special"].clone()).unwrap();
            let without: Vec<u32> = serde_json::from_value(want["no_special"].clone()).unwrap();
            assert_eq!(
                tok.encode(text, true).unwrap(),
                with,
                "{name}: {text:?} with specials"
            );
            assert_eq!(
                tok.encode(text, false).unwrap(),
                without,
                "{name}: {text:?}"
            );
        }
    }
}
