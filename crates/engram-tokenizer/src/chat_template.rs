//! Chat templates rendered like transformers' `apply_chat_template`: Jinja with `trim_blocks` and
//! `lstrip_blocks`, Python string methods (`.strip()`, `.startswith()`...), `raise_exception`,
//! `strftime_now`, Python-style `tojson`, and the special tokens (`bos_token`, `eos_token`...) in
//! the context.

use std::collections::BTreeMap;

use minijinja::{Environment, Error, ErrorKind, Value};
use serde::{Deserialize, Serialize};

use crate::error::{Result, TokenizerError};

/// One chat turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// "system", "user" or "assistant".
    pub role: String,
    /// The text of the turn.
    pub content: String,
}

impl Message {
    /// A message with the given role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A user turn.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }

    /// An assistant turn.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }

    /// A system turn.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }
}

/// A compiled chat template plus the special-token strings it may reference.
pub struct ChatTemplate {
    env: Environment<'static>,
    origin: String,
    special_tokens: BTreeMap<String, String>,
}

fn raise_exception(msg: String) -> std::result::Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

/// `strftime_now(format)`: the current local time (transformers' `datetime.now()`: the time
/// zone `TZ` or the system sets), formatted with the C strftime codes templates use.
pub fn strftime_now(format: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    strftime(secs + utc_offset(secs), format)
}

/// Seconds east of UTC of the local time zone at `unix` (the C library's `localtime_r`,
/// which reads `TZ`); 0 where it cannot tell.
pub fn utc_offset(unix: i64) -> i64 {
    #[cfg(unix)]
    {
        let t = unix as libc::time_t;
        // SAFETY: `tm` is plain data, zeroes a valid value; both pointers are valid for the
        // call, and localtime_r writes only through the second.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
            return 0;
        }
        tm.tm_gmtoff as i64
    }
    #[cfg(not(unix))]
    {
        let _ = unix;
        0
    }
}

/// Formats a unix time (UTC) with the strftime codes chat templates use (%d %m %Y %y %b %B %H %M %S %A %a %j %%).
pub fn strftime(unix: i64, format: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let cum = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = cum[(m - 1) as usize] + d + i64::from(leap && m > 2);
    let weekday = DAYS[days.rem_euclid(7) as usize];
    let month = MONTHS[(m - 1) as usize];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y % 100)),
            Some('b') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            Some('a') => out.push_str(&weekday[..3]),
            Some('A') => out.push_str(weekday),
            Some('H') => out.push_str(&format!("{:02}", secs / 3600)),
            Some('M') => out.push_str(&format!("{:02}", secs / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", secs % 60)),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

impl ChatTemplate {
    /// Compiles `source`. `special_tokens` maps names such as `bos_token` to their strings.
    pub fn new(
        source: &str,
        special_tokens: BTreeMap<String, String>,
        origin: impl Into<String>,
    ) -> Result<Self> {
        let origin = origin.into();
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", |format: String| strftime_now(&format));
        env.add_filter("tojson", crate::pyjson::tojson);
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| TokenizerError::Template {
                origin: origin.clone(),
                message: format!("{e:#}"),
            })?;
        Ok(Self {
            env,
            origin,
            special_tokens,
        })
    }

    /// Renders `messages`; with `add_generation_prompt` the assistant header is left open.
    /// `extra` adds template variables (e.g. `date_string` for Llama 3.1).
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        extra: &BTreeMap<String, serde_json::Value>,
    ) -> Result<String> {
        let tmpl = self.env.get_template("chat").expect("added in new");
        let mut ctx: BTreeMap<String, Value> = self
            .special_tokens
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        ctx.insert("messages".into(), Value::from_serialize(messages));
        ctx.insert(
            "add_generation_prompt".into(),
            Value::from(add_generation_prompt),
        );
        ctx.insert("tools".into(), Value::from(()));
        ctx.insert("documents".into(), Value::from(()));
        for (k, v) in extra {
            ctx.insert(k.clone(), Value::from_serialize(v));
        }
        tmpl.render(ctx).map_err(|e| TokenizerError::Template {
            origin: self.origin.clone(),
            message: match e.kind() {
                ErrorKind::InvalidOperation => e.detail().unwrap_or("").to_string(),
                _ => format!("{e:#}"),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strftime_matches_python() {
        // datetime.fromtimestamp(1721952000, timezone.utc).strftime(...) == "26 Jul 2024"
        assert_eq!(strftime(1_721_952_000, "%d %b %Y"), "26 Jul 2024");
        assert_eq!(
            strftime(1_709_210_096, "%A %d %B %Y %H:%M:%S %j %y %m %%"),
            "Thursday 29 February 2024 12:34:56 060 24 02 %"
        );
        assert_eq!(strftime(0, "%Y-%m-%d %a"), "1970-01-01 Thu");
    }

    #[test]
    fn raise_exception_surfaces_its_message() {
        let t = ChatTemplate::new(
            "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}ok",
            BTreeMap::new(),
            "test",
        )
        .unwrap();
        let err = t
            .render(&[Message::assistant("x")], false, &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("first must be user"), "{err}");
        assert_eq!(
            t.render(&[Message::user("x")], false, &BTreeMap::new())
                .unwrap(),
            "ok"
        );
    }

    #[test]
    fn python_string_methods_and_trim_blocks() {
        let t = ChatTemplate::new(
            "{% for m in messages %}\n  {{ m.content.strip() }}|{{ m.role.upper() }}\n{% endfor %}",
            BTreeMap::new(),
            "test",
        )
        .unwrap();
        let out = t
            .render(&[Message::user("  hi  ")], false, &BTreeMap::new())
            .unwrap();
        assert_eq!(out, "  hi|USER\n");
    }
}
