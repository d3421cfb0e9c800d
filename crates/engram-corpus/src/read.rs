//! Reading documents from files and directories (`engram corpus ingest`). Directories are
//! walked recursively in name order (maildir trees included: their `cur/` and `new/` files are
//! messages). Each file is told apart by its extension and its first bytes:
//!
//! - mail: `.eml`, or a file whose first lines are RFC 822 headers (`From:`, `Subject:`,
//!   `Message-ID:` …), parsed with `mail-parser` (MIME parts, charsets, quoted-printable,
//!   base64; an HTML-only body as text);
//! - mbox: `.mbox`, or a file opening with a `From ` line: each message as above;
//! - `.pdf` (or a file opening with `%PDF`): its text and title ([`crate::pdf`]);
//! - `.html`/`.htm` as text, `.md`/`.markdown` as written, anything else as UTF-8 text.
//!
//! What cannot be read — an empty file, a binary one, text that is not UTF-8, a message
//! without a text body, a PDF the reader cannot read — is an [`Unreadable`] with its reason,
//! never an error.

use std::io::BufReader;
use std::path::{Path, PathBuf};

use engram_io::Progress;
use mail_parser::{Address, HeaderValue, MessageParser};
use serde::{Deserialize, Serialize};

use crate::document::{Document, Kind, Provenance, document_id};
use crate::error::{CorpusError, Result};
use crate::normalize::normalize;
use crate::pdf::read_pdf;

/// A file (or a message of one) that gave no document, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unreadable {
    /// The file (`file#N` for the N-th message of an mbox).
    pub path: String,
    /// The reason's short name, counted in the manifest (`empty`, `binary`, `not-utf8`,
    /// `unparseable-email`, `no-text-body`, `unreadable-pdf`, `io`, `too-large`, `not-a-file`,
    /// `corpus-output`).
    pub reason: String,
    /// The reason in words.
    pub detail: String,
}

/// What reading gave.
#[derive(Debug, Clone, Default)]
pub struct Ingested {
    /// The documents, in the order their files were found.
    pub documents: Vec<Document>,
    /// What could not be read.
    pub unreadable: Vec<Unreadable>,
    /// Files seen.
    pub files: usize,
}

/// Files larger than this are named and skipped (`too-large`) rather than read whole: a disk
/// image or a video in a documents folder would otherwise take the process's memory.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The files under `paths` (files as given, directories walked in name order) and what the
/// walk skipped with its reason, leaving out the directories `except` (the corpus being
/// written, when it lies under an input). Each directory and each file is visited once, however many
/// ways lead to it (a symlink loop, overlapping inputs); symlinks are followed. Hidden entries
/// and a maildir's `tmp/` (messages still being delivered) are not read; a folder that cannot
/// be listed, an entry that is neither a file nor a folder (a FIFO, a device, a broken link) is
/// named with its reason. An input that does not exist is an error.
fn list_files(paths: &[PathBuf], except: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<Unreadable>)> {
    let mut w = Walk {
        except: except
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect(),
        ..Walk::default()
    };
    for p in paths {
        let meta = std::fs::metadata(p).map_err(CorpusError::io(p))?;
        if meta.is_dir() {
            w.dir(p);
        } else {
            w.entry(p, &meta);
        }
    }
    Ok((w.files, w.skipped))
}

/// A walk of the inputs: what it found, what it skipped, where it has been.
#[derive(Default)]
struct Walk {
    files: Vec<PathBuf>,
    skipped: Vec<Unreadable>,
    seen: std::collections::HashSet<PathBuf>,
    except: Vec<PathBuf>,
}

impl Walk {
    fn skip(&mut self, path: &Path, reason: &str, detail: String) {
        self.skipped.push(Unreadable {
            path: path.display().to_string(),
            reason: reason.into(),
            detail,
        });
    }

    /// Whether canonical path `canonical` is seen for the first time (a path that has none is
    /// always new).
    fn first_visit(&mut self, canonical: Option<PathBuf>) -> bool {
        canonical.is_none_or(|c| self.seen.insert(c))
    }

    fn dir(&mut self, dir: &Path) {
        let canonical = std::fs::canonicalize(dir).ok();
        if canonical.as_ref().is_some_and(|c| self.except.contains(c)) {
            return self.skip(
                dir,
                "corpus-output",
                "the corpus being written (its files read back would repeat every document)".into(),
            );
        }
        if !self.first_visit(canonical) {
            return;
        }
        let listing = match std::fs::read_dir(dir) {
            Ok(l) => l,
            Err(e) => return self.skip(dir, "io", format!("cannot list the folder: {e}")),
        };
        let mut entries = Vec::new();
        for e in listing {
            match e {
                Ok(e) => entries.push(e.path()),
                Err(e) => self.skip(dir, "io", format!("cannot list the folder: {e}")),
            }
        }
        entries.sort();
        let maildir = dir.join("cur").is_dir() || dir.join("new").is_dir();
        for e in entries {
            let name = e.file_name().map(|n| n.to_string_lossy().into_owned());
            if name
                .as_deref()
                .is_some_and(|n| n.starts_with('.') || (maildir && n == "tmp"))
            {
                continue;
            }
            match std::fs::metadata(&e) {
                Ok(meta) if meta.is_dir() => self.dir(&e),
                Ok(meta) => self.entry(&e, &meta),
                Err(err) => self.skip(&e, "io", err.to_string()),
            }
        }
    }

