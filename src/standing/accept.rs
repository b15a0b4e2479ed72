//! Accepting a revision updates the standing: the TUI (`y`), `measure --decide accept|auto` and
//! the agent's auto mode all take the accepted revision of their session — its source and its
//! latest measurement — into a record of the workspace's standing.

use super::build::{self, Context};
use super::error::RecordError;
use super::format::Origin;
use super::stale::OpPrint;
use super::store::{self, Update, Written};
use crate::session::Model;
use crate::session::model::MeasureStatus;
use crate::suite::{Problem, Workspace};
use std::path::Path;

/// Where measurements are made: the GPU, its driver and NVRTC, the hardware profile of T_SOL.
#[derive(Debug, Clone, PartialEq)]
pub struct Bench {
    pub gpu: String,
    pub driver: String,
    pub nvrtc: Option<String>,
    pub hardware: String,
}

/// How a session is named in a record: its path inside the workspace, else as given.
pub fn session_label(ws: &Path, session: &Path) -> String {
    session
        .strip_prefix(ws)
        .unwrap_or(session)
        .display()
        .to_string()
}

/// The record of a session's revision: its source and its latest measurement (which must have
/// ended with per-shape results), stamped with where and when that measurement was made — an
/// earlier run of a resumed session may have measured it on another GPU or profile, which the
/// record then says (and the standing judges stale here) — else with `bench` now.
pub fn update_for_revision(
    p: &Problem,
    print: &OpPrint,
    model: &Model,
    rev: u32,
    session: &str,
    bench: &Bench,
) -> Result<Update, RecordError> {
    let r = model
        .ops
        .get(&p.name)
        .and_then(|o| o.rev(rev))
        .ok_or_else(|| RecordError::NoRevision {
            operator: p.name.clone(),
            rev,
        })?;
    let m = &r.measurement;
    if !matches!(m.status, MeasureStatus::Done(_)) || m.results.is_empty() {
        return Err(RecordError::NotMeasured {
            operator: p.name.clone(),
            rev,
        });
    }
    let results: Vec<_> = m.results.values().cloned().collect();
    let ctx = made_on(m.made.as_ref(), bench);
    Ok(Update {
        op: p.name.clone(),
        record: build::record(
            p,
            print,
            &r.source,
            store::kernel_path(&p.name, &r.source),
            Origin::Session {
                session: session.to_string(),
                rev,
            },
            if m.mode.is_empty() { "full" } else { &m.mode },
            &results,
            &ctx,
        ),
        source: r.source.clone(),
    })
}

/// Where a measurement was made, for its record: its own run's device and start time; where the
/// run did not know its GPU and profile (an older session's events), `bench` now.
pub fn made_on(made: Option<&crate::session::model::MadeOn>, bench: &Bench) -> Context {
    let now = Context::now(
        &bench.gpu,
        &bench.driver,
        bench.nvrtc.as_deref(),
        &bench.hardware,
    );
    // A stamp names one machine: without its GPU and profile it is not used at all (rather
    // than one machine's GPU with another's driver or profile).
    let Some((m, gpu, hardware)) =
        made.and_then(|m| Some((m, m.gpu.clone()?, m.hardware.clone()?)))
    else {
        return now;
    };
    Context {
        gpu,
        driver: m.driver.clone().unwrap_or_default(),
        nvrtc: m.nvrtc.clone(),
        tool_version: m.tool_version.clone().unwrap_or(now.tool_version),
        hardware,
        date: if m.t > 0.0 {
            crate::utc::at(m.t as i64)
        } else {
            now.date
        },
    }
}

/// Records accepted revisions of one operator of one session into the workspace's standing (the
/// headless commands: `measure`, the agent).
#[derive(Debug, Clone)]
pub struct Keeper {
    pub ws: Workspace,
    pub suite: String,
    pub problem: Problem,
    pub print: OpPrint,
    pub bench: Bench,
    /// The session, as records name it.
    pub session: String,
}

impl Keeper {
    /// Records the accepted revision `rev` of the session's state.
    pub fn accept(&self, model: &Model, rev: u32) -> Result<Written, RecordError> {
        self.write(self.update(model, rev)?)
    }

    /// The record of the accepted revision `rev` (taken while the session's state is at hand).
    pub fn update(&self, model: &Model, rev: u32) -> Result<Update, RecordError> {
        update_for_revision(
            &self.problem,
            &self.print,
            model,
            rev,
            &self.session,
            &self.bench,
        )
    }

    /// Writes a record (which may wait for another process's turn on the standing's lock: call
    /// it without holding the session).
    pub fn write(&self, u: Update) -> Result<Written, RecordError> {
        store::record(&self.ws, &self.suite, &self.bench.hardware, &[u])
    }

    /// What a command prints after recording: where, and a backup if one was made.
    pub fn report(&self, rev: u32, w: &Result<Written, RecordError>) -> String {
        match w {
            Ok(w) => {
                let mut s = format!(
                    "standing: {} v{rev} is the incumbent in {}",
                    self.problem.name,
                    w.file.display()
                );
                if let Some((to, why)) = &w.backup {
                    s.push_str(&format!(" ({why}; moved to {})", to.display()));
                }
                s
            }
            Err(e) => format!(
                "standing: {} v{rev} accepted but not recorded: {e}",
                self.problem.name
            ),
        }
    }
}
