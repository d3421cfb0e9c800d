//! Tokenization and chat templates for engram: the `tokenizers` crate for `tokenizer.json`, and
//! the checkpoint's own Jinja chat template rendered with minijinja so that prompts are
//! byte-identical to transformers' `apply_chat_template` (Llama-3.1-Instruct, ChatML...).

pub mod chat_template;
pub mod chat_tokenizer;
pub mod error;
mod pyjson;

pub use chat_template::{ChatTemplate, Message, strftime};
pub use chat_tokenizer::ChatTokenizer;
pub use error::{Result, TokenizerError};