    /// A non-folder entry: a file to read, unless another way led to it already.
    fn entry(&mut self, path: &Path, meta: &std::fs::Metadata) {
        if !meta.is_file() {
            return self.skip(
                path,
                "not-a-file",
                "neither a file nor a folder (a pipe, a device or a socket)".into(),
            );
        }
        if self.first_visit(std::fs::canonicalize(path).ok()) {
            self.files.push(path.to_path_buf());
        }
    }
}

/// Reads every file under `paths` (see the module docs), reporting a `reading` task of one
/// step per file. Errors only for an input that does not exist, holds no file, or whose files
/// were all unreadable (with the counts per reason).
pub fn ingest(paths: &[PathBuf], progress: &dyn Progress) -> Result<Ingested> {
    ingest_except(paths, &[], progress)
}

/// [`ingest`], leaving out the directories `except` (the corpus being written, when it lies
/// under an input: its documents read back would repeat every one).
pub fn ingest_except(
    paths: &[PathBuf],
    except: &[PathBuf],
    progress: &dyn Progress,
) -> Result<Ingested> {
    let inputs = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let (files, skipped) = list_files(paths, except)?;
    if files.is_empty() {
        return Err(CorpusError::NoFiles(inputs));
    }
    let mut got = Ingested {
        files: files.len(),
        unreadable: skipped,
        ..Ingested::default()
    };
    progress.begin("reading", Some(files.len() as u64));
    for f in &files {
        read_file(f, &mut got);
        progress.advance(1);
    }
    progress.end();
    if got.documents.is_empty() {
        return Err(CorpusError::NothingRead {
            inputs,
            files: got.files,
            reasons: reason_counts(&got.unreadable),
        });
    }
    Ok(got)
}

/// How many of `u` have each reason.
pub fn count_reasons(u: &[Unreadable]) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for x in u {
        *counts.entry(x.reason.clone()).or_default() += 1;
    }
    counts
}

/// `reason: count` pairs, most frequent first.
pub fn reason_counts(u: &[Unreadable]) -> String {
    let mut v: Vec<_> = count_reasons(u).into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.iter()
        .map(|(r, n)| format!("{r}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn unreadable(got: &mut Ingested, path: String, reason: &str, detail: String) {
    got.unreadable.push(Unreadable {
        path,
        reason: reason.into(),
        detail,
    });
}

fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Reads one file into `got`.
fn read_file(path: &Path, got: &mut Ingested) {
    let shown = path.display().to_string();
    if let Ok(meta) = std::fs::metadata(path)
        && meta.len() > MAX_FILE_BYTES
    {
        return unreadable(
            got,
            shown,
            "too-large",
            format!(
                "{} bytes, more than the {MAX_FILE_BYTES} a document may have",
                meta.len()
            ),
        );
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return unreadable(got, shown, "io", e.to_string()),
    };
    let ext = extension(path);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return unreadable(got, shown, "empty", "empty file".into());
    }
    if ext == "pdf" || bytes.starts_with(b"%PDF") {
        return match read_pdf(&bytes) {
            Ok((title, body)) => {
                let text = normalize(&body);
                if text.is_empty() {
                    return unreadable(
                        got,
                        shown,
                        "empty",
                        "no text once read (a scanned PDF needs OCR first)".into(),
                    );
                }
                got.documents.push(Document {
                    id: document_id(&bytes),
                    kind: Kind::Pdf,
                    title,
                    text,
                    provenance: Provenance {
                        file: shown,
                        folder: maildir_folder(path),
                        ..Provenance::default()
                    },
                });
            }
            Err((reason, detail)) => unreadable(got, shown, reason, detail),
        };
    }
    if let Some(at) = bytes.iter().take(8192).position(|&b| b == 0) {
        return unreadable(
            got,
            shown,
            "binary",
            format!("binary file (a NUL byte at offset {at})"),
        );
    }
    let provenance = Provenance {
        file: shown.clone(),
        folder: maildir_folder(path),
        ..Provenance::default()
    };
    // An mbox opens with its `From ` separator line (a header has a colon after its name).
    if ext == "mbox" || bytes.starts_with(b"From ") {
        return read_mbox(path, &provenance, got);
    }
    if ext == "eml" || looks_like_headers(&bytes) {
        return match read_email(&bytes, provenance) {
            Ok(d) => got.documents.push(d),
            Err((reason, detail)) => unreadable(got, shown, reason, detail),
        };
    }
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => {
            return unreadable(
                got,
                shown,
                "not-utf8",
                format!(
                    "not UTF-8 text (an invalid byte at offset {})",
                    e.valid_up_to()
                ),
            );
        }
    };
    let (kind, title, body) = match ext.as_str() {
        "html" | "htm" => (Kind::Html, html_title(text), html_text(text)),
        "md" | "markdown" => (Kind::Markdown, markdown_title(text), text.to_string()),
        _ => (Kind::Text, None, text.to_string()),
    };
    let text = normalize(&body);
    if text.is_empty() {
        return unreadable(got, shown, "empty", "no text once read".into());
    }
    got.documents.push(Document {
        id: document_id(&bytes),
        kind,
        title,
        text,
        provenance,
    });
}

