//! The worker protocol: JSON lines over stdio (docs/worker-protocol.md).

use super::compare::{TensorCheck, Tol};
use super::stats::TimingStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The protocol's version, sent in `hello`; client and worker must agree on it (and on the tool
/// version) before any job (docs/worker-protocol.md).
pub const PROTOCOL_VERSION: u32 = 3;

/// This build's version, sent in `hello` beside the protocol's.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Client → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Asks for the device description; answered with `Hello`.
    Hello { id: u64 },
    /// Runs a job; answered with `Progress`/`Compiled`/`ShapeDone` events and one `Done`.
    Job { id: u64, job: Box<Job> },
    /// Cancels a running job (between shapes and between timing batches).
    Cancel { id: u64 },
    /// Measures copy bandwidth; answered with `Calibration`.
    Calibrate { id: u64 },
    /// Ends the worker.
    Shutdown,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// Compile only.
    Compile,
    /// Compile and check correctness.
    Check,
    /// Compile and time (no correctness check; results are labelled unchecked).
    Time,
    /// Compile, check, then time the shapes that passed.
    All,
    /// Generate inputs (first seed), run the candidate once, and return every input and output
    /// (`tensors` events). For cross-checks against CPU implementations on small shapes.
    Dump,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// 1 seed, ≥ 10 samples / 100 ms.
    Quick,
    /// 5 seeds, adaptive sampling to 0.5 % noise.
    Full,
}

/// A kernel source with its defines.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Source {
    /// A name for logs (e.g. "rms_norm v3").
    pub name: String,
    pub code: String,
    /// Defines overriding the plan's own (`-D` options).
    #[serde(default)]
    pub defines: BTreeMap<String, serde_json::Value>,
}

/// One tensor of a shape, fully resolved.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TensorDesc {
    pub name: String,
    pub dtype: String,
    pub dims: Vec<u64>,
    /// Value generator with its arguments evaluated; outputs have none.
    #[serde(default)]
    #[serde(rename = "gen")]
    pub generator: Option<GenSpec>,
    #[serde(default)]
    pub inplace: bool,
    /// "float" or "exact" (outputs).
    #[serde(default)]
    pub compare: String,
}

impl TensorDesc {
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
    pub fn bytes(&self) -> u64 {
        self.elements() * crate::suite::dtype_size(&self.dtype).unwrap_or(1) as u64
    }
}

/// A value generator: kind (normal, one_plus_normal, uniform, randint, arange, const, zeros)
/// and its numeric arguments.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GenSpec {
    pub kind: String,
    #[serde(default)]
    pub args: Vec<f64>,
}

/// One shape of a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShapeJob {
    pub id: u32,
    /// Parameters and `let` values, for launch-plan expressions.
    pub env: BTreeMap<String, serde_json::Value>,
    pub inputs: Vec<TensorDesc>,
    pub outputs: Vec<TensorDesc>,
    /// Speed of light on this GPU's profile, seconds (0 when unknown).
    pub sol_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Job {
    pub operator: String,
    pub kind: JobKind,
    pub mode: Mode,
    pub candidate: Source,
    /// Needed for Check and All.
    #[serde(default)]
    pub reference: Option<Source>,
    pub shapes: Vec<ShapeJob>,
    pub tolerance: Tol,
    /// Seeds for correctness (quick: 1, full: 5); a fresh input draw each.
    pub seeds: Vec<u64>,
    /// The operator's own input generator (`problems/<op>/inputs.cu`) for `custom` inputs.
    #[serde(default)]
    pub generator: Option<Source>,
    /// Target architecture for compile-only jobs on a machine without a GPU (default sm_90a).
    #[serde(default)]
    pub arch: Option<String>,
    /// The client's watchdog for this job when longer than its default: shapes of many
    /// gigabytes need more than 10 s between progress events (host comparison, downloads).
    #[serde(default)]
    pub watchdog_s: Option<f64>,
    /// Compile jobs: also disassemble the candidate (`compile --sass`): answered with a
    /// `Disassembly` event before `Done`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sass: bool,
    /// The operator's structured draws, checked beside the random seeds: every one in full
    /// mode, one chosen by the first seed in quick mode (`contract::draws`). Dump jobs dump on
    /// the first one when any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub draws: Vec<Draw>,
}

