//! The update function: one event applied to the state, the side effects returned. No I/O
//! happens here (recorded events go to the journal, which the runtime writes). One file per
//! concern: keys, jobs (measure, profile, worker), the agent, replay, the editor, decisions.

use crate::contract::protocol::Verdict;
use crate::session::SessionEvent;
use crate::session::model::LogLevel;
use crossterm::event::KeyEventKind;

mod agent;
mod decide;
mod editor;
mod jobs;
mod keys;
mod panes;
mod replay;
mod search;
mod standing;

use crate::tui::event::{AgentCtl, AppEvent, Effect, HelloInfo};
use crate::tui::state::AppState;
use crate::tui::view_state::Modal;
use crate::tui::workbench::WorkerState;
use agent::on_agent;
pub use decide::offered_rev;
use editor::on_file;
use jobs::{on_job, on_profiled};
use keys::on_key;
use panes::{keep_log_view, log_mark, on_resize};
pub use replay::replay_seek;
use replay::{behind, replay_step};
use standing::standing_at_hello;

/// The update function: applies one event to the state and returns the side effects.
pub fn update(state: &mut AppState, ev: AppEvent) -> Vec<Effect> {
    let log_before = log_mark(state);
    let fx = match ev {
        AppEvent::Key(k) if k.kind == KeyEventKind::Press || k.kind == KeyEventKind::Repeat => {
            on_key(state, k)
        }
        AppEvent::Key(_) => vec![],
        AppEvent::Resize(w, h) => {
            on_resize(state, w, h);
            vec![]
        }
        AppEvent::Hello(r) => {
            on_hello(state, r);
            vec![]
        }
        AppEvent::Job { mid, event } => on_job(state, mid, event),
        AppEvent::Pool(p) => {
            state.work.restarts = p.restarts();
            state.work.pool = p;
            vec![]
        }
        AppEvent::HighlighterReady(Ok(h)) => {
            state.view.highlighter = Some(h);
            state.view.hl_cache.clear();
            vec![]
        }
        AppEvent::HighlighterReady(Err(e)) => {
            state
                .work
                .log(LogLevel::Warn, format!("syntax highlighting off: {e}"));
            vec![]
        }
        AppEvent::FileChanged { path, content } => on_file(state, path, content),
        AppEvent::EditorExited {
            path,
            status,
            content,
        } => {
            // What the editor left is recorded first (a save not yet reported by the watcher
            // included; the same content twice is recorded once).
            let fx = on_file(state, path.clone(), content);
            state.work.log(
                LogLevel::Info,
                format!(
                    "editor closed ({status}); still watching {}",
                    path.file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_default()
                ),
            );
            fx
        }
        AppEvent::Tick => {
            let fx = replay_step(state, 1);
            if state
                .work
                .replay
                .as_ref()
                .map(|r| r.pos >= r.records.len())
                .unwrap_or(true)
            {
                if let Some(r) = &mut state.work.replay {
                    r.playing = false;
                }
                let mut v = fx;
                v.push(Effect::Playback(None));
                v
            } else {
                fx
            }
        }
        AppEvent::Signal(name, number) => {
            state.work.log(LogLevel::Warn, format!("{name}: quitting"));
            state.work.exit_status = 128 + number;
            quit_now(state)
        }
        AppEvent::Stop => vec![Effect::Suspend],
        AppEvent::Log(l, s) => {
            state.work.log(l, s);
            vec![]
        }
        AppEvent::Agent(op, m) => on_agent(state, &op, m),
        AppEvent::NcuFound(r) => {
            state.work.ncu = Some(r);
            vec![]
        }
        AppEvent::Profiled { op, rev, result } => on_profiled(state, op, rev, result),
        AppEvent::ReplayLoaded { name, result } => {
            match result {
                Ok((records, loaded)) => {
                    // what the replay takes the place of, for q to go back to the picker
                    let back = state.work.replay.is_none().then(|| behind(state, &name));
                    state.open_replay(name, records, loaded, back);
                }
                Err(e) => state
                    .work
                    .log(LogLevel::Error, format!("cannot open {name}: {e}")),
            }
            vec![]
        }
        AppEvent::ResultsRead {
            op,
            rev,
            mid,
            result,
        } => {
            state.work.take_results(&op, rev, mid, result);
            vec![]
        }
    };
    state.refresh();
    keep_log_view(state, log_before);
    let mut fx = fx;
    fx.extend(state.results_wanted());
    fx
}

pub(crate) fn quit_now(state: &mut AppState) -> Vec<Effect> {
    state.work.quit = true;
    let mut fx: Vec<Effect> = state
        .work
        .jobs
        .keys()
        .map(|m| Effect::Cancel { mid: *m })
        .collect();
    for a in state.work.running_agents() {
        fx.push(Effect::Agent(a.op.clone(), AgentCtl::Stop));
    }
    let running: Vec<(u64, String, u32)> = state
        .work
        .jobs
        .iter()
        .map(|(m, j)| (*m, j.op.clone(), j.rev))
        .collect();
    for (mid, op, rev) in running {
        state.work.record(SessionEvent::MeasureDone {
            op,
            rev,
            mid,
            verdict: Verdict::Cancelled,
            message: Some("cancelled at quit".into()),
        });
    }
    state.work.jobs.clear();
    fx.push(Effect::Quit);
    fx
}

pub(crate) fn on_hello(state: &mut AppState, r: Result<HelloInfo, String>) {
    match r {
        Ok(HelloInfo {
            device: Some(d),
            driver,
            nvrtc,
        }) => {
            state.work.worker = WorkerState::Ready {
                gpu: d.name.clone(),
                sm_clock_mhz: d.sm_clock_mhz,
            };
            let prof =
                crate::suite::hardware::profile_for_device(&state.work.suite.hardware, &d.name)
                    .cloned();
            if state.work.replay.is_none() {
                if let Some(p) = prof {
                    state.work.hw = Some(p);
                    state.work.compute_shape_info();
                }
                state.work.restand();
                standing_at_hello(state);
                let hardware = state.work.hw.as_ref().map(|h| h.key.clone());
                state.work.record(SessionEvent::Device {
                    gpu: Some(d.name.clone()),
                    driver: Some(driver),
                    nvrtc,
                    hardware,
                });
            } else {
                state.work.log(
                    LogLevel::Info,
                    format!(
                        "GPU available: {} (m re-measures the selected revision)",
                        d.name
                    ),
                );
            }
        }
        Ok(HelloInfo { device: None, .. }) => {
            state.work.worker = WorkerState::NoGpu("the worker found no GPU".into());
            state.work.restand();
            state
                .work
                .log(LogLevel::Info, "no GPU: browse and replay only".into());
            offer_sessions(state);
        }
        Err(e) => {
            state.work.worker = WorkerState::NoGpu(e.clone());
            state.work.restand();
            state.work.log(
                LogLevel::Info,
                format!("no GPU: browse and replay only ({e})"),
            );
            offer_sessions(state);
        }
    }
}

/// Without a GPU, a new session can only browse: offer the recorded ones.
pub(crate) fn offer_sessions(state: &mut AppState) {
    if state.work.replay.is_none()
        && !state.work.recorded_sessions.is_empty()
        && matches!(state.view.modal, Modal::None)
    {
        state.view.modal = Modal::Sessions { sel: 0 };
    }
}
