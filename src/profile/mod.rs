//! Deep profiles: the candidate under Nsight Compute, in a separate process, turned into gauges
//! and findings (docs/profiler.md); and `sass`, the static summary of a kernel's machine code
//! (`compile --sass`). Files: `ncu` (the raw page), `source` (the source page: where warps
//! wait), `findings`, `sass`, `error` (`ProfileError`, `PageError`).

pub mod error;
pub mod findings;
pub mod ncu;
pub mod sass;
pub mod source;

use crate::contract::protocol::*;
use crate::suite::{Problem, Suite};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use error::{PageError, ProfileError};
pub use findings::{Finding, classify};
pub use ncu::{KernelProfile, parse_raw_csv};
pub use source::{SourceProfile, parse_source_csv};

/// The sections requested from ncu, where this ncu has them.
pub const SECTIONS: &[&str] = &[
    "SpeedOfLight",
    "SpeedOfLight_RooflineChart",
    "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Tables",
    "ComputeWorkloadAnalysis",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "SchedulerStats",
    "InstructionStats",
    "SourceCounters",
];

/// A whole profile of one shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    pub operator: String,
    pub kernel_file: String,
    pub shape: u32,
    pub kernels: Vec<KernelProfile>,
    /// Σ DRAM bytes / (Q_read + Q_write): 1 is ideal, above it is redundant traffic.
    pub redundant_traffic_ratio: Option<f64>,
    pub findings: Vec<Finding>,
    /// Where the warps wait, per instruction (`profile --source`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source: Vec<SourceProfile>,
    pub ncu: String,
    pub wall_s: f64,
}

impl Finding {
    /// The finding as one log line: `finding [rule] kernel: summary — evidence`.
    pub fn line(&self) -> String {
        format!(
            "finding [{}] {}: {} — {}",
            self.rule, self.kernel, self.summary, self.evidence
        )
    }
}

impl Profile {
    /// Without the raw metric rows (which are never serialized): what a session records, so
    /// that the live state and one rebuilt from the file are the same.
    pub fn without_raw(mut self) -> Profile {
        for k in &mut self.kernels {
            k.raw.clear();
        }
        self
    }

    /// The kernel that took longest (the one the gauges show).
    pub fn main_kernel(&self) -> Option<&KernelProfile> {
        self.kernels.iter().max_by(|a, b| {
            a.duration_ns
                .unwrap_or(0.0)
                .total_cmp(&b.duration_ns.unwrap_or(0.0))
        })
    }
}

/// The shape a profile takes when none is asked for: the one that moves the most bytes.
pub fn largest_shape(p: &Problem) -> Option<u32> {
    p.shapes
        .iter()
        .max_by(|a, b| {
            let qa = p.work(a).map(|w| w.bytes()).unwrap_or(0.0);
            let qb = p.work(b).map(|w| w.bytes()).unwrap_or(0.0);
            qa.total_cmp(&qb)
        })
        .map(|s| s.id)
}

/// How to run ncu.
#[derive(Debug, Clone)]
pub struct NcuOptions {
    pub ncu: PathBuf,
    /// `--clock-control` (default `none`: measure the card as it is).
    pub clock_control: String,
    pub timeout: Duration,
    /// Also read ncu's source page (per-instruction stall samples): the report is exported and
    /// imported twice (raw page, source page) instead of printed once.
    pub source: bool,
}

impl NcuOptions {
    pub fn find() -> Result<NcuOptions, ProfileError> {
        let ncu = crate::worker::locate::find_tool("ncu").ok_or(ProfileError::NoNcu)?;
        Ok(NcuOptions {
            ncu,
            clock_control: "none".into(),
            timeout: Duration::from_secs(180),
            source: false,
        })
    }
}

/// The sections this ncu knows (from `--list-sections`), in our order.
fn available_sections(ncu: &Path) -> Vec<&'static str> {
    let out = std::process::Command::new(ncu)
        .arg("--list-sections")
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let ids: Vec<&str> = text.split_whitespace().collect();
            SECTIONS
                .iter()
                .copied()
                .filter(|s| ids.contains(s))
                .collect()
        }
        _ => vec!["SpeedOfLight", "Occupancy", "LaunchStats"],
    }
}

