//! `lookup` and `read`: the knowledge base searched by keywords (for the GPU's architecture,
//! templates of the operator first) and one document read whole, by id.

use super::Executed;
use crate::agent::knowledge::{self, Doc};
use std::fmt::Write;

/// How many documents a lookup lists.
pub const LOOKUP_HITS: usize = 8;
/// The most of a document `read` gives, in bytes (templates are whole up to this; the
/// conversation cuts there: `bound::limit`).
pub const MAX_DOC: usize = 14_000;

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .map(|w| w.trim_matches('.').to_string())
        .filter(|w| w.chars().count() >= 2)
        .collect()
}

fn fits_arch(d: &Doc, arch: &str) -> bool {
    let a = &d.meta.architectures;
    a.is_empty() || a.iter().any(|x| x == arch || x == "any")
}

/// The documents matching a query, best first.
pub fn search<'a>(docs: &'a [Doc], query: &str, arch: &str, op: &str) -> Vec<(&'a Doc, f64)> {
    let terms = words(query);
    let mut hits: Vec<(&Doc, f64)> = docs
        .iter()
        .filter(|d| fits_arch(d, arch))
        .map(|d| {
            let m = &d.meta;
            let id = m.id.to_lowercase();
            let title = m.title.to_lowercase();
            let tags: Vec<String> = m
                .symptoms
                .iter()
                .chain(&m.families)
                .chain(&m.bottlenecks)
                .chain(std::iter::once(&m.category))
                .chain(std::iter::once(&m.operator))
                .chain(std::iter::once(&m.kind))
                .map(|t| t.to_lowercase())
                .collect();
            let body = d.body.to_lowercase();
            let mut s = 0.0;
            if id == query.trim().to_lowercase() {
                s += 20.0;
            }
            for t in &terms {
                if id.contains(t.as_str()) {
                    s += 4.0;
                }
                if title.contains(t.as_str()) {
                    s += 3.0;
                }
                if tags.iter().any(|x| x.contains(t.as_str())) {
                    s += 2.0;
                }
                if body.contains(t.as_str()) {
                    s += 1.0;
                }
            }
            if s > 0.0 && m.kind == "template" && m.operator == op {
                s += 2.0;
            }
            (d, s)
        })
        .filter(|(_, s)| *s > 0.0)
        .collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.meta.id.cmp(&b.0.meta.id)));
    hits.truncate(LOOKUP_HITS);
    hits
}

/// `lookup(query)`.
pub fn lookup(docs: &[Doc], query: &str, arch: &str, op: &str) -> Executed {
    let hits = search(docs, query, arch, op);
    if hits.is_empty() {
        return Executed::ok(
            format!(
                "no document matches \"{query}\"; try other keywords (a technique, a symptom such as `bank-conflicts`, an operator family)"
            ),
            "no match".into(),
        );
    }
    let mut s = String::new();
    for (d, _) in &hits {
        let m = &d.meta;
        let _ = write!(s, "- {} ({}", m.id, m.kind);
        if m.kind == "template" && !m.operator.is_empty() {
            let _ = write!(s, " for {}", m.operator);
        }
        let _ = write!(s, "): {}", m.title);
        if !m.category.is_empty() {
            let _ = write!(s, " · {}", m.category);
        }
        if !m.symptoms.is_empty() {
            let _ = write!(s, " · symptoms {}", m.symptoms.join(", "));
        }
        let _ = writeln!(s);
    }
    s.push_str("read(id) gives a document whole.\n");
    let ids: Vec<&str> = hits.iter().map(|(d, _)| d.meta.id.as_str()).collect();
    Executed::ok(s, format!("{} documents: {}", hits.len(), ids.join(", ")))
}

/// `read(id)`.
pub fn read(docs: &[Doc], id: &str) -> Executed {
    let Some(d) = knowledge::find(docs, id.trim()) else {
        let near: Vec<&str> = docs
            .iter()
            .map(|d| d.meta.id.as_str())
            .filter(|x| {
                let w = words(id);
                w.iter().any(|t| x.contains(t.as_str()))
            })
            .take(6)
            .collect();
        return Executed::failed(
            format!(
                "no document `{id}`{}",
                if near.is_empty() {
                    "; lookup(query) lists ids".to_string()
                } else {
                    format!("; did you mean: {}", near.join(", "))
                }
            ),
            format!("no document `{}`", super::args::one_line(id, 60)),
        );
    };
    let m = &d.meta;
    let mut s = format!("# {} ({}, {})\n", m.title, m.id, m.kind);
    s.push_str(&d.body);
    if !m.pitfalls.is_empty() {
        let _ = write!(s, "\nPitfalls: {}", m.pitfalls.join("; "));
    }
    Executed::ok(s, format!("{} ({}, {} bytes)", m.id, m.kind, d.body.len()))
}
