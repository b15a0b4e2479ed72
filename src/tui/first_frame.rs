//! The first frame without a terminal (`--first-frame`, hidden): the TUI's start as `run` does it
//! — settings, suite, standing, session or replay — then one frame drawn on a test backend of the
//! given size, timed. Prints one JSON line: the start's and the frame's times (wall clock from the
//! command's start, and the CPU time used), the process's peak resident memory (VmHWM) and the
//! frame's text. Used to measure the first minute's speed on
//! machines without a GPU; no worker is started and the terminal is never touched.

use super::startup::{Options, prepare};
use super::view;
use crate::suite::Workspace;
use ratatui::{Terminal, backend::TestBackend};
use std::time::Instant;

/// The size of the frame drawn (the largest of the snapshot sizes).
pub const SIZE: (u16, u16) = (200, 50);

/// Prepares the TUI as `run` does, draws its first frame on a test backend and prints the
/// timings (milliseconds from the start of the command), the peak RSS and the frame.
pub fn run(ws: &Workspace, opts: Options, t_start: Instant) -> Result<i32, String> {
    let p = prepare(ws, &opts)?;
    let prepared_ms = ms(t_start);
    let mut term = Terminal::new(TestBackend::new(SIZE.0, SIZE.1))
        .map_err(|e| format!("cannot make a test terminal: {e}"))?;
    term.draw(|f| view::draw(f, &p.state))
        .map_err(|e| format!("cannot draw: {e}"))?;
    let first_frame_ms = ms(t_start);
    let screen: Vec<String> = term
        .backend()
        .buffer()
        .content
        .chunks(SIZE.0 as usize)
        .map(|row| row.iter().map(|c| c.symbol()).collect())
        .collect();
    let doc = serde_json::json!({
        "width": SIZE.0,
        "height": SIZE.1,
        "prepare_ms": prepared_ms,
        "first_frame_ms": first_frame_ms,
        "cpu_ms": cpu_ms(),
        "peak_rss_kib": peak_rss_kib(),
        "screen": screen,
    });
    println!("{doc}");
    Ok(0)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The CPU time the process has used so far (user and system), in milliseconds: the start's cost
/// without the time other processes took the CPU for.
pub fn cpu_ms() -> Option<f64> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; it is read only when the call succeeds.
    let ru = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) != 0 {
            return None;
        }
        ru.assume_init()
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    Some(ms(ru.ru_utime) + ms(ru.ru_stime))
}

/// The process's peak resident set size so far (VmHWM of /proc/self/status), in KiB; None where
/// there is no such file.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
