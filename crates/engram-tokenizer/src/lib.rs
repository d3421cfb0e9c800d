//! Tokenization and chat templates for engram.
//!
//! Start here: [`ChatTokenizer`] wraps the `tokenizers` crate for `tokenizer.json` and renders
//! the checkpoint's own Jinja chat template ([`chat_template`], minijinja configured as
//! transformers configures Jinja) so that prompts are byte-identical to transformers'
//! `apply_chat_template` (Llama-3.1-Instruct, ChatML...); it also knows the checkpoint's stop,
//! end-of-turn and pad ids.

mod chat_template;
mod chat_tokenizer;
mod error;
mod pyjson;

pub use chat_template::{ChatTemplate, Message, strftime, strftime_now, utc_offset};
pub use chat_tokenizer::ChatTokenizer;
pub use error::{Result, TokenizerError};
