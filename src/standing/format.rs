//! The standing file (docs/standing.md): one JSON document per hardware profile, holding each
//! operator's incumbent — its kernel, where it came from, the fingerprints of what was measured
//! and the latest measurement. Reading checks the version, the suite and the hardware profile;
//! anything else wrong is "corrupt". Unknown fields are ignored (a later build of the same
//! format version may add some).
//!
//! Versions: 2 holds a record's source fingerprint as `fingerprint::of_source` (the plain
//! sha256 of the kernel's text); 1 held the sha256 of the text followed by a NUL. A version-1
//! file is converted when read (`upgrade`), and written back as version 2 by the next record.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The format version written by this build. A file with a higher version is refused; a lower
/// one is converted (`upgrade`).
pub const FORMAT_VERSION: u32 = 2;

/// A standing file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandingFile {
    /// Format version (`FORMAT_VERSION` when written by this build).
    pub format: u32,
    /// The suite's name (suite.toml's `name`).
    pub suite: String,
    /// The hardware profile key (the GPU model), e.g. `H200`.
    pub hardware: String,
    /// Only in the standing built into the binary: where and when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipped: Option<String>,
    /// Each operator's incumbent, by operator name.
    #[serde(default)]
    pub operators: BTreeMap<String, Record>,
}

impl StandingFile {
    pub fn new(suite: &str, hardware: &str) -> StandingFile {
        StandingFile {
            format: FORMAT_VERSION,
            suite: suite.to_string(),
            hardware: hardware.to_string(),
            shipped: None,
            operators: BTreeMap::new(),
        }
    }

    /// The file's text: pretty JSON with a final newline.
    pub fn to_text(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a standing serializes");
        s.push('\n');
        s
    }
}

/// One operator's incumbent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The incumbent's source, relative to the workspace: `kernels/OP/incumbent-HASH.cu`, or
    /// `problems/OP/FILE` (read through the suite: the workspace's problems/ or the built-in
    /// copy).
    pub kernel: String,
    /// Where the kernel came from.
    pub origin: Origin,
    /// What was measured: a record whose fingerprints differ from today's is stale.
    pub fingerprint: Fingerprint,
    /// The latest measurement of the kernel.
    pub measurement: Measured,
}

/// Where an incumbent came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// A revision of a session (accepted in the TUI, by `measure` or by the agent).
    Session { session: String, rev: u32 },
    /// A kernel file (the suite's baseline).
    File { path: String },
}

impl Origin {
    pub fn label(&self) -> String {
        match self {
            Origin::Session { session, rev } => format!("{session} v{rev}"),
            Origin::File { path } => path.clone(),
        }
    }
}

/// The fingerprints of a measurement: the kernel source's (`fingerprint::of_source`), the
/// operator's reference (reference.cu, inputs.cu, tolerance) and shapes (ids and parameters)
/// (`fingerprint::of_parts`), and the GPU model it ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub source: String,
    pub reference: String,
    pub shapes: String,
    /// The device's name, e.g. `NVIDIA H200`.
    pub gpu: String,
}

/// A measurement of an incumbent on every shape of its operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// When, in UTC: `YYYY-MM-DD hh:mm:ss`, or a day.
    pub date: String,
    pub driver: String,
    #[serde(default)]
    pub nvrtc: Option<String>,
    /// The version of atrex-tui that measured.
    pub tool_version: String,
    /// The hardware profile of T_SOL (e.g. `H200`, `H200@calibrated`).
    pub hardware: String,
    /// `full` (5 seeds, adaptive timing) or `quick`.
    pub mode: String,
    /// Median of S over the operator's shapes, a failed or missing shape counting 0.
    pub s_op: f64,
    /// The same under the benchmark's own correctness rule.
    #[serde(default)]
    pub s_op_benchmark: Option<f64>,
    pub shapes: Vec<ShapeMeasured>,
}

impl Measured {
    /// The day of the measurement.
    pub fn day(&self) -> &str {
        self.date.get(..10).unwrap_or(&self.date)
    }

    pub fn passed(&self) -> usize {
        self.shapes.iter().filter(|s| s.verdict == "pass").count()
    }
}

/// Where and when some records were measured, each run as its record says: over which days,
/// on which GPUs, drivers and versions of atrex-tui (each named once, in order).
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredOn {
    pub first_day: String,
    pub last_day: String,
    pub gpus: Vec<String>,
    pub drivers: Vec<String>,
    pub tools: Vec<String>,
}

