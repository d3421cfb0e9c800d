//! Reading what the LLM wrote: a JSON object (also inside a ``` fence or after some prose) for
//! pairs, choices and grades, with plain-text fallbacks where a small model answers in words.
//! A reply that holds nothing usable is `None` (or the reason), never a panic.

use serde_json::Value;

/// The first JSON object in `text`: the whole text, else each `{ … }` span from the first `{`
/// to a later `}` that parses.
pub fn json_object(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(t) {
        return Some(v);
    }
    for (i, _) in t.match_indices('{') {
        let tail = &t[i..];
        for (j, _) in tail
            .match_indices('}')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&tail[..=j]) {
                return Some(v);
            }
        }
    }
    None
}

fn field(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A question–answer pair: `{"question": …, "answer": …}`, or the reason there is none.
pub fn parse_pair(text: &str) -> Result<(String, String), String> {
    let v = json_object(text).ok_or("the reply holds no JSON object")?;
    let q = field(&v, "question").ok_or("the reply's JSON has no `question` string")?;
    let a = field(&v, "answer").ok_or("the reply's JSON has no `answer` string")?;
    Ok((q, a))
}

/// The number of the chosen document: `{"document": N}`, else the first number in the text.
pub fn parse_choice(text: &str) -> Option<usize> {
    if let Some(v) = json_object(text) {
        match v.get("document") {
            Some(Value::Number(n)) => return n.as_u64().map(|n| n as usize),
            Some(Value::String(s)) => return first_number(s),
            _ => {}
        }
    }
    first_number(text)
}

fn first_number(text: &str) -> Option<usize> {
    let digits: String = text
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A rubric's grade and reason: `{"reason": …, "verdict": "pass"|"fail"}`, else `pass`/`fail`
/// as the first word.
pub fn parse_grade(text: &str) -> Option<(bool, String)> {
    let word = |s: &str| match s.trim().to_lowercase().as_str() {
        "pass" | "passes" | "yes" | "good" => Some(true),
        "fail" | "fails" | "no" | "bad" => Some(false),
        _ => None,
    };
    if let Some(v) = json_object(text)
        && let Some(g) = field(&v, "verdict").and_then(|s| word(&s))
    {
        return Some((g, field(&v, "reason").unwrap_or_default()));
    }
    let first = text
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())?;
    word(first).map(|g| (g, text.trim().to_string()))
}

/// A rephrased question: `{"question": …}`, else the first line that is not a label, without
/// quotes.
pub fn parse_rephrase(text: &str) -> Option<String> {
    if let Some(v) = json_object(text) {
        return field(&v, "question");
    }
    text.lines()
        .map(str::trim)
        .map(|l| {
            l.split_once(':')
                .filter(|(label, _)| label.to_lowercase().contains("question"))
                .map_or(l, |(_, rest)| rest.trim())
        })
        .map(|l| l.trim_matches(['"', '“', '”', '*', '`']).trim())
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_from_json_fences_and_words() {
        assert_eq!(
            parse_pair("Sure!\n```json\n{\"question\": \"Q?\", \"answer\": \" A \"}\n```"),
            Ok(("Q?".into(), "A".into()))
        );
        assert!(
            parse_pair("{\"question\": \"Q?\"}")
                .unwrap_err()
                .contains("answer")
        );
        assert!(parse_pair("no json").unwrap_err().contains("no JSON"));
        assert_eq!(parse_choice("{\"document\": 7}"), Some(7));
        assert_eq!(parse_choice("Document 3 answers it."), Some(3));
        assert_eq!(parse_choice("none"), None);
        assert_eq!(
            parse_grade("{\"reason\": \"clear\", \"verdict\": \"pass\"}"),
            Some((true, "clear".into()))
        );
        assert_eq!(parse_grade("FAIL: vague").map(|g| g.0), Some(false));
        assert_eq!(parse_grade("It is fine"), None);
        assert_eq!(
            parse_rephrase("Rephrased question: \"When is it?\"").as_deref(),
            Some("When is it?")
        );
        assert_eq!(
            parse_rephrase("{\"question\": \"When?\"}").as_deref(),
            Some("When?")
        );
    }
}
