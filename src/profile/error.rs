//! Why a deep profile could not be made, or an ncu page not read.

use crate::contract::job::JobError;
use crate::contract::plan::PlanError;
use crate::suite::LoadError;
use std::path::PathBuf;

/// A deep profile that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "ncu (Nsight Compute) not found on PATH or in the CUDA installation: deep profiles are unavailable; event-timing gauges still work"
    )]
    NoNcu,
    #[error("cannot start {}: {source}", ncu.display())]
    Start {
        ncu: PathBuf,
        source: std::io::Error,
    },
    /// `ncu --import` failed: its page arguments and what it said on stderr.
    #[error("ncu --import {} {page}: {stderr}", report.display())]
    Import {
        report: PathBuf,
        page: String,
        stderr: String,
    },
    #[error("{candidate}: launch plan, {source}")]
    Plan {
        candidate: String,
        source: PlanError,
    },
    /// The scratch folder, the job file or this program's path.
    #[error("{}: {source}", path.display())]
    Scratch {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the job could not be written: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("ncu did not finish within {secs} s")]
    Timeout { secs: u64 },
    #[error("waiting for ncu: {0}")]
    Wait(std::io::Error),
    #[error(
        "ncu is not permitted to read the GPU's performance counters on this machine (ERR_NVGPUCTRPERM); event-timing gauges still work"
    )]
    NoPermission,
    #[error(transparent)]
    Page(#[from] PageError),
    /// `tail`: the last lines ncu printed.
    #[error("ncu profiled no kernel of the candidate (exit {status}): {tail}")]
    NoKernel { status: String, tail: String },
    #[error(transparent)]
    Job(#[from] JobError),
    #[error(transparent)]
    Problem(#[from] LoadError),
}

/// An ncu page (raw or source, as CSV) that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("ncu table: {0}")]
    Table(csv::Error),
    #[error("ncu table has no `Kernel Name` column")]
    NoKernelName,
    #[error("ncu source page: {0}")]
    Source(csv::Error),
    #[error("ncu source page: no `{0}` column")]
    NoColumn(String),
}

crate::error::text_at_the_edge!(ProfileError, PageError);