/// A structured draw of a job: the seed's random inputs, then a structure pass.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Draw {
    pub name: String,
    /// `kind(args)`, the arguments expressions of each shape's environment
    /// (docs/problem-format.md, "Structured draws").
    pub pass: String,
    /// The inputs the pass rewrites (none for `custom`).
    #[serde(default)]
    pub inputs: Vec<String>,
}

/// A tensor's contents (little-endian bytes, base64).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TensorData {
    pub name: String,
    pub dtype: String,
    pub dims: Vec<u64>,
    pub data_b64: String,
}

impl TensorData {
    pub fn bytes(&self) -> Result<Vec<u8>, base64::DecodeError> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(&self.data_b64)
    }
}

/// Device description.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceInfo {
    pub index: u32,
    pub name: String,
    pub cc_major: i32,
    pub cc_minor: i32,
    pub sm_count: i32,
    pub l2_bytes: u64,
    pub memory_bytes: u64,
    /// Max SM clock (MHz).
    pub sm_clock_mhz: u32,
    pub mem_clock_mhz: u32,
    pub arch: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProbeInfo {
    pub driver_version: String,
    pub nvrtc_version: Option<String>,
    pub devices: Vec<DeviceInfo>,
}

/// A compile diagnostic on the candidate's own line, or (line 0) on the whole kernel: ptxas's
/// notes on spills and on wgmma serialised by the compiler.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Diagnostic {
    pub line: usize,
    pub severity: String,
    pub msg: String,
}

/// `line 3: error: msg` (or `kernel: warning: msg`).
impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.place(), self.severity, self.msg)
    }
}

impl Diagnostic {
    /// The one that says why a compile failed: its first error, else its first diagnostic
    /// (a note on the whole kernel may come before the error).
    pub fn headline(all: &[Diagnostic]) -> Option<&Diagnostic> {
        all.iter().find(|d| d.severity == "error").or(all.first())
    }

    /// Where it is: "line N", or "kernel" for a note on the compiled code as a whole.
    pub fn place(&self) -> String {
        if self.line == 0 {
            "kernel".to_string()
        } else {
            format!("line {}", self.line)
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    CompileError,
    PlanError,
    Incorrect,
    Fault,
    Timeout,
    /// Faster than the speed of light: the measurement cannot be right.
    Impossible,
    /// Timed without a correctness check (JobKind::Time).
    Unchecked,
    Cancelled,
    Error,
}

impl Verdict {
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::CompileError => "compile error",
            Verdict::PlanError => "plan error",
            Verdict::Incorrect => "incorrect",
            Verdict::Fault => "fault",
            Verdict::Timeout => "timeout",
            Verdict::Impossible => "impossible",
            Verdict::Unchecked => "unchecked",
            Verdict::Cancelled => "cancelled",
            Verdict::Error => "error",
        }
    }
}

/// The result of one shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShapeResult {
    pub shape: u32,
    pub verdict: Verdict,
    /// Per output, the worst seed.
    #[serde(default)]
    pub checks: Vec<TensorCheck>,
    /// Passes the benchmark-compatible level (atol 1e-2, rtol 0.05).
    pub bench_ok: bool,
    /// Passes the strict level (needed to accept).
    pub strict_ok: bool,
    /// Random seeds the check ran on (quick 1, full 5); the job's structured draws were
    /// checked besides them and are not counted here.
    pub seeds_checked: usize,
    #[serde(default)]
    pub timing: Option<TimingStats>,
    pub sol_ms: f64,
    /// T_SOL / T_median (never capped).
    #[serde(default)]
    pub s: Option<f64>,
    #[serde(default)]
    pub message: Option<String>,
    /// The GPU (device index) that checked and timed this shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    /// The worker that measured it (`host:device`, or its label), set by the client from the
    /// worker's `hello`; a worker never sends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
}

