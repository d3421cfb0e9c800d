//! A folder of private documents as a corpus (EnronQA §3.1): [`read`] turns mail (RFC 822
//! files, `.eml`, mbox, maildir trees), plain text, Markdown and HTML into [`Document`]s with a
//! stable id and their provenance, naming every file it cannot read instead of failing on it;
//! [`corpus`] keeps them in a directory (`documents.jsonl` + `manifest.json`); [`filter`]
//! applies the paper's filters — exact, MinHash-LSH and quoted-subset dedup, the Gopher quality
//! rules, language identification — each drop a named, counted reason that `--explain` can
//! show. Nothing here prints; long work reports through [`engram_io::Progress`].

mod corpus;
mod document;
mod error;
mod filter;
mod normalize;
mod pdf;
mod read;

pub use corpus::{Corpus, FilterSummary, Manifest};
pub use document::{Document, Kind, Provenance};
pub use error::{CorpusError, Result};
pub use filter::flags::FilterFlags;
pub use filter::language::LanguageConfig;
pub use filter::minhash::{Hasher, NearDupConfig, candidates, near_duplicates, shingles};
pub use filter::subset::comparable;
pub use filter::{Decision, FilterConfig, FilterReport, filter};
pub use read::{Ingested, MAX_FILE_BYTES, Unreadable, ingest, ingest_except};
