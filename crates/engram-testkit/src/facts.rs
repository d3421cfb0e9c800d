//! Synthetic EnronQA-style facts with fictional names, whose original and rephrased questions
//! differ in wording.

use engram_facts::Fact;

const NAMES: [&str; 10] = [
    "Jeff Skerrow",
    "Louise Kitchenor",
    "Sally Beckwith",
    "Vince Kaminsky",
    "Greg Whalby",
    "Mark Haedicke",
    "Kevin Presto",
    "Tana Jonesbury",
    "Rosa Tallmadge",
    "Hunter Delacroix",
];
const THINGS: [&str; 4] = [
    "budget meeting",
    "pipeline review",
    "gas contract",
    "trading memo",
];
const CODES: [&str; 20] = [
    "Copper Osprey",
    "Blue Heron",
    "Silver Lynx",
    "Red Falcon",
    "Green Otter",
    "Iron Badger",
    "Amber Crane",
    "Stone Wren",
    "Gold Marten",
    "Jade Ibis",
    "Coral Fox",
    "Slate Owl",
    "Ruby Stoat",
    "Onyx Hare",
    "Pearl Kite",
    "Teal Moose",
    "Rust Vole",
    "Mint Egret",
    "Plum Shrike",
    "Sand Bison",
];

/// `n` (≤ 20) synthetic facts whose original and rephrased questions differ in wording.
pub fn facts(n: usize) -> Vec<Fact> {
    (0..n)
        .map(|i| {
            let who = NAMES[i % NAMES.len()];
            let what = THINGS[i / NAMES.len() % THINGS.len()];
            Fact {
                id: format!("f{i}"),
                question: format!("What code name did {who} give the {what}?"),
                rephrased_question: format!("In {who}'s email, the {what} is called what?"),
                answer: format!("Project {}", CODES[i]),
                source: None,
            }
        })
        .collect()
}

/// How many of `facts` `model` answers verbatim (surrounding whitespace aside) when asked their
/// rephrased (trained) questions greedily, `batch` at a time, at most `max_new` new tokens.
pub fn rephrased_hits(
    model: &engram_model::Llama,
    tok: &engram_tokenizer::ChatTokenizer,
    facts: &[Fact],
    batch: usize,
    max_new: usize,
) -> usize {
    let questions: Vec<String> = facts.iter().map(|f| f.rephrased_question.clone()).collect();
    let cfg = engram_model::AnswerConfig {
        batch_size: batch,
        max_new_tokens: max_new,
        stop_ids: tok.stop_ids(&model.config.eos_token_ids),
        ..Default::default()
    };
    let answers = engram_model::answer_questions(model, tok, &questions, &cfg, None).unwrap();
    answers
        .iter()
        .zip(facts)
        .filter(|(a, f)| a.text.trim() == f.answer.trim())
        .count()
}
