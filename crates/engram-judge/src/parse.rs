//! Reading a verdict out of a judge's answer. In order, the first that applies:
//!
//! 1. a JSON object with a `verdict` field (`correct`/`incorrect`, also inside a ``` fence),
//!    its `reason` the rationale — what the structured format returns;
//! 2. the last `VERDICT: CORRECT` / `VERDICT: INCORRECT` (markdown emphasis allowed), the text
//!    before it the rationale — what the explain-then-verdict prompt asks for;
//! 3. a verdict word (correct/incorrect, yes/no, true/false) as the answer's first word —
//!    verdict-first prompts ("Yes. The candidate …");
//! 4. a last line that is a verdict word alone — verdict-last answers without the label.
//!
//! A verdict word anywhere else does not count ("it is not correct" holds no verdict): such an
//! answer gets the follow-up turn instead ([`crate::protocol::FOLLOW_UP`]), whose reply is
//! parsed strictly by [`parse_follow_up`].

/// `(verdict, rationale)` read from a judge's answer, `None` when it holds no verdict.
pub fn parse_verdict(raw: &str) -> Option<(bool, Option<String>)> {
    if let Some(v) = json_verdict(raw) {
        return Some(v);
    }
    if let Some((v, pos)) = labelled_verdict(raw) {
        let rationale = raw[..pos]
            .trim_end_matches(['*', '_', '#', ' ', '\n'])
            .trim();
        return Some((v, (!rationale.is_empty()).then(|| rationale.to_string())));
    }
    let words = words_of(raw);
    if let Some(v) = words.first().and_then(|w| verdict_word(w)) {
        let rest = raw.trim_start();
        let rest = rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..].trim();
        return Some((v, (!rest.is_empty()).then(|| rest.to_string())));
    }
    let last = raw.lines().rev().find(|l| !l.trim().is_empty())?;
    match words_of(last).as_slice() {
        [w] => verdict_word(w).map(|v| {
            let before = raw[..raw.rfind(last).unwrap_or(0)].trim();
            (v, (!before.is_empty()).then(|| before.to_string()))
        }),
        _ => None,
    }
}

/// The follow-up's verdict: `VERDICT: CORRECT`/`INCORRECT` (as rule 2 of the module docs), or
/// a reply that is one verdict word and nothing else.
pub fn parse_follow_up(raw: &str) -> Option<bool> {
    if let Some((v, _)) = labelled_verdict(raw) {
        return Some(v);
    }
    match words_of(raw).as_slice() {
        [w] => verdict_word(w),
        _ => None,
    }
}

fn verdict_word(w: &str) -> Option<bool> {
    match w {
        "correct" | "yes" | "true" => Some(true),
        "incorrect" | "no" | "false" | "wrong" => Some(false),
        _ => None,
    }
}

fn words_of(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The last `verdict:` label followed (past spaces, quotes and markdown) by a verdict word,
/// and the label's byte offset.
fn labelled_verdict(raw: &str) -> Option<(bool, usize)> {
    let lower = raw.to_lowercase();
    let mut end = lower.len();
    while let Some(pos) = lower[..end].rfind("verdict") {
        let after = lower[pos + "verdict".len()..].trim_start_matches(['*', '_', ' ', '"']);
        if let Some(after) = after.strip_prefix(':') {
            let after =
                after.trim_start_matches(|c: char| !c.is_alphanumeric() && c != '\n' && c != '\r');
            let word: String = after.chars().take_while(|c| c.is_alphabetic()).collect();
            if let Some(v) = verdict_word(&word) {
                return Some((v, pos));
            }
        }
        end = pos;
    }
    None
}

/// A JSON object with a `verdict` field, the whole answer or inside a code fence.
fn json_verdict(raw: &str) -> Option<(bool, Option<String>)> {
    let text = raw.trim();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .map(|t| t.trim_end().trim_end_matches("```"))
        .unwrap_or(text);
    let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let verdict = verdict_word(&v.get("verdict")?.as_str()?.trim().to_lowercase())?;
    let reason = v
        .get("reason")
        .and_then(|r| r.as_str())
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_string);
    Some((verdict, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_parse_first_last_labelled_and_structured() {
        assert_eq!(
            parse_verdict("The times match.\nVERDICT: CORRECT"),
            Some((true, Some("The times match.".into())))
        );
        assert_eq!(parse_verdict("verdict: incorrect."), Some((false, None)));
        assert_eq!(
            parse_verdict("Same room.\n\n**Verdict:** Correct"),
            Some((true, Some("Same room.".into())))
        );
        // The label wins over words before it; the last label counts.
        assert_eq!(
            parse_verdict("Is it correct? VERDICT: X. Final VERDICT: INCORRECT").map(|v| v.0),
            Some(false)
        );
        // Verdict first.
        assert_eq!(parse_verdict("Yes"), Some((true, None)));
        assert_eq!(
            parse_verdict("No. The gold answer is Au."),
            Some((false, Some("The gold answer is Au.".into())))
        );
        // Verdict last, a line of its own.
        assert_eq!(
            parse_verdict("The candidate names another room.\n\nIncorrect."),
            Some((false, Some("The candidate names another room.".into())))
        );
        // Structured.
        assert_eq!(
            parse_verdict(r#"{"reason": "same amount", "verdict": "correct"}"#),
            Some((true, Some("same amount".into())))
        );
        assert_eq!(
            parse_verdict("```json\n{\"reason\": \"\", \"verdict\": \"incorrect\"}\n```"),
            Some((false, None))
        );
        // A verdict word inside the prose is no verdict: "not correct" is not "correct".
        assert_eq!(
            parse_verdict("It is not correct, so I would say no more"),
            None
        );
        assert_eq!(
            parse_verdict("The candidate answer gives the same information as the gold answer."),
            None
        );
        assert_eq!(parse_verdict(r#"{"reason": "cut off inside the rea"#), None);
        assert_eq!(parse_verdict("I cannot tell."), None);
    }

    #[test]
    fn follow_ups_parse_strictly() {
        assert_eq!(parse_follow_up("VERDICT: CORRECT"), Some(true));
        assert_eq!(parse_follow_up("**VERDICT: INCORRECT**"), Some(false));
        assert_eq!(parse_follow_up("Incorrect."), Some(false));
        assert_eq!(parse_follow_up("The answer is correct"), None);
        assert_eq!(parse_follow_up("I still cannot tell."), None);
    }
}
