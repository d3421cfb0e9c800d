//! An error and its causes as one line of text, for the terminal and for records.

use std::error::Error;

/// `outer: cause: …`, each cause once: a cause whose text the message before it already ends
/// with is left out (errors such as `FactsError::Io` print their source inside their own
/// message, which anyhow's `{:#}` would print a second time).
pub fn error_text(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and an optional source.
    #[derive(Debug)]
    struct E(String, Option<Box<E>>);

    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl Error for E {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    fn e(msg: &str, source: Option<E>) -> E {
        E(msg.into(), source.map(Box::new))
    }

    #[test]
    fn each_cause_once() {
        let os = e("No such file or directory (os error 2)", None);
        let io = e("f.jsonl: No such file or directory (os error 2)", Some(os));
        assert_eq!(
            error_text(&io),
            "f.jsonl: No such file or directory (os error 2)"
        );
        let ctx = e("loading facts", Some(io));
        assert_eq!(
            error_text(&ctx),
            "loading facts: f.jsonl: No such file or directory (os error 2)"
        );
        let plain = e("outer", Some(e("inner", None)));
        assert_eq!(error_text(&plain), "outer: inner");
    }
}
