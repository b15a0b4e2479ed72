//! Giving the terminal away and taking it back: to `$EDITOR` (`E`) and to the shell (Ctrl-Z,
//! SIGTSTP; `fg` continues).
//!
//! Invariants:
//! - Taking the terminal back never waits for an answer from the terminal: no cursor position
//!   query (a terminal that answers late, or an answer read by someone else, would otherwise
//!   end the app). Raw mode and the alternate screen are entered again and ratatui's buffers
//!   are reset (`Terminal::resize`), so the next draw paints every cell; the terminal is asked
//!   only its size, which is an ioctl.
//! - Nothing here touches the state: the runtime runs the editor and records what it saved
//!   before it calls `take_back`. A failure to take the terminal back is returned for the log,
//!   never fatal: the next draw tries again.
//! - The input stream is dropped while the terminal is away (the editor or the shell reads
//!   the keys) and opened again after, whatever happened.
//! - Suspending stops this process only (SIGSTOP: SIGTSTP is caught to get here): the workers
//!   go on measuring, and their results are read when the app continues.

use crossterm::event::EventStream;
use ratatui::layout::Rect;

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
