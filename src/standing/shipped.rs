//! The standing built into the binary: each operator's best kernel of docs/baselines.md on the
//! H200 — its baseline (problems/OP/baseline.cu, raw results docs/measurements/bench-OP.json), or
//! a template of the knowledge base that beat it (knowledge/templates/NAME.cu, raw results
//! docs/measurements/bench-best-OP.json), all `bench OP --full --json` (or the `measure --json`
//! of a full run, which carries the same fields) — built into
//! docs/measurements/standing-H200.json. A workspace without a standing of its own shows it,
//! marked as shipped and measured elsewhere, until re-measured.
//!
//! Each record carries the date, GPU, driver and version of the run that measured it, read from
//! its document (a document written before `date` and `tool_version` is dated by
//! docs/measurements/provenance.toml); the file's note summarises them.

use super::build::{self, Dated};
use super::format::{self, StandingFile};
use super::stale::OpPrint;
use crate::bench_doc::Run;
use crate::suite::Suite;
use std::collections::BTreeMap;
use std::path::Path;

/// The shipped standing's text.
pub const TEXT: &str = include_str!("../../docs/measurements/standing-H200.json");

/// How the shipped file is named in messages.
pub const NAME: &str = "docs/measurements/standing-H200.json (built-in)";

/// What the project vouches for of raw results that predate `code_sha256`
/// (docs/measurements/provenance.toml).
pub const PROVENANCE: &str = include_str!("../../docs/measurements/provenance.toml");

/// provenance.toml as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Provenance {
    #[serde(default)]
    comments_only: Vec<CommentsOnly>,
    /// Documents written before `date` and `tool_version`, by file name.
    #[serde(default)]
    dated: BTreeMap<String, Dated>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CommentsOnly {
    document: String,
    source_sha256: String,
    code_sha256: String,
    why: String,
}

fn provenance(text: &str) -> Result<Provenance, String> {
    toml::from_str(text).map_err(|e| format!("docs/measurements/provenance.toml: {e}"))
}

/// provenance.toml's `[[comments_only]]` entries: the measured text's source_sha256 -> the
/// code_sha256 of its code.
pub fn attested(text: &str) -> Result<BTreeMap<String, String>, String> {
    Ok(provenance(text)?
        .comments_only
        .into_iter()
        .map(|e| (e.source_sha256, e.code_sha256))
        .collect())
}

/// provenance.toml's `[dated]` table: a document's file name -> when and by which version it
/// was measured (for documents that do not say).
pub fn dated(text: &str) -> Result<BTreeMap<String, Dated>, String> {
    Ok(provenance(text)?.dated)
}

/// The shipped standing when it is for this suite (Ok(None) for another suite; Err when the
/// built-in file cannot be read, which a test rules out).
pub fn load(suite: &str) -> Result<Option<StandingFile>, String> {
    match format::parse(Path::new(NAME), TEXT, suite, None) {
        Ok(f) => Ok(Some(f)),
        Err(b) if matches!(b.defect, format::Defect::OtherSuite(_)) => Ok(None),
        Err(b) => Err(b.to_string()),
    }
}

/// Builds the shipped standing from bench documents (one per operator, `bench OP --full
/// --json` of its baseline.cu or of a template of the knowledge base, each with its file name
/// in docs/measurements) on the suite as it is now. Every record is dated by its own document;
/// the file's note says over which days, on which GPUs, drivers and versions they were made.
pub fn from_bench_docs(suite: &Suite, docs: &[(String, Run)]) -> Result<StandingFile, String> {
    let (_, first) = docs.first().ok_or("no bench documents")?;
    let hardware = first
        .hardware
        .clone()
        .ok_or("a bench document without its hardware profile")?;
    let attested = attested(PROVENANCE)?;
    let dated = dated(PROVENANCE)?;
    let mut f = StandingFile::new(&suite.name, &hardware);
    for (name, doc) in docs {
        let op = doc.operator.as_str();
        let p = suite
            .problem(op)
            .ok_or_else(|| format!("`{op}` is not in the suite"))?;
        let named = doc.kernel.as_str();
        // `bench OP` names the baseline "OP baseline"; `bench OP --kernel problems/OP/baseline.cu`
        // by its path: either is the suite's baseline (its code is checked all the same).
        let baseline_path = format!("problems/{op}/baseline.cu");
        let (source, kernel) = if named == format!("{op} baseline") || named == baseline_path {
            let source = crate::contract::kernels::suite_kernel(suite, p, "baseline.cu")?.code;
            (source, format!("problems/{op}/baseline.cu"))
        } else if named.starts_with(super::store::TEMPLATES) {
            let source = super::store::template_source(named)?;
            (source, named.to_string())
        } else {
            return Err(format!(
                "{op}: the document is of `{named}`, neither its baseline.cu nor a template"
            ));
        };
        let r = build::from_bench_doc(
            p,
            &OpPrint::of(suite, p),
            &source,
            &kernel,
            doc,
            &attested,
            dated.get(name),
        )
        .map_err(|e| format!("{op} ({name}): {e}"))?;
        f.operators.insert(op.to_string(), r);
    }
    f.shipped = format::MeasuredOn::of(f.operators.values()).map(|m| m.note());
    Ok(f)
}
