//! A document of a corpus: its text, its kind, a stable id and where it came from.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a document was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An email (RFC 822 file, `.eml`, a message of an mbox or maildir).
    Email,
    /// Plain text.
    Text,
    /// Markdown (kept as written).
    Markdown,
    /// HTML, as text.
    Html,
    /// PDF, its text as the PDF reader lays it out.
    Pdf,
}

impl Kind {
    /// Its name in manifests.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Email => "email",
            Kind::Text => "text",
            Kind::Markdown => "markdown",
            Kind::Html => "html",
            Kind::Pdf => "pdf",
        }
    }
}

/// Where a document came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The file, as given or found under a given directory.
    pub file: String,
    /// The message's position in an mbox file (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// `Message-ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The mail folder: `X-Folder` (the Enron export), else the maildir folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// The sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The date (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// `In-Reply-To`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
}

/// One document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// A stable id: `d` and 16 hex digits of the SHA-256 of the bytes it was read from (a
    /// message's own bytes in an mbox), so the same file gives the same id on every run.
    pub id: String,
    /// What it was read from.
    pub kind: Kind,
    /// The subject of an email, the first heading of Markdown, the title of HTML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The text, normalized ([`crate::normalize::normalize`]).
    pub text: String,
    /// Where it came from.
    pub provenance: Provenance,
}

/// The id of a document read from `raw`.
pub fn document_id(raw: &[u8]) -> String {
    let h = Sha256::digest(raw);
    format!(
        "d{}",
        h.iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}
