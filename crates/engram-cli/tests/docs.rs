//! The README and the book (`docs/src/`) hold together: every relative link resolves (file and
//! heading), `SUMMARY.md` lists every chapter, and every `engram` command shown in a shell code
//! block (`sh`/`bash` fences and indented blocks, `cargo run -p engram-cli -- …` included) parses:
//! the binary accepts its subcommand and flags, run with `--help` appended.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    engram_testkit::repo()
}

/// README.md and every Markdown file of the book.
fn pages() -> Vec<PathBuf> {
    let mut v = vec![repo().join("README.md")];
    let mut book: Vec<PathBuf> = std::fs::read_dir(repo().join("docs/src"))
        .expect("docs/src")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    book.sort();
    v.extend(book);
    v
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A line's text with its 1-based number, outside and inside code.
struct Line<'a> {
    no: usize,
    text: &'a str,
    /// The info string of the fence the line is in (`Some("")` for a bare fence), `None` outside.
    fence: Option<&'a str>,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if let Some(info) = l.trim_start().strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(info.trim()),
            };
            continue;
        }
        out.push(Line {
            no: i + 1,
            text: l,
            fence,
        });
    }
    out
}

/// GitHub's (and mdBook's) anchor of a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    lines(text)
        .into_iter()
        .filter(|l| l.fence.is_none() && l.text.starts_with('#'))
        .map(|l| slug(l.text.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` links outside code, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for l in lines(text).into_iter().filter(|l| l.fence.is_none()) {
        let mut rest = l.text;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((l.no, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_link_of_the_readme_and_the_book_resolves() {
    let mut bad = Vec::new();
    for page in pages() {
        let text = read(&page);
        for (no, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let at = format!("{}:{no}: {target}", page.display());
            if !file.exists() {
                bad.push(format!("{at} (no such file)"));
            } else if let Some(a) = anchor
                && !anchors(&read(&file)).contains(a)
            {
                bad.push(format!("{at} (no such heading)"));
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn the_summary_lists_every_chapter() {
    let src = repo().join("docs/src");
    let listed: BTreeSet<String> = links(&read(&src.join("SUMMARY.md")))
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    for page in pages().iter().skip(1) {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        if name != "SUMMARY.md" {
            assert!(listed.contains(&name), "docs/src/SUMMARY.md lacks {name}");
        }
    }
    assert!(repo().join("docs/book.toml").is_file());
    let readme = read(&repo().join("README.md"));
    assert!(
        readme.lines().count() <= 250,
        "README.md is the front page: 250 lines at most"
    );
}

/// Splits a shell command line into words: quotes and backslash escapes, nothing else.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None | Some('"'), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            // A comment runs to the end of the line.
            (None, '#') if !any && cur.is_empty() => break,
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (_, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The engram arguments of one shell command (`engram ARGS`, `cargo run … -p engram-cli … --
/// ARGS`, after any `VAR=value` assignments), up to a redirection.
fn engram_args(command: &[String]) -> Option<Vec<String>> {
    let start = command
        .iter()
        .position(|w| !w.contains('=') || w.starts_with('-'))?;
    let cmd = &command[start..];
    let args: &[String] = match cmd.first()?.as_str() {
        "engram" => &cmd[1..],
        "cargo" if cmd.get(1)? == "run" && cmd.iter().any(|w| w == "engram-cli") => {
            let dashes = cmd.iter().position(|w| w == "--")?;
            &cmd[dashes + 1..]
        }
        _ => return None,
    };
    Some(
        args.iter()
            .take_while(|w| !w.starts_with('>') && !w.starts_with("2>"))
            .cloned()
            .collect(),
    )
}

/// Every engram command of `text`'s shell blocks, with its line number.
fn commands(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for l in lines(text) {
        let shell = match l.fence {
            Some(info) => ["sh", "bash", "shell", "console"].contains(&info),
            None => l.text.starts_with("    ") && !l.text.trim().is_empty(),
        };
        if !shell {
            pending = None;
            continue;
        }
        let body = l.text.trim();
        let body = body.strip_prefix("$ ").unwrap_or(body);
        let (no, mut joined) = pending.take().unwrap_or((l.no, String::new()));
        if body.starts_with('#') && joined.is_empty() {
            continue;
        }
        match body.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
                pending = Some((no, joined));
            }
            None => {
                joined.push_str(body);
                let ws = words(&joined);
                for part in ws.split(|w| ["&&", "||", ";", "|"].contains(&w.as_str())) {
                    if let Some(args) = engram_args(part) {
                        out.push((no, args));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_command_shown_parses() {
    let mut bad = Vec::new();
    let mut seen = 0;
    for page in pages() {
        for (no, args) in commands(&read(&page)) {
            seen += 1;
            let out = Command::new(env!("CARGO_BIN_EXE_engram"))
                .args(&args)
                .arg("--help")
                .output()
                .unwrap();
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                let first = err.lines().next().unwrap_or("").to_string();
                bad.push(format!(
                    "{}:{no}: engram {}\n    {first}",
                    page.display(),
                    args.join(" ")
                ));
            }
        }
    }
    assert!(seen >= 20, "only {seen} commands found: the scan is broken");
    assert!(
        bad.is_empty(),
        "commands that do not parse:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scan_reads_shell_the_way_a_shell_does() {
    assert_eq!(
        words(r#"engram qa --x "a b" 'c d' e\ f a#b # comment"#),
        ["engram", "qa", "--x", "a b", "c d", "e f", "a#b"]
    );
    let text = "```sh\n# a comment\nX=1 cargo run -p engram-cli -- sweep e.toml \\\n    --dry-run > out.txt\n```\n\n    engram table r && ls\n\n```\nengram synopsis [--flag]\n```\n";
    assert_eq!(
        commands(text),
        [
            (3, vec!["sweep".into(), "e.toml".into(), "--dry-run".into()]),
            (7, vec!["table".into(), "r".into()]),
        ]
    );
    // A command that does not parse is caught.
    let out = Command::new(env!("CARGO_BIN_EXE_engram"))
        .args(["sweep", "e.toml", "--no-such-flag", "--help"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
