//! Giving the terminal away and taking it back: to `$EDITOR` (`E`) and to the shell (Ctrl-Z,
//! SIGTSTP; `fg` continues).
//!
//! Invariants:
//! - Taking the terminal back never waits for an answer from the terminal: no cursor position
//!   query (a terminal that answers late, or an answer read by someone else, would otherwise
//!   end the app). Raw mode and the alternate screen are entered again and ratatui's buffers
//!   are reset (`Terminal::resize`), so the next draw paints every cell; the terminal is asked
//!   only its size, which is an ioctl.
//! - What the editor saved is recorded before the terminal is taken back: the file is read when
//!   the editor exits and goes through `update` like a save. A failure to take the terminal
//!   back is logged, never fatal: the next draw tries again.
//! - The input stream is dropped while the terminal is away (the editor or the shell reads
//!   the keys) and opened again after, whatever happened.
//! - Suspending stops this process only (SIGSTOP: SIGTSTP is caught to get here): the workers
//!   go on measuring, and their results are read when the app continues.

use super::app::{self, AppEvent, AppState};
use super::{Hand, Runtime, execute};
use crate::session::model::LogLevel;
use crossterm::event::EventStream;
use ratatui::layout::Rect;
use std::path::PathBuf;
use tokio::sync::mpsc;

/// The terminal the app draws on.
pub(super) type Term = ratatui::DefaultTerminal;

/// Leaves raw mode and the alternate screen, the cursor shown, the input stream closed.
pub(super) fn release(terminal: &mut Term, input: &mut Option<EventStream>) {
    drop(input.take());
    let _ = terminal.show_cursor();
    ratatui::restore();
}

/// Enters raw mode and the alternate screen again, reopens the input stream and makes the next
/// draw paint the whole screen. Asks the terminal nothing but its size.
pub(super) fn take_back(
    terminal: &mut Term,
    input: &mut Option<EventStream>,
) -> Result<(), String> {
    let entered = crossterm::terminal::enable_raw_mode()
        .and_then(|_| {
            crossterm::execute!(std::io::stdout(), crossterm::terminal::EnterAlternateScreen)
        })
        .map_err(|e| format!("cannot take the terminal back: {e}"));
    *input = Some(EventStream::new());
    entered?;
    redraw_all(terminal)
}

/// Makes the next draw paint every cell (the screen's content is unknown): clears the screen
/// and ratatui's buffers, sized to the terminal.
pub(super) fn redraw_all(terminal: &mut Term) -> Result<(), String> {
    let size = terminal
        .size()
        .map_err(|e| format!("cannot read the terminal's size: {e}"))?;
    terminal
        .resize(Rect::new(0, 0, size.width, size.height))
        .map_err(|e| format!("cannot clear the terminal: {e}"))
}

/// Ctrl-Z / SIGTSTP: gives the terminal back to the shell, stops until continued, then takes
/// the terminal back.
pub(super) fn suspend(terminal: &mut Term, input: &mut Option<EventStream>) -> Result<(), String> {
    release(terminal, input);
    stop_this_process();
    take_back(terminal, input)
}

/// Stops this process as SIGTSTP's default action would; returns when it is continued.
#[cfg(unix)]
pub(super) fn stop_this_process() {
    // The workers' watchdogs do not count the time stopped against them.
    crate::pool::client::note_suspend();
    // SIGSTOP cannot be caught, and is delivered before `kill` returns: the process is stopped
    // here and goes on from here on SIGCONT.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGSTOP);
    }
}

#[cfg(not(unix))]
pub(super) fn stop_this_process() {}

/// Runs `$EDITOR` on `path` (the terminal already released), handling the app's events while
/// it runs; when it exits, what it left in the file is recorded (through `update`) and written
/// to the session before anything touches the terminal again.
pub(super) async fn run_editor(
    rtm: &mut Runtime,
    state: &mut AppState,
    rx: &mut mpsc::UnboundedReceiver<AppEvent>,
    path: PathBuf,
) {
    let editor = rtm
        .editor
        .clone()
        .or_else(|| std::env::var("VISUAL").ok())
        .or_else(|| std::env::var("EDITOR").ok())
        .unwrap_or_else(|| "vi".into());
    let mut parts = editor.split_whitespace();
    let prog = parts.next().unwrap_or("vi").to_string();
    let args: Vec<String> = parts.map(|s| s.to_string()).collect();
    let child = tokio::process::Command::new(&prog)
        .args(&args)
        .arg(&path)
        .spawn();
    let status = match child {
        Ok(mut c) => loop {
            tokio::select! {
                st = c.wait() => break match st { Ok(s) => s.to_string(), Err(e) => e.to_string() },
                Some(ev) = rx.recv() => {
                    let fx = app::update(state, ev);
                    for e in fx {
                        match execute(rtm, state, e) {
                            Hand::Keep => {}
                            // A second editor cannot start while this one runs.
                            Hand::Editor(p) => state.log(
                                LogLevel::Warn,
                                format!("{}: an editor is already open", p.display()),
                            ),
                            // The editor suspended its process group (its own Ctrl-Z): stop
                            // with it, the terminal being the editor's.
                            Hand::Suspend => stop_this_process(),
                        }
                    }
                    rtm.persist(state);
                }
            }
        },
        Err(e) => format!("cannot start `{editor}`: {e}"),
    };
    let content = std::fs::read_to_string(&path).map_err(|e| e.to_string());
    let fx = app::update(
        state,
        AppEvent::EditorExited {
            path,
            status,
            content,
        },
    );
    // A save's effects are measurements: none of them takes the terminal.
    for e in fx {
        let _ = execute(rtm, state, e);
    }
    rtm.persist(state);
}