impl MeasuredOn {
    /// None without records.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a Record>) -> Option<MeasuredOn> {
        let mut days: Vec<&str> = Vec::new();
        let (mut gpus, mut drivers, mut tools) = (Vec::new(), Vec::new(), Vec::new());
        for r in records {
            days.push(r.measurement.day());
            for (list, v) in [
                (&mut gpus, &r.fingerprint.gpu),
                (&mut drivers, &r.measurement.driver),
                (&mut tools, &r.measurement.tool_version),
            ] {
                if !list.contains(v) {
                    list.push(v.clone());
                }
            }
        }
        days.sort_unstable();
        gpus.sort_unstable();
        drivers.sort_unstable();
        tools.sort_unstable();
        Some(MeasuredOn {
            first_day: days.first()?.to_string(),
            last_day: days.last()?.to_string(),
            gpus,
            drivers,
            tools,
        })
    }

    /// "measured 2026-11-30 on NVIDIA H200", "measured 2026-11-30 – 2026-12-02 on NVIDIA H200".
    pub fn short(&self) -> String {
        let when = if self.first_day == self.last_day {
            self.first_day.clone()
        } else {
            format!("{} – {}", self.first_day, self.last_day)
        };
        format!("measured {when} on {}", self.gpus.join(", "))
    }

    /// The short form with the drivers and versions: "measured … on NVIDIA H200 (driver 13.0,
    /// atrex-tui 0.1.0)".
    pub fn note(&self) -> String {
        format!(
            "{} (driver {}, atrex-tui {})",
            self.short(),
            self.drivers.join(", "),
            self.tools.join(", ")
        )
    }
}

/// One shape of a measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeMeasured {
    pub shape: u32,
    /// `pass`, `incorrect`, `compile error`, … (the worker's verdict).
    pub verdict: String,
    /// S = T_SOL / T (when timed).
    #[serde(default)]
    pub s: Option<f64>,
    /// T: the median time, ms.
    #[serde(default)]
    pub t_ms: Option<f64>,
    pub sol_ms: f64,
    pub strict_ok: bool,
    pub bench_ok: bool,
    /// Input draws checked against the reference.
    pub seeds: usize,
    /// The largest absolute error over the outputs (worst seed).
    #[serde(default)]
    pub max_abs: Option<f64>,
    /// Relative inter-quartile range of the timing samples.
    #[serde(default)]
    pub rel_iqr: Option<f64>,
    /// The GPU (index) that measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
}

/// Why a standing file is not used.
#[derive(Debug, Clone, PartialEq)]
pub enum Defect {
    /// Not JSON, or not a standing.
    Corrupt(String),
    /// Written by a newer version of atrex-tui.
    Newer(u32),
    /// A standing of another suite.
    OtherSuite(String),
    /// A standing of another hardware profile than its name says.
    OtherHardware(String),
}

/// A standing file that was reported and ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct BadFile {
    pub path: PathBuf,
    pub defect: Defect,
}

impl std::fmt::Display for BadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match &self.defect {
            Defect::Corrupt(m) => format!("not a readable standing file ({m})"),
            Defect::Newer(v) => format!(
                "written by a newer atrex-tui (format {v}; this build reads up to {FORMAT_VERSION})"
            ),
            Defect::OtherSuite(s) => format!("the standing of another suite (`{s}`)"),
            Defect::OtherHardware(h) => format!("holds the standing of `{h}`"),
        };
        write!(
            f,
            "{}: {why}; ignored (kept as it is until a record replaces it, after a backup)",
            self.path.display()
        )
    }
}

/// Parses a standing file's text, checking its version, suite and hardware profile.
pub fn parse(
    path: &Path,
    text: &str,
    suite: &str,
    hardware: Option<&str>,
) -> Result<StandingFile, BadFile> {
    let bad = |defect| BadFile {
        path: path.to_path_buf(),
        defect,
    };
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(Defect::Corrupt(e.to_string())))?;
    let format = v
        .get("format")
        .and_then(|f| f.as_u64())
        .ok_or_else(|| bad(Defect::Corrupt("no `format` version".into())))?;
    if format > u64::from(FORMAT_VERSION) {
        return Err(bad(Defect::Newer(format.min(u64::from(u32::MAX)) as u32)));
    }
    match v.get("suite").and_then(|s| s.as_str()) {
        Some(s) if s == suite => {}
        Some(s) => return Err(bad(Defect::OtherSuite(s.chars().take(80).collect()))),
        None => return Err(bad(Defect::Corrupt("no `suite`".into()))),
    }
    // From the text, not the value: an error then names its line and column.
    let file: StandingFile =
        serde_json::from_str(text).map_err(|e| bad(Defect::Corrupt(e.to_string())))?;
    if let Some(h) = hardware
        && file.hardware != h
    {
        return Err(bad(Defect::OtherHardware(
            file.hardware.chars().take(80).collect(),
        )));
    }
    Ok(file)
}

/// Converts a file of an older format version to this one. Version 1 fingerprinted a source as
/// the sha256 of its text followed by a NUL (`fingerprint::of_parts` of the text): a record
/// whose fingerprint is its kernel's by that rule gets the kernel's fingerprint by this
/// version's; any other record keeps its value, which matches its kernel under neither rule
/// (stale before, stale after). `kernel` reads a record's kernel (None: it cannot be read).
pub fn upgrade(file: &mut StandingFile, kernel: impl Fn(&str) -> Option<String>) {
    if file.format >= FORMAT_VERSION {
        return;
    }
    if file.format <= 1 {
        for r in file.operators.values_mut() {
            if let Some(text) = kernel(&r.kernel)
                && crate::fingerprint::of_parts(&[&text]) == r.fingerprint.source
            {
                r.fingerprint.source = crate::fingerprint::of_source(&text);
            }
        }
    }
    file.format = FORMAT_VERSION;
}
