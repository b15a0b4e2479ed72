//! The bench document (docs/bench-json.md): what `bench OP --json` prints, what `bench --merge`
//! joins (`merge`), and the part of it — `Run`: the kernel, the machine, the mode, the date and
//! each shape's result — that `measure --json` carries beside its session's fields. The shipped
//! standing is built from such documents (docs/measurements).
//!
//! Invariants:
//! - A document is written through a JSON value, so every object's keys come out in
//!   alphabetical order at every depth, as docs/measurements holds them.
//! - Reading and writing a document gives it back field for field: a field an older document
//!   lacks reads as None and is left out again, a field this build does not know is kept as
//!   read (`BenchDoc::other`), and every committed document round-trips (tested).
//! - Figures that were not finite are written null (JSON has no NaN) and read back as NaN, as
//!   the shape results' own figures are (`contract::compare`).
//!
//! It rests on the suite and the kernel contract (protocol, statistics, outcomes) only.

mod error;
pub mod merge;
pub mod sweep;

pub use error::{DocError, MergeError};

use crate::contract::outcome::KernelOutput;
use crate::contract::protocol::{DeviceInfo, Event, Mode, ShapeResult, Verdict};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What was measured, where, how and when, and each shape's result: the fields a `bench --json`
/// and a `measure --json` document share, and all the standing's builder reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The operator's name.
    pub operator: String,
    /// `OP baseline`, or the file as given (`knowledge/templates/X.cu`); with `--define`
    /// values, the kernel's name says them.
    pub kernel: String,
    /// SHA-256 of the source as compiled (code and plan, `--define` values included): what
    /// `bench --merge` matches. None in documents written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_sha256: Option<String>,
    /// SHA-256 of the code without its comments: what the shipped standing matches a file
    /// against. None in documents written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_sha256: Option<String>,
    /// The measuring worker's GPU.
    pub gpu: DeviceInfo,
    /// CUDA driver version.
    pub driver: String,
    #[serde(default)]
    pub nvrtc: Option<String>,
    /// The hardware profile T_SOL was computed on (`measure`: null when none matched the GPU).
    #[serde(default)]
    pub hardware: Option<String>,
    pub mode: Mode,
    /// UTC, `YYYY-MM-DD hh:mm:ss`: when the run started (a joined run: its last part's). None
    /// in documents written before it (docs/measurements/provenance.toml dates those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// The version of atrex-tui that measured. None in documents written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// Per shape: verdict, checks, timing, T_SOL, S, the worker.
    pub shapes: Vec<ShapeResult>,
}

/// The document of `bench OP --json` (and of `bench --merge --json`: `sol_checked`, `parts`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchDoc {
    #[serde(flatten)]
    pub run: Run,
    /// Values passed beside the source rather than written into it (`{}` from the command
    /// line). None in documents written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defines: Option<BTreeMap<String, Value>>,
    /// The workers that measured (`host:device` or their labels). None in documents written
    /// before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<Vec<String>>,
    /// The pool's state at the end, as the pool reports it (`pool::PoolStatus`);
    /// `Value::Null` in a joined document, None in documents written before it. Written,
    /// never read.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub pool: Option<Value>,
    /// `pass`, or the first failure's verdict (by its name: `compile error`, …).
    #[serde(default, with = "verdict_name")]
    pub verdict: Option<Verdict>,
    /// What failed (output, seed).
    #[serde(default)]
    pub message: Option<String>,
    /// The compile events: diagnostics, registers, shared memory, spills.
    #[serde(default)]
    pub compile: Vec<Event>,
    /// The ids of the shapes the run was asked for. None in documents written before it (the
    /// shapes it holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapes_asked: Option<Vec<u32>>,
    /// What the kernel printed (device `printf`), per shape. None in documents written before
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Vec<KernelOutput>>,
    /// The median S over the shapes asked for, one failed or without a result counting 0.
    #[serde(with = "figure")]
    pub s_op: f64,
    /// The same over the shapes that also passed the benchmark-compatible level. None in
    /// documents written before it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_figure"
    )]
    pub s_op_benchmark: Option<f64>,
    /// The standing's incumbent on this GPU over the same shapes: Some(None) (null) where no
    /// record of it stands, and in a joined document; None in documents written before it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub incumbent: Option<Option<IncumbentOn>>,
    /// The command's time in seconds, checks included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// A joined document: whether each shape's T_SOL was checked against this suite's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sol_checked: Option<bool>,
    /// A joined document: which file gave which shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<Part>>,
    /// Fields this build does not know (an older document's `devices`), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The standing's incumbent beside a run: its S_op over the run's shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncumbentOn {
    /// Its kernel file.
    pub kernel: String,
    /// `workspace` or `shipped`.
    pub layer: String,
    /// `full` or `quick`.
    pub mode: String,
    /// The day it was measured.
    pub date: String,
    /// Its S_op over the run's shapes (one it failed or lacks counting 0).
    #[serde(with = "figure")]
    pub s_op: f64,
}

