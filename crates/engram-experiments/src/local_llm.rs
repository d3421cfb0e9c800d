//! A model engram runs itself as an [`Llm`] for QA generation (`--generator local:MODEL`,
//! `--target-model MODEL`): each call is the chat template over the call's messages, greedy at
//! temperature 0 and sampled (top-p 1, the call's seed) above it. Prompts stay in this process.
//! A corpus experiment's sweep uses it for `qa.generator = "local:MODEL"` and for its own model
//! as the grounded-target check.

use std::sync::Mutex;

use engram_io::Progress;
use engram_model::{GenerationConfig, Sampling, Session, SessionSpec, generate};
use engram_qa::{ChatRequest, Completion, Llm};
use engram_tokenizer::Message;

/// A loaded model answering chat calls, one at a time.
pub struct LocalLlm {
    name: String,
    session: Mutex<Session>,
}

impl LocalLlm {
    /// The model `name` (as given on the command line), loaded as `session`.
    pub fn new(name: &str, session: Session) -> Self {
        Self {
            name: name.to_string(),
            session: Mutex::new(session),
        }
    }

    /// Loads `model` (a directory, `.gguf` file or registry alias) for inference on `backend`
    /// with weights in `dtype`, reporting to `progress`.
    pub fn load(
        model: &str,
        backend: &str,
        dtype: &str,
        progress: &dyn Progress,
    ) -> engram_model::Result<Self> {
        let spec = SessionSpec {
            model: model.to_string(),
            backend: backend.to_string(),
            dtype: dtype.to_string(),
            train: false,
        };
        Ok(Self::new(model, Session::load(&spec, progress)?))
    }
}

impl Llm for LocalLlm {
    fn model(&self) -> String {
        format!("local:{}", self.name)
    }

    fn endpoint(&self) -> String {
        self.model()
    }

    fn is_local(&self) -> bool {
        true
    }

    fn complete(&self, req: &ChatRequest) -> Result<Completion, String> {
        let s = self
            .session
            .lock()
            .map_err(|_| "the local model panicked")?;
        let messages: Vec<Message> = req
            .messages
            .iter()
            .map(|m| match m.role {
                "system" => Message::system(m.content.clone()),
                "assistant" => Message::assistant(m.content.clone()),
                _ => Message::user(m.content.clone()),
            })
            .collect();
        let ids = s
            .tokenizer
            .encode_chat_prompt(&messages)
            .map_err(|e| e.to_string())?;
        let sampling = if req.temperature > 0.0 {
            Sampling::TopP {
                temperature: req.temperature as f32,
                top_p: 1.0,
                seed: req.seed,
            }
        } else {
            Sampling::Greedy
        };
        let cfg = GenerationConfig {
            max_new_tokens: req.max_tokens,
            sampling,
            stop_ids: s.stop_ids.clone(),
            ..Default::default()
        };
        let prompt_tokens = ids.len() as u64;
        let out = generate(&s.model, &[ids], &cfg).map_err(|e| e.to_string())?;
        let tokens = &out.tokens[0];
        Ok(Completion {
            text: s
                .tokenizer
                .decode(tokens, true)
                .map_err(|e| e.to_string())?,
            prompt_tokens,
            completion_tokens: tokens.len() as u64,
        })
    }
}
