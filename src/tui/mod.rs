//! The interactive terminal UI.
//!
//! Data flows one way: input, the pool, watchers, signals and the agents → `AppEvent` →
//! `update` (which records session events through the session's recorder into the journal) →
//! `AppState` → `view::draw`. Side effects leave `update` as `Effect`s, which the runtime
//! carries out; it also writes the journal to the session file. `update` does no I/O and
//! drawing is a pure function of the state.
//!
//! The map:
//! - `startup`: what happens before the first frame (settings, suite, standing and session read
//!   into the state; the pool and the feeds started).
//! - `runtime`: the terminal, the event loop, each `Effect` carried out and the tasks those
//!   spawn; `handover` gives the terminal to `$EDITOR` or the shell and takes it back;
//!   `standing_writer` writes the standing's records off the input loop; `agent_link` is an
//!   agent's sink and gate.
//! - `event`: what happens to the app (`AppEvent`, `Effect`) and how it is sent (`deliver`).
//! - `state`: the state, and the invariants that hold it together.
//! - `update/`: the update function, by concern. `keymap`: every key in one table (dispatch,
//!   key bar and help).
//! - `view/`: one file per pane and modal, and `layout` (where each pane goes; `update` asks it
//!   too). `logview`, `search`, `text`, `highlight`, `theme`: what both sides share.
//! - `first_frame`: the start and its first frame, timed, without a terminal (`--first-frame`).

mod agent_link;
pub mod event;
pub mod first_frame;
mod handover;
pub mod highlight;
pub mod keymap;
pub mod logview;
mod runtime;
pub mod search;
mod standing_writer;
pub mod startup;
pub mod state;
pub mod text;
pub mod theme;
pub mod update;
pub mod view;
pub mod view_state;
pub mod workbench;

#[cfg(test)]
mod tests;

pub use runtime::run;
pub use startup::Options;