/// One part of a joined document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The file as given on the command line.
    pub file: String,
    /// The shapes it has a result of.
    pub shapes: Vec<u32>,
    /// The shapes it was asked for and has no result of.
    pub missing: Vec<u32>,
    #[serde(with = "figure")]
    pub wall_s: f64,
    /// When it ran (null: it does not say).
    #[serde(default)]
    pub date: Option<String>,
}

impl Run {
    /// The run of a bench or measure document; errors name the shape or field.
    #[cfg(test)]
    pub fn from_value(v: Value) -> Result<Run, DocError> {
        let (rest, shapes) = split_shapes(v)?;
        let mut run: Run = serde_json::from_value(rest).map_err(DocError::Fields)?;
        run.shapes = shapes;
        Ok(run)
    }

    /// `mode` as a standing record writes it: `full` or `quick`.
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            Mode::Full => "full",
            Mode::Quick => "quick",
        }
    }
}

impl BenchDoc {
    /// A bench document from its text; errors name the shape or field.
    pub fn from_json(text: &str) -> Result<BenchDoc, DocError> {
        let v: Value = serde_json::from_str(text).map_err(DocError::Json)?;
        BenchDoc::from_value(v)
    }

    /// A bench document from a JSON value; errors name the shape or field.
    pub fn from_value(v: Value) -> Result<BenchDoc, DocError> {
        let (rest, shapes) = split_shapes(v)?;
        let mut doc: BenchDoc = serde_json::from_value(rest).map_err(DocError::Fields)?;
        doc.run.shapes = shapes;
        Ok(doc)
    }

    /// The document as JSON (keys in alphabetical order at every depth).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a bench document is plain data")
    }

    /// The document as `bench --json` prints it.
    pub fn to_json_pretty(&self) -> String {
        pretty(&self.to_value())
    }
}

/// A document as the `--json` commands print it: pretty, through a JSON value (keys in
/// alphabetical order at every depth).
pub fn to_json_pretty<T: Serialize>(doc: &T) -> String {
    pretty(&serde_json::to_value(doc).expect("a document is plain data"))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("a JSON value prints")
}

/// A document's shape results read one by one (so a bad one is named by its id), and the rest
/// of it with an empty `shapes`.
fn split_shapes(mut v: Value) -> Result<(Value, Vec<ShapeResult>), DocError> {
    let obj = v.as_object_mut().ok_or(DocError::NotADocument)?;
    if !obj.contains_key("operator") {
        return Err(DocError::NotADocument);
    }
    let Some(Value::Array(raw)) = obj.insert("shapes".into(), Value::Array(Vec::new())) else {
        return Err(DocError::NotADocument);
    };
    let shapes = raw
        .into_iter()
        .map(shape_result)
        .collect::<Result<_, _>>()?;
    Ok((v, shapes))
}

/// One shape result; its id must be a u32 (2^32 does not wrap to shape 0).
fn shape_result(v: Value) -> Result<ShapeResult, DocError> {
    let id = v.get("shape").ok_or(DocError::NoShapeId)?;
    let id = id
        .as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| DocError::BadShapeId(id.to_string()))?;
    serde_json::from_value(v).map_err(|source| DocError::ShapeResult { id, source })
}

/// A field that is in the document, null or not (one that is not stays None: `default`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A figure that is in the document (null: NaN, as `figure` reads it).
fn present_figure<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    figure::deserialize(d).map(Some)
}

/// A verdict by its name (`pass`, `compile error`, …: `Verdict::name`), as the document says it.
mod verdict_name {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Verdict>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().map(Verdict::name).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Verdict>, D::Error> {
        let Some(name) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        // The names are the serde names with spaces for underscores.
        serde_json::from_value::<Verdict>(Value::String(name.replace(' ', "_")))
            .ok()
            .filter(|v| v.name() == name)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown verdict `{name}`")))
    }
}

/// A figure: written null when it is not finite, and null read back as NaN.
mod figure {
    use super::*;

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        x.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

#[cfg(test)]
pub(crate) mod tests;
