//! Records built from measurements: from a measurement's per-shape results (a session's
//! revision, `bench --all`), and from a `bench OP --full --json` document's run (`bench_doc`;
//! the shipped standing is built from docs/measurements/bench-OP.json).

use super::format::{Fingerprint, Measured, Origin, Record, ShapeMeasured};
use super::stale::OpPrint;
use crate::bench_doc::Run;
use crate::contract::protocol::{ShapeResult, Verdict};
use crate::suite::Problem;
use crate::suite::roofline::{self, ShapeScore};
use std::collections::BTreeMap;

/// Where and with what a measurement was made.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// The GPU model (device name).
    pub gpu: String,
    pub driver: String,
    pub nvrtc: Option<String>,
    pub tool_version: String,
    /// The hardware profile of T_SOL.
    pub hardware: String,
    /// UTC, `YYYY-MM-DD hh:mm:ss`.
    pub date: String,
}

impl Context {
    /// A measurement made now by this build.
    pub fn now(gpu: &str, driver: &str, nvrtc: Option<&str>, hardware: &str) -> Context {
        Context {
            gpu: gpu.to_string(),
            driver: driver.to_string(),
            nvrtc: nvrtc.map(|s| s.to_string()),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            hardware: hardware.to_string(),
            date: crate::utc::now(),
        }
    }
}

/// One shape's result as the standing keeps it.
pub fn shape_measured(r: &ShapeResult) -> ShapeMeasured {
    let max_abs = r
        .checks
        .iter()
        .map(|c| c.max_abs)
        .filter(|x| x.is_finite())
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
    ShapeMeasured {
        shape: r.shape,
        verdict: r.verdict.name().to_string(),
        s: r.s,
        t_ms: r.timing.as_ref().map(|t| t.median_ms),
        sol_ms: r.sol_ms,
        strict_ok: r.strict_ok,
        bench_ok: r.bench_ok,
        seeds: r.seeds_checked,
        max_abs,
        rel_iqr: r.timing.as_ref().map(|t| t.rel_iqr),
        device: r.device,
    }
}

/// S_op over every shape of the operator: a shape that failed or was not measured counts 0.
/// With `bench`, a shape counts only when it also passed the benchmark's own rule.
pub fn s_op_over(p: &Problem, shapes: &[ShapeMeasured], bench: bool) -> f64 {
    let scores: Vec<ShapeScore> = p
        .shapes
        .iter()
        .map(|s| {
            match shapes
                .iter()
                .find(|m| m.shape == s.id && m.verdict == Verdict::Pass.name())
            {
                Some(m) if !bench || m.bench_ok => {
                    m.s.map_or(ShapeScore::Failed, ShapeScore::Passed)
                }
                _ => ShapeScore::Failed,
            }
        })
        .collect();
    roofline::s_op(&scores)
}

/// A record of a kernel measured on the operator's shapes. `kernel` is where the source is
/// kept (see `store::kernel_path`).
#[allow(clippy::too_many_arguments)]
pub fn record(
    p: &Problem,
    print: &OpPrint,
    source: &str,
    kernel: String,
    origin: Origin,
    mode: &str,
    results: &[ShapeResult],
    ctx: &Context,
) -> Record {
    let mut shapes: Vec<ShapeMeasured> = results.iter().map(shape_measured).collect();
    shapes.sort_by_key(|s| s.shape);
    Record {
        kernel,
        origin,
        fingerprint: Fingerprint {
            source: crate::fingerprint::of_source(source),
            reference: print.reference.clone(),
            shapes: print.shapes.clone(),
            gpu: ctx.gpu.clone(),
        },
        measurement: Measured {
            date: ctx.date.clone(),
            driver: ctx.driver.clone(),
            nvrtc: ctx.nvrtc.clone(),
            tool_version: ctx.tool_version.clone(),
            hardware: ctx.hardware.clone(),
            mode: mode.to_string(),
            s_op: s_op_over(p, &shapes, false),
            s_op_benchmark: Some(s_op_over(p, &shapes, true)),
            shapes,
        },
    }
}

/// When, and by which version of atrex-tui, a document was measured, for a document written
/// before `bench --json` and `measure --json` said so (docs/measurements/provenance.toml).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dated {
    /// UTC, `YYYY-MM-DD hh:mm:ss`, or a day.
    pub date: String,
    pub tool_version: String,
}

/// A record from the run of a `bench OP --full --json` (or `measure --json`) document of the
/// kernel `source`, kept at `kernel`. The document names the GPU, driver, NVRTC, hardware
/// profile, date and version of the run that measured it; `dated` gives the date and version of
/// a document written before it carried them (a document's own always win).
pub fn from_bench_doc(
    p: &Problem,
    print: &OpPrint,
    source: &str,
    kernel: &str,
    doc: &Run,
    attested: &BTreeMap<String, String>,
    dated: Option<&Dated>,
) -> Result<Record, String> {
    if doc.operator != p.name {
        return Err(format!(
            "a bench document of `{}`, not {}",
            doc.operator, p.name
        ));
    }
    check_source(doc, source, kernel, attested)?;
    let undated = || {
        "a bench document that says neither when it was measured nor by which atrex-tui \
         (written before `date` and `tool_version`): measure it again, or date it in \
         docs/measurements/provenance.toml"
            .to_string()
    };
    let ctx = Context {
        gpu: doc.gpu.name.clone(),
        driver: doc.driver.clone(),
        nvrtc: doc.nvrtc.clone(),
        tool_version: doc
            .tool_version
            .clone()
            .or_else(|| dated.map(|d| d.tool_version.clone()))
            .ok_or_else(undated)?,
        hardware: doc
            .hardware
            .clone()
            .ok_or("a bench document without its hardware profile")?,
        date: doc
            .date
            .clone()
            .or_else(|| dated.map(|d| d.date.clone()))
            .ok_or_else(undated)?,
    };
    Ok(record(
        p,
        print,
        source,
        kernel.to_string(),
        Origin::File {
            path: kernel.to_string(),
        },
        doc.mode_name(),
        &doc.shapes,
        &ctx,
    ))
}

/// The document measured `source`: its `code_sha256` is the file's code (comments aside); a
/// document written before that field has its `source_sha256` be the file's text, or one that
/// `attested` (source_sha256 -> code_sha256, docs/measurements/provenance.toml) vouches for, or
/// neither hash (the earliest documents, taken as they are).
fn check_source(
    doc: &Run,
    source: &str,
    kernel: &str,
    attested: &BTreeMap<String, String>,
) -> Result<(), String> {
    let code = crate::fingerprint::of_code(source);
    let text = doc.source_sha256.as_deref();
    let claimed = doc
        .code_sha256
        .as_deref()
        .map(|c| (c, "its code_sha256"))
        .or_else(|| {
            text.and_then(|t| attested.get(t))
                .map(|c| (c.as_str(), "provenance.toml"))
        });
    match (claimed, text) {
        (Some((c, by)), _) if c != code => Err(format!(
            "the document measured other code than {kernel} has now ({by} {c}, the file's {code}): measure it again"
        )),
        (Some(_), _) => Ok(()),
        (None, Some(t)) if t != crate::fingerprint::of_source(source) => Err(format!(
            "the document measured another text of {kernel} (source_sha256 {t}) and says nothing of its code: measure it again, or say in docs/measurements/provenance.toml that only comments differ"
        )),
        _ => Ok(()),
    }
}
