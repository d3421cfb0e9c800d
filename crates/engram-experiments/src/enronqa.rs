//! EnronQA (`MichaelR207/enron_qa_0922` on the hub): parquet files with one row per email —
//! string columns `email`, `path`, `user` and per-question list columns `questions`,
//! `rephrased_questions`, `gold_answers` (and others, ignored here). Each (question, rephrased
//! question, gold answer) becomes a [`Fact`] with id `split/path/index` and the email as its
//! source document.

use std::path::{Path, PathBuf};

use engram_facts::Fact;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

use crate::error::{ExperimentError, Result};

/// The dataset repo on the hub.
pub const REPO: &str = "MichaelR207/enron_qa_0922";
/// The revision the experiments pin.
pub const REVISION: &str = "c0b3a9190fd970e83cfbe7d399a08860e43e221e";

/// The parquet files of a split, relative to the dataset root.
pub fn split_files(split: &str) -> &'static [&'static str] {
    match split {
        "train" => &[
            "data/train-00000-of-00002.parquet",
            "data/train-00001-of-00002.parquet",
        ],
        "dev" => &["data/dev-00000-of-00001.parquet"],
        "test" => &["data/test-00000-of-00001.parquet"],
        _ => &[],
    }
}

/// One EnronQA fact and the inbox it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct EnronFact {
    /// The inbox (`user` column).
    pub user: String,
    /// The fact (`source` holds the email).
    pub fact: Fact,
}

fn bad(path: &Path, message: impl Into<String>) -> ExperimentError {
    ExperimentError::Parquet {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn string_of(path: &Path, row: usize, col: &str, f: &Field) -> Result<String> {
    match f {
        Field::Str(s) => Ok(s.clone()),
        Field::Null => Ok(String::new()),
        other => Err(bad(
            path,
            format!("row {row}: column `{col}` is not a string (found {other:?})"),
        )),
    }
}

fn strings_of(path: &Path, row: usize, col: &str, f: &Field) -> Result<Vec<String>> {
    match f {
        Field::ListInternal(list) => list
            .elements()
            .iter()
            .map(|e| string_of(path, row, col, e))
            .collect(),
        Field::Null => Ok(Vec::new()),
        other => Err(bad(
            path,
            format!("row {row}: column `{col}` is not a list of strings (found {other:?})"),
        )),
    }
}

/// Reads the facts of one EnronQA parquet file of `split`.
pub fn read_parquet(path: &Path, split: &str) -> Result<Vec<EnronFact>> {
    let file = std::fs::File::open(path).map_err(ExperimentError::io(path))?;
    let reader = SerializedFileReader::new(file)
        .map_err(|e| bad(path, format!("not a readable parquet file: {e}")))?;
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let names: Vec<&str> = schema
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| f.name())
        .collect();
    const NEEDED: [&str; 6] = [
        "email",
        "path",
        "user",
        "questions",
        "rephrased_questions",
        "gold_answers",
    ];
    for col in NEEDED {
        if !names.contains(&col) {
            return Err(bad(
                path,
                format!("no column `{col}` (columns: {})", names.join(", ")),
            ));
        }
    }
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| bad(path, e.to_string()))?;
    let mut out = Vec::new();
    for (r, row) in rows.enumerate() {
        let row = row.map_err(|e| bad(path, format!("row {r}: {e}")))?;
        let mut cols: [Option<&Field>; 6] = [None; 6];
        for (name, field) in row.get_column_iter() {
            if let Some(i) = NEEDED.iter().position(|n| n == name) {
                cols[i] = Some(field);
            }
        }
        let get = |i: usize| cols[i].unwrap_or(&Field::Null);
        let email = string_of(path, r, "email", get(0))?;
        let email_path = string_of(path, r, "path", get(1))?;
        let user = string_of(path, r, "user", get(2))?;
        let questions = strings_of(path, r, "questions", get(3))?;
        let rephrased = strings_of(path, r, "rephrased_questions", get(4))?;
        let gold = strings_of(path, r, "gold_answers", get(5))?;
        if questions.len() != rephrased.len() || questions.len() != gold.len() {
            return Err(bad(
                path,
                format!(
                    "row {r} ({email_path}): {} questions, {} rephrased questions, {} gold answers",
                    questions.len(),
                    rephrased.len(),
                    gold.len()
                ),
            ));
        }
        for (i, ((q, rq), a)) in questions.into_iter().zip(rephrased).zip(gold).enumerate() {
            out.push(EnronFact {
                user: user.clone(),
                fact: Fact {
                    id: format!("{split}/{email_path}/{i}"),
                    question: q,
                    rephrased_question: rq,
                    answer: a,
                    source: Some(email.clone()),
                },
            });
        }
    }
    Ok(out)
}

