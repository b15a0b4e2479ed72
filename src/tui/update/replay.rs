//! Replay: seeking, stepping, jumping to revisions, playback speed.

use super::*;
use crate::session::Model;
use crate::session::timeline::Kept;
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
