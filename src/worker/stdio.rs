//! The worker's standard streams, kept apart from its protocol.
//!
//! A kernel's `printf` is flushed by the CUDA driver to file descriptor 1, so the protocol must
//! not travel there. At start the worker moves the protocol to a private descriptor (a
//! close-on-exec duplicate of the original fd 1) and points fd 1 at a pipe that a thread drains
//! into a bounded buffer. Whatever kernel code prints therefore lands in [`Capture`], never in the
//! protocol stream, and the worker reports it per shape as an `output` event.
//!
//! Invariants:
//! - nothing but [`Protocol`] writes to the protocol descriptor;
//! - the drain thread never stops reading, so a kernel that prints without end can slow itself
//!   down but never block the worker; what exceeds the job's budget is counted, not kept;
//! - [`Capture::take`] returns exactly what was written to fd 1 before the call: it flushes C
//!   stdio, writes a marker with a per-process random nonce (which kernel code cannot know) and
//!   waits until the drain thread has seen it.

use std::io::{Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The most a job's kernels may print and have kept; the rest is counted.
pub const JOB_OUTPUT_LIMIT: usize = 64 * 1024;

/// The line that closes kept output once the budget is spent (not counted against it).
pub fn not_kept_note(dropped: u64) -> String {
    format!(
        "\n[{dropped} more bytes not kept: a job keeps at most {} KiB of kernel output]",
        JOB_OUTPUT_LIMIT / 1024
    )
}

/// The protocol channel: a private duplicate of the original stdout.
pub struct Protocol(std::fs::File);

impl Write for Protocol {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// What kernels printed since the last take.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Printed {
    /// The text kept, with control characters made visible.
    pub text: String,
    /// Bytes printed but not kept (over the job's budget).
    pub dropped: u64,
}

impl Printed {
    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.dropped == 0
    }
}

/// Splits the drained byte stream at markers; pure, so it is tested without pipes.
#[derive(Debug)]
pub struct Splitter {
    marker: Vec<u8>,
    /// Bytes that may be the start of a marker.
    pending: Vec<u8>,
    /// Bytes kept for the current take.
    kept: Vec<u8>,
    /// Bytes counted but not kept.
    dropped: u64,
    /// Budget left for the current job.
    budget: usize,
    /// Markers seen so far.
    pub marks: u64,
}

impl Splitter {
    pub fn new(marker: Vec<u8>) -> Splitter {
        Splitter {
            marker,
            pending: Vec::new(),
            kept: Vec::new(),
            dropped: 0,
            budget: JOB_OUTPUT_LIMIT,
            marks: 0,
        }
    }

    fn keep(&mut self, b: &[u8]) {
        let n = b.len().min(self.budget);
        self.kept.extend_from_slice(&b[..n]);
        self.budget -= n;
        self.dropped += (b.len() - n) as u64;
    }

