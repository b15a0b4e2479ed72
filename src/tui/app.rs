//! The application: one event type (`event`), one state (`state`), one update function
//! (`update`). Data flows one way: worker / watchers / input / agent → `AppEvent` → `update`
//! (which records session events through the session's recorder into the journal) → `AppState`
//! → `view::draw`. Side effects leave `update` as `Effect`s; the runtime (`tui::run`) carries
//! them out and writes the journal to the session file.

pub use super::event::*;
pub use super::state::*;
pub use super::update::{offered_rev, replay_seek, update};
