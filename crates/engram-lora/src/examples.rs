//! Training examples (TOFU / EnronQA conventions): the chat prompt with the *rephrased* question
//! as the user turn and the generation header open, then the answer's tokens and the
//! end-of-turn token. Loss falls on the answer and that end token only.

use engram_facts::Fact;
use engram_model::question_prompt;
use engram_tokenizer::ChatTokenizer;

use crate::error::{LoraError, Result};

/// One tokenized training example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainExample {
    /// The fact's id.
    pub id: String,
    /// Prompt then answer then end-of-turn.
    pub ids: Vec<u32>,
    /// Tokens of the prompt: labels are `ids[prompt_len..]`.
    pub prompt_len: usize,
}

impl TrainExample {
    /// Number of label tokens (answer + end of turn): the tokens a [`crate::Batch`] predicts,
    /// `ids[max(prompt_len, 1)..]` (an example's first token has none before it to predict it).
    pub fn label_count(&self) -> usize {
        self.ids.len().saturating_sub(self.prompt_len.max(1))
    }
}

/// Tokenizes `facts` for training. `window` is the longest example allowed (the model's
/// context); a longer one is an error naming the fact.
pub fn build_examples(
    tokenizer: &ChatTokenizer,
    facts: &[Fact],
    window: usize,
) -> Result<Vec<TrainExample>> {
    if facts.is_empty() {
        return Err(LoraError::BadSetting("the fact set is empty".into()));
    }
    let eot = tokenizer.end_of_turn_id().ok_or_else(|| {
        LoraError::BadSetting("the tokenizer defines no end-of-turn or eos token".into())
    })?;
    let mut out = Vec::with_capacity(facts.len());
    for f in facts {
        if f.answer.trim().is_empty() {
            return Err(LoraError::BadSetting(format!(
                "fact `{}` has an empty answer",
                f.id
            )));
        }
        let mut ids = question_prompt(tokenizer, &f.rephrased_question)?;
        let prompt_len = ids.len();
        ids.extend(tokenizer.encode(&f.answer, false)?);
        ids.push(eot);
        if ids.len() > window {
            return Err(LoraError::TooLong {
                id: f.id.clone(),
                len: ids.len(),
                window,
            });
        }
        out.push(TrainExample {
            id: f.id.clone(),
            ids,
            prompt_len,
        });
    }
    Ok(out)
}
