//! Replay: seeking, stepping, jumping to revisions, playback speed, and leaving a replay opened
//! from the session picker (back to the picker and the live view it replaced).

use crate::session::Model;
use crate::session::model::LogLevel;
use crate::session::timeline::Kept;
use crate::tui::event::Effect;
use crate::tui::state::{AppState, Behind};
use crate::tui::view_state::Modal;
use crate::tui::workbench::{BASE_RATE, Replay, SPEEDS};
use std::time::Duration;

/// Moves the replay to `pos` events (rebuilding from the start when going back).
pub fn replay_seek(state: &mut AppState, pos: usize) {
    let Some(r) = &mut state.work.replay else {
        return;
    };
    let pos = pos.min(r.records.len());
    if pos >= r.pos {
        r.records.apply(&mut state.work.model, r.pos..pos);
    } else {
        state.work.model = r.records.model_at(&state.work.suite, pos);
    }
    state.work.model.interrupt_unended(&r.ended);
    r.pos = pos;
    // follow the operator and revision the last event touched
    let touched = pos
        .checked_sub(1)
        .and_then(|i| r.records.get(i))
        .and_then(|k| k.touches())
        .map(|(op, rev)| (op.to_string(), rev));
    if let Some((op, rev)) = touched {
        state.select_op_name(&op);
        state.select_rev_number(rev);
    }
}

pub(crate) fn replay_step(state: &mut AppState, delta: isize) -> Vec<Effect> {
    let Some(r) = &state.work.replay else {
        return vec![];
    };
    let pos = (r.pos as isize + delta).clamp(0, r.records.len() as isize) as usize;
    replay_seek(state, pos);
    vec![]
}

pub(crate) fn replay_jump_revision(state: &mut AppState, forward: bool) {
    let Some(r) = &state.work.replay else { return };
    let target = if forward {
        r.records
            .iter()
            .enumerate()
            .skip(r.pos)
            .find(|(_, x)| x.is_revision())
            .map(|(i, _)| i + 1)
    } else {
        r.records
            .iter()
            .take(r.pos.saturating_sub(1))
            .rposition(Kept::is_revision)
            .map(|i| i + 1)
    };
    if let Some(t) = target {
        replay_seek(state, t);
    }
}

pub(crate) fn playback_period(r: &Replay) -> Duration {
    Duration::from_secs_f64(1.0 / (BASE_RATE * SPEEDS[r.speed.min(SPEEDS.len() - 1)]))
}

pub(crate) fn play_pause(state: &mut AppState) -> Vec<Effect> {
    if let Some(r) = &mut state.work.replay
        && r.pos >= r.records.len()
        && !r.playing
    {
        r.pos = 0;
        state.work.model = Model::from_records(&state.work.suite, &[]);
    }
    let Some(r) = &mut state.work.replay else {
        return vec![];
    };
    r.playing = !r.playing;
    vec![Effect::Playback(r.playing.then(|| playback_period(r)))]
}

pub(crate) fn replay_speed(state: &mut AppState, faster: bool) -> Vec<Effect> {
    let Some(r) = &mut state.work.replay else {
        return vec![];
    };
    r.speed = if faster {
        (r.speed + 1).min(SPEEDS.len() - 1)
    } else {
        r.speed.saturating_sub(1)
    };
    if r.playing {
        return vec![Effect::Playback(Some(playback_period(r)))];
    }
    vec![]
}

/// The live view a replay opened from the picker replaces (its model is moved out: the replay
/// builds its own).
pub(crate) fn behind(state: &mut AppState, name: &str) -> Box<Behind> {
    let empty = Model::new(&state.work.suite);
    Box::new(Behind {
        model: std::mem::replace(&mut state.work.model, empty),
        hw: state.work.hw.clone(),
        focus: state.view.focus,
        phase: state.view.phase,
        op_sel: state.view.op_sel,
        rev_sel: state.view.rev_sel,
        shape_sel: state.view.shape_sel,
        picked: state
            .work
            .recorded_sessions
            .iter()
            .position(|f| f.name == name)
            .unwrap_or(0),
    })
}

/// `q` in a replay opened from the session picker: the live view as it was, and the picker
/// again (on the session replayed). Playback stops; a measurement started in the replay is
/// cancelled (its results would belong to the replay).
pub(crate) fn back_to_sessions(state: &mut AppState) -> Vec<Effect> {
    if state.work.replay.as_ref().is_none_or(|r| r.back.is_none()) {
        return vec![];
    }
    let Some(Replay {
        back: Some(b),
        playing,
        file,
        ..
    }) = state.work.replay.take()
    else {
        return vec![];
    };
    let mut fx = Vec::new();
    if playing {
        fx.push(Effect::Playback(None));
    }
    fx.extend(
        state
            .work
            .jobs
            .keys()
            .map(|mid| Effect::Cancel { mid: *mid }),
    );
    state.work.jobs.clear();
    state.work.model = b.model;
    state.work.hw = b.hw;
    state.work.compute_shape_info();
    state.work.restand();
    state.view.focus = b.focus;
    state.view.phase = b.phase;
    state.view.op_sel = b.op_sel;
    state.view.rev_sel = b.rev_sel;
    state.view.shape_sel = b.shape_sel;
    state.view.gauge_scroll = b.shape_sel.unwrap_or(0);
    state.view.modal = Modal::Sessions { sel: b.picked };
    state.work.log(
        LogLevel::Info,
        format!("left the replay of {file}: the recorded sessions again"),
    );
    fx
}
