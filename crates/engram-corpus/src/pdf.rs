//! PDF text, through the `pdf-extract` crate (over `lopdf`): the text of every page in reading
//! order as the crate lays it out, and the document's title from its metadata (`/Info
//! /Title`). A PDF the crates cannot read — corrupt, encrypted, or one that makes the crate
//! panic — is a reason, never a failure of the run: the panic is caught here.

use pdf_extract::{Document, Object};

/// Title and text of a PDF, or the reason's short name and its words.
pub fn read_pdf(bytes: &[u8]) -> Result<(Option<String>, String), (&'static str, String)> {
    // A panic's message may quote the document (`pdf-extract` panics with the PDF object it
    // could not use), and the default hook prints it: silenced while the reader runs. Ingest
    // reads one file at a time, so no other thread's panic is due in that window.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let run = std::panic::catch_unwind(|| {
        let text = pdf_extract::extract_text_from_mem(bytes).map_err(|e| e.to_string())?;
        Ok::<_, String>((title(bytes), text))
    });
    std::panic::set_hook(hook);
    match run {
        Ok(Ok(got)) => Ok(got),
        Ok(Err(e)) => Err(("unreadable-pdf", format!("PDF: {e}"))),
        Err(_) => Err((
            "unreadable-pdf",
            "PDF: the PDF reader gave up on it (malformed)".into(),
        )),
    }
}

/// `/Info /Title`, when present and not blank.
fn title(bytes: &[u8]) -> Option<String> {
    let doc = Document::load_mem(bytes).ok()?;
    let info = match doc.trailer.get(b"Info").ok()? {
        Object::Reference(id) => doc.get_object(*id).ok()?,
        other => other,
    };
    let raw = info.as_dict().ok()?.get(b"Title").ok()?.as_str().ok()?;
    let t = decode_text_string(raw);
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// A PDF text string: UTF-16BE after its byte-order mark, else one byte a character (PDFDoc
/// encoding, read as Latin-1: equal for the printable ASCII and Latin-1 ranges).
fn decode_text_string(raw: &[u8]) -> String {
    match raw.strip_prefix(&[0xFE, 0xFF]) {
        Some(be) => {
            let units: Vec<u16> = be
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16_lossy(&units)
        }
        None => raw.iter().map(|&b| b as char).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_strings_decode() {
        assert_eq!(decode_text_string(b"Memo"), "Memo");
        assert_eq!(decode_text_string(&[0xFE, 0xFF, 0, b'M', 0, 0xE9]), "Mé");
        assert_eq!(decode_text_string(&[b'c', b'a', b'f', 0xE9]), "café");
    }

    #[test]
    fn garbage_is_a_reason() {
        let (reason, detail) = read_pdf(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n").unwrap_err();
        assert_eq!(reason, "unreadable-pdf");
        assert!(detail.starts_with("PDF:"), "{detail}");
    }
}
