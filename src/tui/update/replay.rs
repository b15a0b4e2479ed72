//! Replay: seeking, stepping, jumping to revisions, playback speed.

use super::*;
use crate::session::{Model, Record, SessionEvent};
use std::time::Duration;

/// Moves the replay to `pos` events (rebuilding from the start when going back).
pub fn replay_seek(state: &mut AppState, pos: usize) {
    let Some(r) = &mut state.replay else { return };
    let pos = pos.min(r.records.len());
    if pos >= r.pos {
        for rec in &r.records[r.pos..pos] {
            state.model.apply(rec);
        }
    } else {
        state.model = Model::from_records(&state.suite, &r.records[..pos]);
    }
    state.model.interrupt_unended(&r.ended);
    r.pos = pos;
    // follow the operator and revision the last event touched
    let touched = r.records[..pos].last().and_then(|rec| match &rec.event {
        SessionEvent::Revision { op, rev, .. }
        | SessionEvent::MeasureStart { op, rev, .. }
        | SessionEvent::Compiled { op, rev, .. }
        | SessionEvent::ShapeResult { op, rev, .. }
        | SessionEvent::MeasureDone { op, rev, .. }
        | SessionEvent::Decision { op, rev, .. } => Some((op.clone(), *rev)),
        _ => None,
    });
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
    let is_rev = |rec: &Record| matches!(rec.event, SessionEvent::Revision { .. });
    let target = if forward {
        r.records
            .iter()
            .enumerate()
            .skip(r.pos)
            .find(|(_, x)| is_rev(x))
            .map(|(i, _)| i + 1)
    } else {
        r.records[..r.pos.saturating_sub(1)]
            .iter()
            .rposition(is_rev)
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
