//! Reading every kind of file a user's folder holds: RFC 822 mail with MIME parts, charsets,
//! quoted-printable and base64; mbox; maildir trees; Markdown, HTML, text and PDF (a real one
//! written by fpdf2: `tests/peers/make_pdf_fixture.py`) — and the files that give no document
//! (empty, binary, not UTF-8, a broken PDF, mail without a text body) named with their reasons,
//! never a panic or an error.

use std::path::{Path, PathBuf};

use engram_corpus::{CorpusError, Kind, ingest};
use engram_io::Quiet;

fn put(root: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = root.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, bytes).unwrap();
    p
}

const MIME: &str = "From: =?iso-8859-1?Q?Ren=E9e_Dupr=E9?= <renee@example.com>\r
To: jeff@example.com\r
Subject: =?utf-8?B?UmU6IFByaWNpbmcg4oCTIFEz?=\r
Message-ID: <mime-1@example.com>\r
Date: Tue, 14 Nov 2000 09:12:00 -0800\r
MIME-Version: 1.0\r
Content-Type: multipart/mixed; boundary=\"XYZ\"\r
\r
--XYZ\r
Content-Type: text/plain; charset=iso-8859-1\r
Content-Transfer-Encoding: quoted-printable\r
\r
The caf=E9 contract closes on Friday; the price is =\r
$4.20 per MMBtu.\r
--XYZ\r
Content-Type: application/octet-stream; name=\"deal.xls\"\r
Content-Transfer-Encoding: base64\r
\r
AAECAwQFBgc=\r
--XYZ--\r
";

#[test]
fn every_kind_of_file_is_read_or_named() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, "mail/pricing.eml", MIME.as_bytes());
    put(
        r,
        "mail/b64.txt",
        b"From: a@example.com\nTo: b@example.com\nSubject: Storage\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\nVGhlIHN0b3JhZ2UgZmllbGQgaG9sZHMgMTIgQmNmLg==\n",
    );
    put(
        r,
        "mail/html-only.eml",
        b"From: a@example.com\nSubject: Newsletter\nContent-Type: text/html\n\n<html><body><p>Power prices <b>rose</b> 8%.</p></body></html>\n",
    );
    put(
        r,
        "mail/attachment-only.eml",
        b"From: a@example.com\nSubject: File\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0xLjQK\n",
    );
    put(
        r,
        "archive.mbox",
        b"From alice@example.com Mon Jan  1 00:00:00 2001\nFrom: alice@example.com\nSubject: One\n\nFirst message body.\n\nFrom bob@example.com Mon Jan  1 00:00:01 2001\nFrom: bob@example.com\nSubject: Two\n\n>From the desk: second body.\n",
    );
    put(
        r,
        "Maildir/Inbox/cur/1.host:2,S",
        b"From: c@example.com\nSubject: In cur\n\nRead message.\n",
    );
    put(
        r,
        "Maildir/Inbox/new/2.host",
        b"From: d@example.com\nSubject: In new\n\nUnread message.\n",
    );
    put(
        r,
        "Maildir/Inbox/tmp/3.host",
        b"From: e@example.com\n\nbeing delivered\n",
    );
    put(
        r,
        "notes/plan.md",
        b"# Q3 plan\n\nShip the *storage* report.\n",
    );
    put(
        r,
        "notes/page.html",
        b"<html><head><title>Desk memo</title></head><body><h1>Memo</h1><p>Hedge the basis.</p></body></html>",
    );
    put(
        r,
        "notes/plain.txt",
        "Plain notes, café, 2°C.\r\n".as_bytes(),
    );
    put(r, "notes/empty.txt", b"  \n\n");
    put(r, "notes/logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    put(r, "notes/latin1.txt", b"Caf\xe9 au lait\n");
    put(r, "notes/report.pdf", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n");
    put(
        r,
        "notes/memo.pdf",
        &std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/corpus-pdf/memo.pdf"),
        )
        .unwrap(),
    );
    put(r, "notes/.hidden", b"not read\n");

    let got = ingest(&[r.to_path_buf()], &Quiet).unwrap();
    assert_eq!(got.files, 15, "tmp/ and hidden files are not listed");
    let by_title = |t: &str| {
        got.documents
            .iter()
            .find(|d| d.title.as_deref() == Some(t))
            .unwrap_or_else(|| panic!("{t}: {:#?}", got.documents))
    };
    let mime = by_title("Re: Pricing – Q3");
    assert_eq!(mime.kind, Kind::Email);
    assert_eq!(
        mime.text,
        "The café contract closes on Friday; the price is $4.20 per MMBtu."
    );
    let p = &mime.provenance;
    assert_eq!(p.message_id.as_deref(), Some("mime-1@example.com"));
    assert_eq!(p.from.as_deref(), Some("Renée Dupré <renee@example.com>"));
    assert_eq!(p.date.as_deref(), Some("2000-11-14T09:12:00-08:00"));
    assert_eq!(by_title("Storage").text, "The storage field holds 12 Bcf.");
    assert!(
        by_title("Newsletter")
            .text
            .contains("Power prices rose 8%.")
    );
    assert_eq!(by_title("One").provenance.index, Some(0));
    assert_eq!(by_title("Two").provenance.index, Some(1));
    assert_eq!(by_title("Two").text, "From the desk: second body.");
    assert_eq!(
        by_title("In cur").provenance.folder.as_deref(),
        Some("Inbox")
    );
    assert_eq!(by_title("In new").text, "Unread message.");
    let md = by_title("Q3 plan");
    assert_eq!(
        (md.kind, md.text.as_str()),
        (Kind::Markdown, "# Q3 plan\n\nShip the *storage* report.")
    );
    let html = by_title("Desk memo");
    assert_eq!(html.kind, Kind::Html);
    assert!(
        html.text.ends_with("Memo\nHedge the basis."),
        "{}",
        html.text
    );
    let plain = got
        .documents
        .iter()
        .find(|d| d.provenance.file.ends_with("plain.txt"))
        .unwrap();
    assert_eq!(
        (plain.kind, plain.text.as_str()),
        (Kind::Text, "Plain notes, café, 2°C.")
    );
    let pdf = got
        .documents
        .iter()
        .find(|d| d.provenance.file.ends_with("memo.pdf"))
        .unwrap();
    assert_eq!(pdf.kind, Kind::Pdf);
    assert_eq!(pdf.title.as_deref(), Some("Gas storage review memo"));
    for said in [
        "Gas Storage Review",
        "in room EB-3321",
        "Tim Belden leads it",
        "Chris Foster and Jeff Richter.",
    ] {
        assert!(pdf.text.contains(said), "{said:?} in {:?}", pdf.text);
    }
    // Page 1 before page 2.
    assert!(pdf.text.find("EB-3321") < pdf.text.find("Portland"));
    assert_eq!(got.documents.len(), 11, "{:#?}", got.documents);

    let reason = |f: &str| {
        got.unreadable
            .iter()
            .find(|u| u.path.ends_with(f))
            .map(|u| (u.reason.as_str(), u.detail.as_str()))
            .unwrap_or_else(|| panic!("{f}: {:#?}", got.unreadable))
    };
    assert_eq!(reason("empty.txt").0, "empty");
    assert_eq!(
        reason("logo.png"),
        ("binary", "binary file (a NUL byte at offset 8)")
    );
    assert_eq!(
        reason("latin1.txt"),
        ("not-utf8", "not UTF-8 text (an invalid byte at offset 3)")
    );
    assert_eq!(reason("report.pdf").0, "unreadable-pdf");
    assert_eq!(reason("attachment-only.eml").0, "no-text-body");
    assert_eq!(got.unreadable.len(), 5);

    // Ids are stable (content hashes) and distinct.
    let again = ingest(&[r.to_path_buf()], &Quiet).unwrap();
    let ids: Vec<&str> = got.documents.iter().map(|d| d.id.as_str()).collect();
    let ids2: Vec<&str> = again.documents.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ids2);
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
}