/// The folder of a file in a maildir tree (`…/Folder/cur/file`: `Folder`).
fn maildir_folder(path: &Path) -> Option<String> {
    let parent = path.parent()?;
    let leaf = parent.file_name()?.to_string_lossy();
    (leaf == "cur" || leaf == "new")
        .then(|| parent.parent()?.file_name())
        .flatten()
        .map(|f| f.to_string_lossy().into_owned())
}

/// Whether `bytes` open with RFC 822 headers: of the first five lines, at least two are
/// `Name: value` and one names a header every message has.
fn looks_like_headers(bytes: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let mut fields = 0;
    let mut known = false;
    for line in head.lines().take(5) {
        let Some((name, _)) = line.split_once(':') else {
            continue;
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        fields += 1;
        known |= [
            "from",
            "to",
            "subject",
            "date",
            "message-id",
            "received",
            "return-path",
            "mime-version",
        ]
        .contains(&name.to_ascii_lowercase().as_str());
    }
    fields >= 2 && known
}

fn read_mbox(path: &Path, base: &Provenance, got: &mut Ingested) {
    let shown = path.display().to_string();
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return unreadable(got, shown, "io", e.to_string()),
    };
    let messages = mail_parser::mailbox::mbox::MessageIterator::new(BufReader::new(file));
    for (i, m) in messages.enumerate() {
        let at = format!("{shown}#{i}");
        let m = match m {
            Ok(m) => m,
            Err(e) => return unreadable(got, at, "io", e.to_string()),
        };
        let provenance = Provenance {
            index: Some(i),
            ..base.clone()
        };
        match read_email(m.contents(), provenance) {
            Ok(d) => got.documents.push(d),
            Err((reason, detail)) => unreadable(got, at, reason, detail),
        }
    }
}

fn text_of(v: &HeaderValue) -> Option<String> {
    match v {
        HeaderValue::Text(t) => Some(t.to_string()),
        HeaderValue::TextList(l) => l.first().map(|t| t.to_string()),
        _ => None,
    }
}

fn first_address(a: &Address) -> Option<String> {
    let first = a.first()?;
    match (&first.name, &first.address) {
        (Some(n), Some(e)) => Some(format!("{n} <{e}>")),
        (None, Some(e)) => Some(e.to_string()),
        (Some(n), None) => Some(n.to_string()),
        (None, None) => None,
    }
}

/// One message: its text body (or its HTML body as text), subject and headers.
fn read_email(
    raw: &[u8],
    mut provenance: Provenance,
) -> std::result::Result<Document, (&'static str, String)> {
    let msg = MessageParser::default()
        .parse(raw)
        .ok_or(("unparseable-email", "not a parseable email".to_string()))?;
    let body = msg.body_text(0).ok_or((
        "no-text-body",
        "an email without a text body (attachments only?)".to_string(),
    ))?;
    let text = normalize(&body);
    if text.is_empty() {
        return Err(("empty", "an email with an empty body".into()));
    }
    provenance.message_id = msg.message_id().map(str::to_string);
    if let Some(folder) = msg.header_raw("X-Folder") {
        provenance.folder = Some(folder.trim().to_string());
    }
    provenance.from = msg.from().and_then(first_address);
    provenance.date = msg.date().map(|d| d.to_rfc3339());
    provenance.in_reply_to = text_of(msg.in_reply_to());
    Ok(Document {
        id: document_id(raw),
        kind: Kind::Email,
        title: msg.subject().map(|s| s.trim().to_string()),
        text,
        provenance,
    })
}

/// HTML as text: mail-parser's conversion (entities, scripts and styles dropped), with a line
/// break after each block element it would otherwise run into the next (it breaks after
/// `<br>` and `</p>` only).
fn html_text(html: &str) -> String {
    let mut s = html.to_string();
    for tag in [
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "div",
        "li",
        "tr",
        "ul",
        "ol",
        "table",
        "pre",
        "blockquote",
        "title",
    ] {
        for t in [tag.to_string(), tag.to_ascii_uppercase()] {
            s = s.replace(&format!("</{t}>"), &format!("</{t}><br>"));
        }
    }
    mail_parser::decoders::html::html_to_text(&s)
}

fn markdown_title(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().to_string())
}

fn html_title(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<title>")? + "<title>".len();
    let end = start + lower[start..].find("</title>")?;
    let t = text.get(start..end)?.trim();
    (!t.is_empty()).then(|| t.to_string())
}
