//! Long context: prefix-cached answers equal the per-question prompts' answers; NA past the
//! window; named errors for empty input.

use engram_baselines::{
    LongContext, LongContextConfig, long_context_answers, long_context_prompts, naive_answers,
};
use engram_facts::Fact;
use engram_model::{AnswerConfig, Llama};
use engram_tokenizer::ChatTokenizer;

fn tiny() -> (Llama, ChatTokenizer) {
    engram_testkit::tiny(false)
}

fn facts() -> Vec<Fact> {
    (0..8)
        .map(|i| Fact {
            id: format!("f{i}"),
            question: format!("Which room hosts meeting number {i}?"),
            rephrased_question: format!("Meeting {i} takes place in which room?"),
            answer: format!("Room {}", 100 + 7 * i),
            source: None,
        })
        .collect()
}

fn cfg(tok: &ChatTokenizer, model: &Llama) -> LongContextConfig {
    LongContextConfig {
        answer: AnswerConfig {
            batch_size: 3,
            max_new_tokens: 12,
            stop_ids: tok.stop_ids(&model.config.eos_token_ids),
            ..Default::default()
        },
        context_cap: None,
    }
}

#[test]
fn prefix_cached_answers_equal_per_question_answers() {
    let (model, tok) = tiny();
    let facts = facts();
    // Questions of different lengths, so suffixes are padded after the shared prefix.
    let mut questions: Vec<String> = facts.iter().map(|f| f.question.clone()).collect();
    questions
        .push("And the longest question of all, about meeting number three, where is it?".into());
    let c = cfg(&tok, &model);
    let shared = long_context_answers(&model, &tok, &facts, &questions, &c, None).unwrap();
    let (naive, _) = naive_answers(&model, &tok, &facts, &questions, &c, None).unwrap();
    let LongContext::Answered {
        answers,
        prefix_tokens,
        prefill_tokens,
        naive_prefill_tokens,
        ..
    } = shared
    else {
        panic!("the facts fit the tiny model's window");
    };
    assert_eq!(answers, naive);
    assert!(answers.iter().any(|a| a.tokens > 0));
    eprintln!(
        "prefix {prefix_tokens} tokens; prefill {prefill_tokens} vs naive {naive_prefill_tokens}"
    );
    assert!(prefix_tokens > 100);
    assert!(prefill_tokens * 4 < naive_prefill_tokens);
}

#[test]
fn too_many_facts_is_na_not_an_error() {
    let (model, tok) = tiny();
    let facts = facts();
    let questions = vec![facts[0].question.clone()];
    let c = LongContextConfig {
        context_cap: Some(64),
        ..cfg(&tok, &model)
    };
    match long_context_answers(&model, &tok, &facts, &questions, &c, None).unwrap() {
        LongContext::NotApplicable { needed, window } => {
            assert_eq!(window, 64);
            assert!(needed > 64);
        }
        other => panic!("expected NA, got {other:?}"),
    }
    // A window the prompts fit, with fewer tokens left than an answer may take: NA too, where
    // the answers were cut to the tokens left and judged wrong.
    let longest = long_context_prompts(&tok, &facts, &questions)
        .unwrap()
        .iter()
        .map(Vec::len)
        .max()
        .unwrap();
    let mut c = LongContextConfig {
        context_cap: Some(longest + 2),
        ..cfg(&tok, &model)
    };
    c.answer.max_new_tokens = 8;
    match long_context_answers(&model, &tok, &facts, &questions, &c, None).unwrap() {
        LongContext::NotApplicable { needed, window } => {
            assert_eq!((needed, window), (longest + 8, longest + 2));
        }
        other => panic!("expected NA, got {other:?}"),
    }
    c.context_cap = Some(longest + 8);
    assert!(matches!(
        long_context_answers(&model, &tok, &facts, &questions, &c, None).unwrap(),
        LongContext::Answered { .. }
    ));
}

#[test]
fn empty_inputs_are_named() {
    let (model, tok) = tiny();
    let c = cfg(&tok, &model);
    let e = long_context_answers(&model, &tok, &[], &["Q?".to_string()], &c, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("fact set is empty"), "{e}");
    let e = long_context_answers(&model, &tok, &facts(), &[], &c, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no questions"), "{e}");
}

#[test]
fn a_stop_request_ends_answering_between_batches() {
    let (model, tok) = tiny();
    let facts = facts();
    let questions: Vec<String> = facts.iter().map(|f| f.question.clone()).collect();
    let c = cfg(&tok, &model);
    c.answer.interrupt.request(15);
    let e = long_context_answers(&model, &tok, &facts, &questions, &c, None).expect_err("stopped");
    assert_eq!(e.to_string(), "stopped by signal 15 after 0 of 8 answers");
    let e = engram_model::answer_questions(&model, &tok, &questions, &c.answer, None)
        .expect_err("stopped");
    assert!(
        matches!(
            e,
            engram_model::ModelError::Stopped {
                signal: 15,
                answered: 0,
                total: 8
            }
        ),
        "{e}"
    );
}
