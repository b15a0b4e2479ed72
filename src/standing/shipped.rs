//! The standing built into the binary: each operator's best kernel of docs/baselines.md on the
//! H200 — its baseline (problems/OP/baseline.cu, raw results docs/measurements/bench-OP.json), or
//! a template of the knowledge base that beat it (knowledge/templates/NAME.cu, raw results
//! docs/measurements/bench-best-OP.json), all `bench OP --full --json` (or the `measure --json`
//! of a full run, which carries the same fields) — built into
//! docs/measurements/standing-H200.json. A workspace without a standing of its own shows it,
//! marked as shipped and measured elsewhere, until re-measured.

use super::build;
use super::format::{self, StandingFile};
use super::stale::OpPrint;
use crate::suite::Suite;
use std::collections::BTreeMap;
use std::path::Path;

/// The shipped standing's text.
pub const TEXT: &str = include_str!("../../docs/measurements/standing-H200.json");

/// How the shipped file is named in messages.
pub const NAME: &str = "docs/measurements/standing-H200.json (built-in)";

/// The day the shipped measurements were made (docs/baselines.md).
pub const DATE: &str = "2026-12-03";

/// The version of atrex-tui that made them.
pub const TOOL_VERSION: &str = "0.1.0";

/// What the project vouches for of raw results that predate `code_sha256`
/// (docs/measurements/provenance.toml).
pub const PROVENANCE: &str = include_str!("../../docs/measurements/provenance.toml");

/// provenance.toml's `[[comments_only]]` entries: the measured text's source_sha256 -> the
/// code_sha256 of its code.
pub fn attested(text: &str) -> Result<BTreeMap<String, String>, String> {
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(default)]
        comments_only: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Entry {
        document: String,
        source_sha256: String,
        code_sha256: String,
        why: String,
    }
    let f: File =
        toml::from_str(text).map_err(|e| format!("docs/measurements/provenance.toml: {e}"))?;
    Ok(f.comments_only
        .into_iter()
        .map(|e| (e.source_sha256, e.code_sha256))
        .collect())
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
/// --json` of its baseline.cu or of a template of the knowledge base) on the suite as it is now.
pub fn from_bench_docs(
    suite: &Suite,
    docs: &[serde_json::Value],
    date: &str,
    tool_version: &str,
) -> Result<StandingFile, String> {
    let first = docs.first().ok_or("no bench documents")?;
    let hardware = first
        .get("hardware")
        .and_then(|h| h.as_str())
        .ok_or("a bench document without its hardware profile")?
        .to_string();
    let gpu = first
        .get("gpu")
        .and_then(|g| g.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or("?")
        .to_string();
    let driver = first.get("driver").and_then(|d| d.as_str()).unwrap_or("?");
    let attested = attested(PROVENANCE)?;
    let mut f = StandingFile::new(&suite.name, &hardware);
    f.shipped = Some(format!(
        "measured {date} on {gpu} (driver {driver}, atrex-tui {tool_version})"
    ));
    for doc in docs {
        let op = doc
            .get("operator")
            .and_then(|o| o.as_str())
            .ok_or("a bench document without its operator")?;
        let p = suite
            .problem(op)
            .ok_or_else(|| format!("`{op}` is not in the suite"))?;
        let named = doc.get("kernel").and_then(|k| k.as_str()).unwrap_or("");
        // `bench OP` names the baseline "OP baseline"; `bench OP --kernel problems/OP/baseline.cu`
        // by its path: either is the suite's baseline (its code is checked all the same).
        let baseline_path = format!("problems/{op}/baseline.cu");
        let (source, kernel) = if named == format!("{op} baseline") || named == baseline_path {
            let source = crate::suite::kernels::suite_kernel(suite, p, "baseline.cu")?.code;
            (source, format!("problems/{op}/baseline.cu"))
        } else if named.starts_with(super::store::TEMPLATES) {
            let source = super::store::template_source(named)?;
            (source, named.to_string())
        } else {
            return Err(format!(
                "{op}: the document is of `{named}`, neither its baseline.cu nor a template"
            ));
        };
        let r = build::from_bench_json(
            p,
            &OpPrint::of(suite, p),
            &source,
            &kernel,
            doc,
            &attested,
            date,
            tool_version,
        )
        .map_err(|e| format!("{op}: {e}"))?;
        f.operators.insert(op.to_string(), r);
    }
    Ok(f)
}
