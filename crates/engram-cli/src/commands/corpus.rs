//! `engram corpus`: a folder of documents as a corpus — `ingest` reads mail, text, Markdown
//! and HTML into a corpus directory, `filter` applies EnronQA §3.1's filters and says, with
//! `--explain ID`, why a document was dropped.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use engram_corpus::{Corpus, FilterFlags, FilterSummary, filter, ingest_except};

use crate::progress::Bars;

/// `engram corpus …`.
#[derive(Subcommand, Debug)]
pub enum CorpusCommand {
    /// Read documents (RFC 822 mail, .eml, mbox, maildir trees, text, Markdown, HTML) into a
    /// corpus directory: documents.jsonl and manifest.json (unreadable files named there).
    Ingest(IngestArgs),
    /// Filter a corpus (exact, MinHash and quoted-subset dedup, Gopher quality, language):
    /// kept.jsonl, decisions.jsonl and the counts per rule in manifest.json.
    Filter(FilterArgs),
}

/// Arguments of `engram corpus ingest`.
#[derive(Args, Debug)]
pub struct IngestArgs {
    /// Files and directories to read (directories recursively).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The corpus directory to write.
    #[arg(long)]
    pub out: PathBuf,
}

/// Arguments of `engram corpus filter`.
#[derive(Args, Debug)]
pub struct FilterArgs {
    /// The corpus directory (made by `engram corpus ingest`).
    pub corpus: PathBuf,
    #[command(flatten)]
    pub settings: FilterFlags,
    /// Say why document ID was kept or dropped (from the last filter run); filter nothing.
    #[arg(long)]
    pub explain: Option<String>,
}

/// Runs `engram corpus …`.
pub fn run(cmd: CorpusCommand) -> Result<()> {
    match cmd {
        CorpusCommand::Ingest(a) => run_ingest(a),
        CorpusCommand::Filter(a) => run_filter(a),
    }
}

fn run_ingest(a: IngestArgs) -> Result<()> {
    // The corpus itself is left out where it lies under an input (a second ingest into it
    // would read its documents back).
    let got = ingest_except(&a.paths, std::slice::from_ref(&a.out), &Bars::new(true))?;
    let corpus = Corpus::at(&a.out);
    let m = corpus
        .write_ingested(&a.paths, &got)
        .with_context(|| format!("writing the corpus {}", a.out.display()))?;
    let kinds: Vec<String> = m.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!(
        "{} documents ({}) from {} files → {}",
        m.documents,
        kinds.join(", "),
        m.files,
        a.out.display()
    );
    if !m.unreadable.is_empty() {
        let reasons: Vec<String> = m
            .unreadable_by_reason
            .iter()
            .map(|(r, n)| format!("{r}: {n}"))
            .collect();
        println!(
            "{} unreadable ({}); each is named in {}",
            m.unreadable.len(),
            reasons.join(", "),
            a.out.join("manifest.json").display()
        );
    }
    Ok(())
}

fn run_filter(a: FilterArgs) -> Result<()> {
    let corpus = Corpus::at(&a.corpus);
    let mut manifest = corpus.manifest()?;
    if let Some(id) = &a.explain {
        return explain(&corpus, id);
    }
    let cfg = a.settings.settings()?;
    let docs = corpus.documents()?;
    let report = filter(&docs, &cfg, &Bars::new(true))?;
    let kept: Vec<&engram_corpus::Document> = report.kept().into_iter().map(|i| &docs[i]).collect();
    let summary = FilterSummary {
        settings: cfg,
        kept: kept.len(),
        dropped_by_rule: report.dropped_by_rule.clone(),
    };
    corpus.write_filtered(&mut manifest, &kept, &report.decisions, summary)?;
    println!(
        "{} of {} documents kept → {}",
        kept.len(),
        docs.len(),
        a.corpus.join("kept.jsonl").display()
    );
    for (rule, n) in &report.dropped_by_rule {
        println!("  {rule:<28} {n:>6} dropped");
    }
    Ok(())
}

fn explain(corpus: &Corpus, id: &str) -> Result<()> {
    let decisions = corpus
        .decisions()
        .context("no filter results yet: run `engram corpus filter` first")?;
    let Some(d) = decisions.iter().find(|d| d.id == id) else {
        bail!("{id}: no such document in {}", corpus.dir.display());
    };
    let docs = corpus.documents()?;
    let Some(doc) = docs.iter().find(|x| x.id == id) else {
        bail!(
            "{id}: decided by the last filter but not among the documents of {}: the corpus \
             was ingested again since; run `engram corpus filter` again",
            corpus.dir.display()
        );
    };
    let p = &doc.provenance;
    println!(
        "{id}: {} ({}{})",
        doc.title.as_deref().unwrap_or("untitled"),
        p.file,
        p.message_id
            .as_ref()
            .map_or(String::new(), |m| format!(", {m}"))
    );
    match (d.kept, &d.rule, &d.detail) {
        (true, _, _) => println!("kept: it passed every rule"),
        (false, Some(rule), detail) => println!(
            "dropped by {rule}: {}",
            detail.as_deref().unwrap_or("(no detail)")
        ),
        (false, None, _) => println!("dropped"),
    }
    Ok(())
}