/// Worker → client.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Hello {
        id: u64,
        protocol: u32,
        /// The worker's atrex-tui version (absent before protocol 3).
        #[serde(default)]
        tool_version: Option<String>,
        /// The machine the worker runs on (absent before protocol 3).
        #[serde(default)]
        host: Option<String>,
        probe: ProbeInfo,
        device: Option<DeviceInfo>,
    },
    Progress {
        id: u64,
        stage: String,
        shape: Option<u32>,
        done: usize,
        total: usize,
    },
    Compiled {
        id: u64,
        which: String,
        ok: bool,
        cached: bool,
        ms: f64,
        #[serde(default)]
        diagnostics: Vec<Diagnostic>,
        #[serde(default)]
        log: String,
        /// Registers per thread, static shared memory and local (spill) bytes of each kernel.
        #[serde(default)]
        resources: BTreeMap<String, KernelResources>,
    },
    /// Compile jobs with `sass`: the candidate's SASS as the toolkit's `cuobjdump -sass` prints
    /// it, or why there is none (no cuobjdump, the candidate does not compile).
    Disassembly {
        id: u64,
        which: String,
        #[serde(default)]
        sass: String,
        #[serde(default)]
        error: Option<String>,
    },
    /// `dump` jobs: the inputs and outputs of one shape.
    Tensors {
        id: u64,
        shape: u32,
        seed: u64,
        inputs: Vec<TensorData>,
        outputs: Vec<TensorData>,
    },
    /// A shape passed (or failed) its check and, when it passed, timing starts: the check's
    /// figures, so that a fault or hang during timing still leaves them on record.
    Checked {
        id: u64,
        result: ShapeResult,
    },
    ShapeDone {
        id: u64,
        result: ShapeResult,
    },
    /// What the job's kernels printed (device `printf`), per shape (`shape` None: outside a
    /// shape). At most 64 KiB per job is kept; `dropped` counts the bytes beyond.
    Output {
        id: u64,
        shape: Option<u32>,
        text: String,
        #[serde(default)]
        dropped: u64,
    },
    Done {
        id: u64,
        verdict: Verdict,
        message: Option<String>,
    },
    Calibration {
        id: u64,
        copy_bytes_per_s: f64,
        bytes: u64,
        median_ms: f64,
        /// Measured mma.sync m16n8k16 bf16 → fp32 rate (FLOP/s); None where not measured.
        #[serde(default)]
        mma_bf16_flops_per_s: Option<f64>,
    },
    /// A fatal fault: the worker exits after sending it.
    Fault {
        id: u64,
        message: String,
    },
    Error {
        id: u64,
        message: String,
    },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct KernelResources {
    pub registers: i32,
    pub static_smem: i32,
    pub local_bytes: i32,
    pub max_threads: i32,
}

impl Event {
    pub fn id(&self) -> u64 {
        match self {
            Event::Hello { id, .. }
            | Event::Progress { id, .. }
            | Event::Compiled { id, .. }
            | Event::Disassembly { id, .. }
            | Event::ShapeDone { id, .. }
            | Event::Checked { id, .. }
            | Event::Output { id, .. }
            | Event::Tensors { id, .. }
            | Event::Done { id, .. }
            | Event::Calibration { id, .. }
            | Event::Fault { id, .. }
            | Event::Error { id, .. } => *id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_as_json_lines() {
        let r = Request::Cancel { id: 7 };
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(s, r#"{"type":"cancel","id":7}"#);
        let back: Request = serde_json::from_str(&s).unwrap();
        assert!(matches!(back, Request::Cancel { id: 7 }));
        let e = Event::Done {
            id: 3,
            verdict: Verdict::CompileError,
            message: Some("x".into()),
        };
        let s = serde_json::to_string(&e).unwrap();
        assert!(s.contains(r#""verdict":"compile_error""#), "{s}");
        assert!(!s.contains('\n'));
        let back: Event = serde_json::from_str(&s).unwrap();
        assert_eq!(back.id(), 3);
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        for bad in [
            "",
            "{",
            "{\"type\":\"nope\"}",
            "[1,2]",
            "{\"type\":\"job\",\"id\":1}",
        ] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad}");
        }
    }
}