    /// Feeds bytes read from the pipe.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        loop {
            match find(&self.pending, &self.marker) {
                Some(at) => {
                    let before: Vec<u8> = self.pending[..at].to_vec();
                    self.keep(&before);
                    self.pending.drain(..at + self.marker.len());
                    self.marks += 1;
                }
                None => {
                    // Keep back only what could begin a marker.
                    let hold = self.marker.len().saturating_sub(1).min(self.pending.len());
                    let cut = self.pending.len() - hold;
                    let head: Vec<u8> = self.pending[..cut].to_vec();
                    self.keep(&head);
                    self.pending.drain(..cut);
                    return;
                }
            }
        }
    }

    /// Everything kept since the last take.
    pub fn take(&mut self) -> Printed {
        let text = visible(&String::from_utf8_lossy(&std::mem::take(&mut self.kept)));
        Printed {
            text,
            dropped: std::mem::take(&mut self.dropped),
        }
    }

    /// A new job: a fresh budget.
    pub fn new_job(&mut self) {
        self.budget = JOB_OUTPUT_LIMIT;
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Control characters other than newline and tab shown as their Unicode pictures (so printed
/// escape sequences cannot drive the user's terminal).
pub fn visible(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            '\u{7f}' => '\u{2421}',
            c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
            c if ('\u{80}'..='\u{9f}').contains(&c) => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// The drained fd 1.
pub struct Capture {
    shared: Arc<(Mutex<Splitter>, Condvar)>,
    marker: Vec<u8>,
    written: u64,
}

impl Capture {
    /// Everything printed to fd 1 (by kernels through the driver, or by C stdio) since the last
    /// take. Waits at most a second for the drain thread.
    pub fn take(&mut self) -> Printed {
        unsafe {
            libc::fflush(std::ptr::null_mut());
        }
        let _ = std::io::stdout().flush();
        let mut ok = false;
        unsafe {
            let n = libc::write(1, self.marker.as_ptr() as *const _, self.marker.len());
            if n == self.marker.len() as isize {
                self.written += 1;
                ok = true;
            }
        }
        let (lock, cv) = &*self.shared;
        let Ok(mut s) = lock.lock() else {
            return Printed::default();
        };
        if ok {
            let deadline = std::time::Instant::now() + Duration::from_secs(1);
            while s.marks < self.written {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                match cv.wait_timeout(s, left) {
                    Ok((g, _)) => s = g,
                    Err(_) => return Printed::default(),
                }
            }
        }
        s.take()
    }

    /// Starts a job: drops what is left from before and renews the budget.
    pub fn new_job(&mut self) {
        let _ = self.take();
        if let Ok(mut s) = self.shared.0.lock() {
            s.new_job();
        }
    }
}

fn nonce() -> Vec<u8> {
    let mut b = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !ok {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let x = t ^ ((std::process::id() as u128) << 64);
        b.copy_from_slice(&x.to_le_bytes());
    }
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("\u{1}atrex-mark-{hex}\u{1}").into_bytes()
}

/// Moves the protocol off fd 1 and starts draining fd 1. Call once, before any CUDA call.
pub fn isolate() -> std::io::Result<(Protocol, Capture)> {
    use std::os::fd::FromRawFd;
    unsafe {
        let proto = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if proto < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut fds = [0i32; 2];
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(fds[1], 1) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::close(fds[1]);
        let marker = nonce();
        let shared = Arc::new((Mutex::new(Splitter::new(marker.clone())), Condvar::new()));
        let mut reader = std::fs::File::from_raw_fd(fds[0]);
        let s2 = shared.clone();
        std::thread::Builder::new()
            .name("stdout-drain".into())
            .spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            let (lock, cv) = &*s2;
                            if let Ok(mut s) = lock.lock() {
                                s.feed(&buf[..n]);
                            }
                            cv.notify_all();
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
            })?;
        Ok((
            Protocol(std::fs::File::from_raw_fd(proto)),
            Capture {
                shared,
                marker,
                written: 0,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_split_the_stream_even_across_reads() {
        let m = b"<MARK>".to_vec();
        let mut s = Splitter::new(m);
        s.feed(b"hello <MA");
        assert_eq!(s.marks, 0);
        s.feed(b"RK>world");
        assert_eq!(s.marks, 1);
        // What came before the marker belongs to this take; what came after, to the next.
        assert_eq!(s.take().text, "hello ");
        s.feed(b"<MARK><MARK>");
        assert_eq!(s.marks, 3);
        assert_eq!(s.take().text, "world");
        assert!(s.take().is_empty());
    }

    #[test]
    fn the_job_budget_bounds_what_is_kept() {
        let mut s = Splitter::new(b"#".to_vec());
        s.feed(&vec![b'a'; JOB_OUTPUT_LIMIT + 100]);
        let p = s.take();
        assert_eq!(p.text.len(), JOB_OUTPUT_LIMIT);
        assert_eq!(p.dropped, 100);
        s.feed(b"more");
        assert_eq!(s.take().dropped, 4, "the budget is per job");
        s.new_job();
        s.feed(b"more");
        assert_eq!(s.take().text, "more");
    }

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(visible("a\x1b[2Jb\r\n\t"), "a\u{241b}[2Jb\u{240d}\n\t");
        assert_eq!(visible("\u{9b}x"), "\u{fffd}x");
    }
}
