//! The runtime's side of each `Effect` kind: one function per kind, called by `execute`.

use super::app::{self, AppEvent, AppState};
use super::{ProfileJob, Runtime, build_measure_job, deliver, run_profile, start_agent, watch};
use crate::contract::protocol::Event;
use crate::contract::runner::{JobEvent, Runner};
use crate::session::model::LogLevel;
use std::path::PathBuf;
use std::time::Duration;

/// Starts the agent; on failure marks it stopped and logs why.
pub(super) fn start_agent_or_log(
    rtm: &mut Runtime,
    state: &mut AppState,
    op: String,
    st: crate::agent::AgentState,
    sources: Vec<(String, Option<f64>)>,
    seed: u64,
) -> Option<PathBuf> {
    if let Err(e) = start_agent(rtm, state, op.clone(), st, sources, seed) {
        if let Some(a) = state.agents.get_mut(&op) {
            a.running = false;
        }
        state.log(LogLevel::Error, format!("agent on {op}: cannot start: {e}"));
    }
    None
}

/// Passes a control message to an operator's running agent, forgetting it once it has
/// finished.
pub(super) fn send_to_agent(rtm: &mut Runtime, op: &str, c: app::AgentCtl) -> Option<PathBuf> {
    // A control message for an agent that has finished is moot.
    if let Some(tx) = rtm.agents.get(op)
        && tx.send(c).is_err()
    {
        rtm.agents.remove(op);
    }
    None
}

/// Submits a measurement job and forwards its events to the app until it ends.
pub(super) fn submit_measure(
    rtm: &mut Runtime,
    state: &mut AppState,
    op: &str,
    rev: u32,
    mid: u64,
    source: String,
    full: bool,
) -> Option<PathBuf> {
    match build_measure_job(state, op, rev, source, full) {
        Ok(job) => {
            let (id, mut erx) = rtm.pool.for_model(state.gpu_model()).submit(job);
            rtm.jobs.insert(mid, id);
            let tx = rtm.tx.clone();
            tokio::spawn(async move {
                while let Some(ev) = erx.recv().await {
                    let end = matches!(
                        ev,
                        JobEvent::Worker(Event::Done { .. }) | JobEvent::WorkerLost { .. }
                    );
                    if tx.send(AppEvent::Job { mid, event: ev }).is_err() || end {
                        break;
                    }
                }
            });
        }
        // The job could not be built: it ends like a lost one, through the event queue.
        Err(msg) => deliver(
            &rtm.tx,
            AppEvent::Job {
                mid,
                event: JobEvent::WorkerLost {
                    verdict: crate::contract::protocol::Verdict::Error,
                    message: msg,
                },
            },
        ),
    }
    None
}

/// Cancels a measurement job still running in the worker.
pub(super) fn cancel(rtm: &mut Runtime, mid: u64) -> Option<PathBuf> {
    if let Some(id) = rtm.jobs.remove(&mid) {
        rtm.pool.cancel(id);
    }
    None
}

/// Writes the kernel to its file and watches it; returns the file for the editor.
pub(super) fn external_edit(
    rtm: &mut Runtime,
    state: &mut AppState,
    path: PathBuf,
    content: &str,
) -> Option<PathBuf> {
    if let Some(d) = path.parent()
        && let Err(e) = std::fs::create_dir_all(d)
    {
        state.log(LogLevel::Error, format!("{}: {e}", d.display()));
        return None;
    }
    if let Err(e) = std::fs::write(&path, content) {
        state.log(LogLevel::Error, format!("{}: {e}", path.display()));
        return None;
    }
    match watch(&rtm.tx, &path) {
        Ok(w) => rtm.watchers.push(w),
        Err(e) => state.log(
            LogLevel::Warn,
            format!("cannot watch {}: {e}", path.display()),
        ),
    }
    Some(path)
}

/// Stops replay playback, and restarts it with a tick every `period` when given.
pub(super) fn playback(rtm: &mut Runtime, p: Option<Duration>) -> Option<PathBuf> {
    if let Some(h) = rtm.playback.take() {
        h.abort();
    }
    if let Some(period) = p {
        let tx = rtm.tx.clone();
        rtm.playback = Some(tokio::spawn(async move {
            let mut iv = tokio::time::interval(period);
            iv.tick().await;
            loop {
                iv.tick().await;
                if tx.send(AppEvent::Tick).is_err() {
                    break;
                }
            }
        }));
    }
    None
}

/// Profiles a revision on a task of its own; the result comes back as `AppEvent::Profiled`.
pub(super) fn start_profile(rtm: &Runtime, state: &AppState, job: ProfileJob) -> Option<PathBuf> {
    let (suite, client, tx) = (
        state.suite.clone(),
        rtm.pool.for_model(state.gpu_model()),
        rtm.tx.clone(),
    );
    tokio::spawn(async move {
        let (op, rev) = (job.op.clone(), job.rev);
        let result = run_profile(suite, client, job).await;
        deliver(&tx, AppEvent::Profiled { op, rev, result });
    });
    None
}

/// Reads a recorded session (a file or a built-in demo) and hands it to replay.
pub(super) fn open_replay(rtm: &Runtime, f: app::SessionFile) -> Option<PathBuf> {
    let result = match &f.path {
        Some(p) => crate::session::timeline::load(p, crate::session::timeline::LAZY_FROM),
        None => match crate::session::demos::demo(&f.name) {
            Some(text) => crate::session::parse_text(&f.name, text).map(|mut l| {
                let records = std::mem::take(&mut l.records);
                (records.into(), l)
            }),
            None => Err(crate::session::store::SessionError::Other {
                file: f.name.clone(),
                message: "no such built-in session".into(),
            }),
        },
    };
    deliver(
        &rtm.tx,
        AppEvent::ReplayLoaded {
            name: f.name,
            result: result.map_err(|e| e.to_string()),
        },
    );
    None
}