/// One page of an exported report (`ncu --import REPORT --csv --page PAGE ...`), as text.
fn import_page(opts: &NcuOptions, report: &Path, page: &[&str]) -> Result<String, ProfileError> {
    let out = std::process::Command::new(&opts.ncu)
        .arg("--import")
        .arg(report)
        .arg("--csv")
        .args(page)
        .output()
        .map_err(|source| ProfileError::Start {
            ncu: opts.ncu.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(ProfileError::Import {
            report: report.to_path_buf(),
            page: page.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs the candidate of `job` (its first shape) under ncu and parses the report: the
/// kernels' figures and, with `opts.source`, where their warps wait.
pub fn run_ncu(
    opts: &NcuOptions,
    job: &Job,
    device: u32,
) -> Result<(Vec<KernelProfile>, Vec<SourceProfile>), ProfileError> {
    let plan =
        crate::contract::plan::parse(&job.candidate.code).map_err(|source| ProfileError::Plan {
            candidate: job.candidate.name.clone(),
            source,
        })?;
    let mut names: Vec<String> = plan.launches.iter().map(|l| l.kernel.clone()).collect();
    names.dedup();
    let dir = std::env::temp_dir().join(format!(
        "atrex-profile-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    let scratch = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ProfileError::Scratch { path, source }
    };
    std::fs::create_dir_all(&dir).map_err(scratch(&dir))?;
    let job_file = dir.join("job.json");
    let log_file = dir.join("ncu.csv");
    std::fs::write(&job_file, serde_json::to_vec(job)?).map_err(scratch(&job_file))?;
    let exe = std::env::current_exe().map_err(scratch(Path::new("this program")))?;
    let report = dir.join("report.ncu-rep");
    let mut cmd = std::process::Command::new(&opts.ncu);
    if opts.source {
        // Exported: the raw and source pages are both read from the one report.
        cmd.arg("--export").arg(&report).arg("--force-overwrite");
    } else {
        cmd.arg("--csv").arg("--page").arg("raw");
    }
    cmd.arg("--log-file").arg(&log_file);
    cmd.arg("--clock-control").arg(&opts.clock_control);
    cmd.arg("--kernel-name")
        .arg(format!("regex:^({})$", names.join("|")));
    cmd.arg("--target-processes").arg("all");
    for s in available_sections(&opts.ncu) {
        cmd.arg("--section").arg(s);
    }
    cmd.arg(&exe)
        .arg("profile-target")
        .arg("--device")
        .arg(device.to_string())
        .arg(&job_file);
    cmd.env(
        "LD_LIBRARY_PATH",
        crate::worker::locate::worker_ld_library_path(),
    );
    crate::worker::env_scrub::scrub(&mut cmd);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| ProfileError::Start {
        ncu: opts.ncu.clone(),
        source,
    })?;
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {
                if t0.elapsed() > opts.timeout {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(ProfileError::Timeout {
                        secs: opts.timeout.as_secs(),
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(ProfileError::Wait(e)),
        }
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    let log = std::fs::read_to_string(&log_file).unwrap_or_default();
    let pages = if log.contains("ERR_NVGPUCTRPERM") || stderr.contains("ERR_NVGPUCTRPERM") {
        Err(ProfileError::NoPermission)
    } else if opts.source && report.exists() {
        import_page(opts, &report, &["--page", "raw"]).and_then(|raw| {
            let src = import_page(
                opts,
                &report,
                &["--page", "source", "--print-source", "sass"],
            )?;
            Ok((raw, parse_source_csv(&src)?))
        })
    } else {
        // Printed page, or no report: the log holds the table or says why there is none.
        Ok((log, Vec::new()))
    };
    let _ = std::fs::remove_dir_all(&dir);
    let (text, source) = pages?;
    // Keep the raw report where asked (test fixtures are recorded this way).
    if let Ok(keep) = std::env::var("ATREX_NCU_KEEP") {
        let _ = std::fs::write(
            Path::new(&keep).join(format!("ncu-{}.csv", names.join("-"))),
            &text,
        );
    }
    let kernels = parse_raw_csv(&text)?;
    if kernels.is_empty() {
        let tail: String = format!("{stderr}\n{text}")
            .lines()
            .rev()
            .take(6)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(ProfileError::NoKernel {
            status: status.to_string(),
            tail,
        });
    }
    Ok((kernels, source))
}

/// The GPU a profile runs on.
#[derive(Debug, Clone, Copy)]
pub struct Gpu<'a> {
    /// Its index on this machine.
    pub index: u32,
    /// Its name, where known: it picks the hardware profile that judges the figures.
    pub name: Option<&'a str>,
}

/// The `profile` command's work: build a one-shape job, profile it, classify.
pub fn profile(
    suite: &Suite,
    p: &Problem,
    candidate: Source,
    shape_id: u32,
    gpu: Gpu<'_>,
    opts: &NcuOptions,
    compile_resources: Option<&std::collections::BTreeMap<String, KernelResources>>,
) -> Result<Profile, ProfileError> {
    let t0 = Instant::now();
    let hw = gpu
        .name
        .and_then(|n| crate::suite::hardware::profile_for_device(&suite.hardware, n));
    let job = crate::contract::job::build_job(
        p,
        candidate.clone(),
        None,
        &[shape_id],
        JobKind::Time,
        Mode::Quick,
        hw,
    )?;
    let (mut kernels, source) = run_ncu(opts, &job, gpu.index)?;
    if let Some(res) = compile_resources {
        for k in kernels.iter_mut() {
            if let Some(r) = res.get(&k.name) {
                k.local_bytes_per_thread = Some(r.local_bytes as f64);
            }
        }
    }
    let shape = p
        .shape(shape_id)
        .ok_or_else(|| crate::contract::job::JobError::NoShape {
            operator: p.name.clone(),
            shape: shape_id,
        })?;
    let w = p.work(shape)?;
    let dram: f64 = kernels
        .iter()
        .filter_map(|k| Some(k.dram_read_bytes? + k.dram_write_bytes?))
        .sum();
    let q = w.bytes();
    let redundant = if q > 0.0 && dram > 0.0 {
        Some(dram / q)
    } else {
        None
    };
    let bottleneck = hw
        .and_then(|h| crate::suite::roofline::sol(&w, h).ok())
        .map(|s| s.bottleneck);
    let low_precision =
        ["bf16", "fp16", "fp8_e4m3", "fp8_e4m3fnuz", "int8"].contains(&p.dtype.as_str());
    let findings = classify(
        &kernels,
        redundant,
        bottleneck,
        low_precision,
        hw.map(|h| h.sm_count),
    );
    Ok(Profile {
        operator: p.name.clone(),
        kernel_file: candidate.name,
        shape: shape_id,
        kernels,
        redundant_traffic_ratio: redundant,
        findings,
        source,
        ncu: opts.ncu.display().to_string(),
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// A profile recorded on an H200: rms_norm's baseline on shape 27
/// (tests/fixtures/ncu/h200-rms_norm-baseline-shape27.csv), classified as `profile` does.
#[cfg(test)]
pub fn fixture(operator: &str, rev: u32, shape: u32) -> Profile {
    let text = include_str!("../../tests/fixtures/ncu/h200-rms_norm-baseline-shape27.csv");
    let kernels = parse_raw_csv(text).expect("the fixture parses");
    let redundant = Some(0.93);
    let findings = classify(
        &kernels,
        redundant,
        Some(crate::suite::roofline::Bottleneck::Memory),
        true,
        Some(132),
    );
    Profile {
        operator: operator.into(),
        kernel_file: format!("{operator} v{rev}"),
        shape,
        kernels,
        redundant_traffic_ratio: redundant,
        findings,
        source: Vec::new(),
        ncu: "/usr/local/cuda/bin/ncu".into(),
        wall_s: 4.2,
    }
    .without_raw()
}
