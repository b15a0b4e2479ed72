//! Replay: seeking, stepping, jumping to revisions, playback speed, and leaving a replay opened
//! from the session picker (back to the picker and the live view it replaced).

use crate::session::Model;
use crate::session::model::LogLevel;
use crate::session::timeline::Kept;
use crate::tui::event::Effect;
use crate::tui::state::{AppState, BASE_RATE, Behind, Modal, Replay, SPEEDS};
use std::time::Duration;

/// Moves the replay to `pos` events (rebuilding from the start when going back).
pub fn replay_seek(state: &mut AppState, pos: usize) {
    let Some(r) = &mut state.replay else { return };
    let pos = pos.min(r.records.len());
    if pos >= r.pos {
        r.records.apply(&mut state.model, r.pos..pos);
    } else {
        state.model = r.records.model_at(&state.suite, pos);
    }
    state.model.interrupt_unended(&r.ended);
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
    let Some(r) = &state.replay else {
        return vec![];
    };
    let pos = (r.pos as isize + delta).clamp(0, r.records.len() as isize) as usize;
    replay_seek(state, pos);
    vec![]
}

pub(crate) fn replay_jump_revision(state: &mut AppState, forward: bool) {
    let Some(r) = &state.replay else { return };
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
    if let Some(r) = &mut state.replay
        && r.pos >= r.records.len()
        && !r.playing
    {
        r.pos = 0;
        state.model = Model::from_records(&state.suite, &[]);
    }
    let Some(r) = &mut state.replay else {
        return vec![];
    };
    r.playing = !r.playing;
    vec![Effect::Playback(r.playing.then(|| playback_period(r)))]
}

pub(crate) fn replay_speed(state: &mut AppState, faster: bool) -> Vec<Effect> {
    let Some(r) = &mut state.replay else {
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
    let empty = Model::new(&state.suite);
    Box::new(Behind {
        model: std::mem::replace(&mut state.model, empty),
        hw: state.hw.clone(),
        focus: state.focus,
        phase: state.phase,
        op_sel: state.op_sel,
        rev_sel: state.rev_sel,
        shape_sel: state.shape_sel,
        picked: state
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
    if state.replay.as_ref().is_none_or(|r| r.back.is_none()) {
        return vec![];
    }
    let Some(Replay {
        back: Some(b),
        playing,
        file,
        ..
    }) = state.replay.take()
    else {
        return vec![];
    };
    let mut fx = Vec::new();
    if playing {
        fx.push(Effect::Playback(None));
    }
    fx.extend(state.jobs.keys().map(|mid| Effect::Cancel { mid: *mid }));
    state.jobs.clear();
    state.model = b.model;
    state.hw = b.hw;
    state.compute_shape_info();
    state.restand();
    state.focus = b.focus;
    state.phase = b.phase;
    state.op_sel = b.op_sel;
    state.rev_sel = b.rev_sel;
    state.shape_sel = b.shape_sel;
    state.gauge_scroll = b.shape_sel.unwrap_or(0);
    state.modal = Modal::Sessions { sel: b.picked };
    state.log(
        LogLevel::Info,
        format!("left the replay of {file}: the recorded sessions again"),
    );
    fx
}
