//! Exact duplicates: the same normalized text as an earlier document (compared by SHA-256).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::Drop;
use crate::document::Document;

/// The documents among `alive` (indices into `docs`, in order) whose text an earlier one has.
pub fn duplicates(docs: &[Document], alive: &[usize]) -> Vec<(usize, Drop)> {
    let mut first: HashMap<[u8; 32], usize> = HashMap::new();
    let mut out = Vec::new();
    for &i in alive {
        let h: [u8; 32] = Sha256::digest(docs[i].text.as_bytes()).into();
        match first.get(&h) {
            Some(&j) => out.push((
                i,
                (
                    "exact-duplicate".to_string(),
                    format!("the same text as {}", docs[j].id),
                ),
            )),
            None => {
                first.insert(h, i);
            }
        }
    }
    out
}
