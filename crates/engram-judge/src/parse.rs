//! Reading a verdict out of a judge's free text. The prompt asks for a last line
//! `VERDICT: CORRECT` or `VERDICT: INCORRECT`; failing that, the last standalone verdict word
//! (correct/incorrect, yes/no, true/false) counts. Anything else is unparseable.

/// `(verdict, rationale)`: the verdict, and the text before it as the rationale.
pub fn parse_verdict(raw: &str) -> Option<(bool, Option<String>)> {
    let lower = raw.to_lowercase();
    if let Some(pos) = lower.rfind("verdict:") {
        let after = lower[pos + "verdict:".len()..].trim_start();
        let word: String = after.chars().take_while(|c| c.is_alphabetic()).collect();
        let v = match word.as_str() {
            "correct" | "yes" | "true" => Some(true),
            "incorrect" | "no" | "false" | "wrong" => Some(false),
            _ => None,
        };
        if let Some(v) = v {
            let rationale = raw[..pos].trim();
            return Some((v, (!rationale.is_empty()).then(|| rationale.to_string())));
        }
    }
    let words: Vec<String> = lower
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    for w in words.iter().rev() {
        match w.as_str() {
            "correct" | "yes" | "true" => return Some((true, None)),
            "incorrect" | "no" | "false" => return Some((false, None)),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_parse() {
        assert_eq!(
            parse_verdict("The times match.\nVERDICT: CORRECT"),
            Some((true, Some("The times match.".into())))
        );
        assert_eq!(parse_verdict("verdict: incorrect."), Some((false, None)));
        assert_eq!(parse_verdict("Yes"), Some((true, None)));
        assert_eq!(
            parse_verdict("It is not correct, so: no"),
            Some((false, None))
        );
        assert_eq!(parse_verdict("I cannot tell."), None);
    }
}
