//! Each rule of the filter on documents made to break it, among the real Enron messages: an
//! exact copy, the same message with a footer (a near-duplicate), a reply quoting a message in
//! full, a German message, a short note — each dropped by its rule, naming the document it
//! duplicates or the value against the limit; the originals kept.

use std::path::Path;

use engram_corpus::{Document, FilterConfig, filter, ingest};
use engram_io::Quiet;

#[test]
fn each_rule_drops_what_breaks_it_and_names_why() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/enron-emails/maildir");
    if !dir.is_dir() {
        eprintln!("SKIPPED: ../shared/data/enron-emails/maildir is absent");
        return;
    }
    let mut docs = ingest(&[dir], &Quiet).unwrap().documents;
    let cfg = FilterConfig::default();
    let base = filter(&docs, &cfg, &Quiet).unwrap();
    // Three long messages the filter keeps.
    let long: Vec<usize> = base
        .kept()
        .into_iter()
        .filter(|&i| docs[i].text.split_whitespace().count() > 200 && docs[i].title.is_some())
        .take(3)
        .collect();
    let (a, b, c) = (
        docs[long[0]].clone(),
        docs[long[1]].clone(),
        docs[long[2]].clone(),
    );
    let made = |id: &str, title: Option<String>, text: String| Document {
        id: id.into(),
        title,
        text,
        ..a.clone()
    };
    docs.push(made("copy", a.title.clone(), a.text.clone()));
    docs.push(made(
        "footer",
        b.title.clone(),
        format!("{}\n\nSent from the trading floor.", b.text),
    ));
    docs.push(made(
        "reply",
        Some(format!("RE: {}", c.title.clone().unwrap())),
        format!(
            "Agreed, let us move ahead with this. I went through the numbers again with the desk this \
             morning and they hold up, although the storage assumptions for the winter months look \
             optimistic to me and we should ask the pipeline for their latest schedule before we \
             sign anything. Can you set up a call on Monday with legal and the origination team so \
             that we can settle the terms, the credit support and the delivery points in one go?\n\n\
             -----Original Message-----\n{}",
            c.text.lines().map(|l| format!("> {l}")).collect::<Vec<_>>().join("\n")
        ),
    ));
    docs.push(made(
        "german",
        Some("Vertrag".into()),
        "Der Händler sagte, dass der Gaspreis des Geschäfts sich nächste Woche mit der Nachfrage bewegen müsse. \
         Wir haben die Bedingungen des Vertrags mit dem Lieferanten besprochen und werden die Unterlagen \
         bis Freitag an die Rechtsabteilung schicken, damit sie geprüft werden können, bevor wir unterschreiben. \
         Bitte melden Sie sich, wenn Sie noch Fragen zu den Mengen oder den Lieferterminen haben."
            .into(),
    ));
    docs.push(made("short", Some("lunch".into()), "Lunch at noon?".into()));
    let report = filter(&docs, &cfg, &Quiet).unwrap();
    let find = |id: &str| {
        let i = docs.iter().position(|d| d.id == id).unwrap();
        let d = &report.decisions[i];
        (
            d.kept,
            d.rule.clone().unwrap_or_default(),
            d.detail.clone().unwrap_or_default(),
        )
    };
    assert_eq!(
        find("copy"),
        (
            false,
            "exact-duplicate".into(),
            format!("the same text as {}", a.id)
        )
    );
    let (kept, rule, detail) = find("footer");
    assert!(
        !kept && rule == "near-duplicate" && detail.contains(&b.id),
        "{rule}: {detail}"
    );
    // The reply (its own text long enough not to make it a near-duplicate) holds the original
    // in full: the original is the one dropped, the reply kept.
    let (kept, rule, detail) = find(&c.id);
    assert!(
        !kept && rule == "quoted-subset" && detail == "quoted in full by reply",
        "{rule}: {detail}"
    );
    assert!(find("reply").0);
    let (kept, rule, detail) = find("german");
    assert!(
        !kept && rule == "language" && detail.starts_with("deu"),
        "{rule}: {detail}"
    );
    assert_eq!(
        find("short"),
        (false, "quality:too-few-words".into(), "3 words < 50".into())
    );
    for original in [&a.id, &b.id] {
        assert!(find(original).0, "{original} is kept");
    }
    // Every earlier decision on the real messages stands (but C's).
    for (i, d) in base.decisions.iter().enumerate() {
        if docs[i].id != c.id {
            assert_eq!(d, &report.decisions[i]);
        }
    }
}

/// A settings file: the keys it gives, the defaults for the rest; an unknown key and an
/// unreadable file are named with the file.
#[test]
fn filter_settings_read_from_a_file_name_a_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filter.toml");
    std::fs::write(&path, "exact = false\n[near]\njaccard = 0.8\n").unwrap();
    let cfg = FilterConfig::from_file(&path).unwrap();
    assert!(!cfg.exact);
    let near = cfg.near.expect("near given");
    assert_eq!(near.jaccard, 0.8);
    assert_eq!(near.bands, FilterConfig::default().near.unwrap().bands);
    assert_eq!(cfg.quality, FilterConfig::default().quality);
    std::fs::write(&path, "[near]\njacard = 0.8\n").unwrap();
    let e = FilterConfig::from_file(&path).unwrap_err().to_string();
    assert!(e.contains("filter.toml") && e.contains("jacard"), "{e}");
    let missing = dir.path().join("absent.toml");
    let e = FilterConfig::from_file(&missing).unwrap_err().to_string();
    assert!(e.contains("absent.toml"), "{e}");
}