#[test]
fn inputs_that_give_nothing_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-folder");
    let e = ingest(std::slice::from_ref(&missing), &Quiet).unwrap_err();
    assert!(matches!(e, CorpusError::Io { .. }));
    assert!(e.to_string().contains("no-such-folder"), "{e}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = ingest(&[empty], &Quiet).unwrap_err().to_string();
    assert!(e.contains("no files to read under"), "{e}");
    let junk = dir.path().join("junk");
    put(&junk, "a.bin", b"\0\0\0");
    put(&junk, "b.txt", b"");
    let e = ingest(&[junk], &Quiet).unwrap_err().to_string();
    assert!(
        e.contains("none of the 2 files") && e.contains("binary: 1") && e.contains("empty: 1"),
        "{e}"
    );
}

#[test]
fn a_walk_visits_each_file_once_and_names_what_it_skips() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    put(&docs, "a.txt", b"The meeting moved to Thursday.");
    put(&docs, "sub/b.md", b"# Budget\nThe budget is 4 million.");
    // Outside a maildir, a folder named tmp is the user's own and read.
    put(&docs, "tmp/c.txt", b"Notes kept in tmp.");
    // A symlink loop, and a second way to a folder: each file once, and no endless walk.
    std::os::unix::fs::symlink(&docs, docs.join("loop")).unwrap();
    std::os::unix::fs::symlink(docs.join("sub"), docs.join("again")).unwrap();
    // A pipe: never opened (reading it would wait forever).
    let fifo = docs.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // A file too large to read whole (sparse: no disk used).
    let big = std::fs::File::create(docs.join("disk.img")).unwrap();
    big.set_len(engram_corpus::MAX_FILE_BYTES + 1).unwrap();
    // The corpus written into the folder it reads: left out, or a second ingest would read
    // its documents back.
    put(&docs, "corpus/documents.jsonl", b"{\"id\": \"x\"}\n");
    let inputs = [docs.clone(), docs.join("sub")];
    let got = engram_corpus::ingest_except(&inputs, &[docs.join("corpus")], &Quiet).unwrap();
    let mut files: Vec<&str> = got
        .documents
        .iter()
        .map(|d| d.provenance.file.rsplit('/').next().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["a.txt", "b.md", "c.txt"], "{:?}", got.documents);
    let reasons: Vec<(&str, &str)> = got
        .unreadable
        .iter()
        .map(|u| (u.path.rsplit('/').next().unwrap(), u.reason.as_str()))
        .collect();
    for want in [
        ("pipe", "not-a-file"),
        ("disk.img", "too-large"),
        ("corpus", "corpus-output"),
    ] {
        assert!(reasons.contains(&want), "{want:?} in {reasons:?}");
    }
    // A maildir's tmp/ holds messages still being delivered: not read.
    let mail = dir.path().join("mail");
    put(&mail, "cur/1", MIME.as_bytes());
    put(&mail, "tmp/2", MIME.as_bytes());
    let got = ingest(&[mail], &Quiet).unwrap();
    assert_eq!((got.files, got.documents.len()), (1, 1));
}
