//! `tojson` as transformers defines it for chat templates: Python's `json.dumps(x,
//! ensure_ascii=False, indent=indent)` (minijinja's own `tojson` escapes HTML characters, which
//! transformers does not).

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind};

fn escape(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn float_repr(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else if f == f.trunc() && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

fn write(v: &Value, indent: Option<usize>, level: usize, out: &mut String) -> Result<(), Error> {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if v.is_integer() {
                out.push_str(&v.to_string());
            } else {
                out.push_str(&float_repr(f64::try_from(v.clone())?));
            }
        }
        ValueKind::String => escape(v.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                write(item, indent, level + 1, out)?;
            }
            newline(out, level);
            out.push(']');
        }
        ValueKind::Map => {
            let keys: Vec<Value> = v.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                escape(&k.to_string(), out);
                out.push_str(": ");
                write(&v.get_item(k)?, indent, level + 1, out)?;
            }
            newline(out, level);
            out.push('}');
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: cannot serialize a {:?}", v.kind()),
            ));
        }
    }
    Ok(())
}

/// The `tojson` filter: `value | tojson` or `value | tojson(indent=4)`.
pub fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    write(&value, indent, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dumps(v: Value, indent: Option<usize>) -> String {
        let mut s = String::new();
        write(&v, indent, 0, &mut s).unwrap();
        s
    }

    #[test]
    fn matches_python_json_dumps() {
        let v: Value = serde_json::from_str::<serde_json::Value>(
            r#"{"name": "get_time", "parameters": {"tz": "café \"x\"\n", "n": [1, 2.5, true, null]}, "e": {}}"#,
        )
        .map(Value::from_serialize)
        .unwrap();
        // json.dumps(..., ensure_ascii=False)
        assert_eq!(
            dumps(v.clone(), None),
            r#"{"name": "get_time", "parameters": {"tz": "café \"x\"\n", "n": [1, 2.5, true, null]}, "e": {}}"#
        );
        // json.dumps(..., ensure_ascii=False, indent=2)
        assert_eq!(
            dumps(v, Some(2)),
            "{\n  \"name\": \"get_time\",\n  \"parameters\": {\n    \"tz\": \"café \\\"x\\\"\\n\",\n    \"n\": [\n      1,\n      2.5,\n      true,\n      null\n    ]\n  },\n  \"e\": {}\n}"
        );
    }
}