/// Reads a split from `dir` (holding `data/*.parquet`), keeping only `inbox` when given.
pub fn read_split(dir: &Path, split: &str, inbox: Option<&str>) -> Result<Vec<Fact>> {
    let files = split_files(split);
    if files.is_empty() {
        return Err(bad(
            dir,
            format!("unknown split `{split}` (train, dev, test)"),
        ));
    }
    let mut facts = Vec::new();
    for f in files {
        let path = dir.join(f);
        for ef in read_parquet(&path, split)? {
            if inbox.is_none_or(|u| u == ef.user) {
                facts.push(ef.fact);
            }
        }
    }
    Ok(facts)
}

/// Downloads (or finds in the HF cache) the parquet files of `split` at the pinned revision
/// through [`engram_checkpoint::hub`] and returns the local dataset root. Honours
/// `HF_HOME`/`HF_HUB_CACHE`, `HF_TOKEN`, `HF_ENDPOINT` and `HF_HUB_OFFLINE`.
pub fn fetch_split(split: &str) -> Result<PathBuf> {
    let files = split_files(split);
    if files.is_empty() {
        return Err(ExperimentError::Config {
            path: PathBuf::from(REPO),
            message: format!("unknown split `{split}` (train, dev, test)"),
        });
    }
    let paths = engram_checkpoint::hub::fetch_dataset_files(REPO, REVISION, files)?;
    // snapshot/<rev>/data/x.parquet → snapshot/<rev>
    Ok(paths[0]
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default())
}

/// Writing EnronQA-shaped parquet files (the tests' fixtures; also handy for turning your own
/// data into the same layout).
pub mod write {
    use std::path::Path;
    use std::sync::Arc;

    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    use crate::error::{ExperimentError, Result};

    /// One email row.
    #[derive(Debug, Clone, Default)]
    pub struct EmailRow {
        /// The email text.
        pub email: String,
        /// Its path in the corpus (e.g. `allen-p/inbox/12.`).
        pub path: String,
        /// The inbox.
        pub user: String,
        /// Original questions.
        pub questions: Vec<String>,
        /// Rephrased questions.
        pub rephrased_questions: Vec<String>,
        /// Gold answers.
        pub gold_answers: Vec<String>,
        /// Wrong answers (an extra list column, as in the real files).
        pub incorrect_answers: Vec<String>,
    }

    const SCHEMA: &str = "message schema {
        OPTIONAL BYTE_ARRAY email (STRING);
        OPTIONAL BYTE_ARRAY path (STRING);
        OPTIONAL BYTE_ARRAY user (STRING);
        OPTIONAL group questions (LIST) { REPEATED group list { OPTIONAL BYTE_ARRAY element (STRING); } }
        OPTIONAL group rephrased_questions (LIST) { REPEATED group list { OPTIONAL BYTE_ARRAY element (STRING); } }
        OPTIONAL group gold_answers (LIST) { REPEATED group list { OPTIONAL BYTE_ARRAY element (STRING); } }
        OPTIONAL group incorrect_answers (LIST) { REPEATED group list { OPTIONAL BYTE_ARRAY element (STRING); } }
    }";

    /// Writes `rows` as one Snappy-compressed parquet file in pyarrow's list layout.
    pub fn write_parquet(path: &Path, rows: &[EmailRow]) -> Result<()> {
        let err = |e: parquet::errors::ParquetError| ExperimentError::Parquet {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let schema = Arc::new(parse_message_type(SCHEMA).map_err(err)?);
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build(),
        );
        let file = std::fs::File::create(path).map_err(ExperimentError::io(path))?;
        let mut writer = SerializedFileWriter::new(file, schema, props).map_err(err)?;
        let mut group = writer.next_row_group().map_err(err)?;
        let mut column = 0;
        while let Some(mut col) = group.next_column().map_err(err)? {
            let (values, defs, reps) = match column {
                0..=2 => {
                    let v: Vec<ByteArray> = rows
                        .iter()
                        .map(|r| match column {
                            0 => r.email.as_str(),
                            1 => r.path.as_str(),
                            _ => r.user.as_str(),
                        })
                        .map(ByteArray::from)
                        .collect();
                    let d = vec![1i16; v.len()];
                    (v, d, None)
                }
                _ => {
                    let (mut v, mut d, mut r) = (Vec::new(), Vec::new(), Vec::new());
                    for row in rows {
                        let list = match column {
                            3 => &row.questions,
                            4 => &row.rephrased_questions,
                            5 => &row.gold_answers,
                            _ => &row.incorrect_answers,
                        };
                        if list.is_empty() {
                            d.push(1);
                            r.push(0);
                        }
                        for (i, s) in list.iter().enumerate() {
                            v.push(ByteArray::from(s.as_str()));
                            d.push(3);
                            r.push(if i == 0 { 0 } else { 1 });
                        }
                    }
                    (v, d, Some(r))
                }
            };
            col.typed::<ByteArrayType>()
                .write_batch(&values, Some(&defs), reps.as_deref())
                .map_err(err)?;
            col.close().map_err(err)?;
            column += 1;
        }
        group.close().map_err(err)?;
        writer.close().map_err(err)?;
        Ok(())
    }
}
