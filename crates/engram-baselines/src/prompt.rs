//! The user message of the in-context baselines: an instruction, the facts (rephrased question
//! and answer, one pair per line, as EnronQA §6 puts them in the prompt), then the question. The
//! facts come first so that every question shares the longest possible prefix.

use engram_facts::Fact;

/// One line per fact: `Q: <rephrased question> A: <answer>`.
pub fn facts_block(facts: &[&Fact]) -> String {
    let mut s = String::new();
    for f in facts {
        s.push_str("Q: ");
        s.push_str(&f.rephrased_question);
        s.push_str(" A: ");
        s.push_str(&f.answer);
        s.push('\n');
    }
    s
}

/// The user message for `question` given a facts block.
pub fn context_message(block: &str, question: &str) -> String {
    format!(
        "Answer the question using the facts below. Reply with the answer only.\n\nFacts:\n{block}\nQuestion: {question}"
    )
}
