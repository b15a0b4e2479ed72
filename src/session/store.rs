//! Reading and appending session files: JSON lines, one write per event.

use super::event::{FORMAT_VERSION, Record, SessionEvent};
use super::lock::SessionLock;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub use super::error::SessionError;

/// The error of an I/O call on `file`.
fn io(file: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io {
        file: file.to_path_buf(),
        source,
    }
}

/// A session file that was read: its records and what was skipped.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub records: Vec<Record>,
    /// Problems that did not stop the load (a truncated last line).
    pub warnings: Vec<String>,
    /// Byte length of the valid prefix (where an append continues).
    pub valid_len: u64,
    /// Events of kinds this build does not know (kept in the file, not shown).
    pub unknown: usize,
    /// The damaged last line (line number, why), when one was skipped.
    pub damaged_tail: Option<(usize, String)>,
}

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Parses one line. Errors say what is wrong, never panic.
pub fn parse_line(line: &str) -> Result<Record, String> {
    // The bulky kinds as this build writes them, in one pass (`canonical`); the rest below.
    match super::canonical::record(line) {
        Some(r) => Ok(r),
        None => parse_generic(line),
    }
}

/// Parses one line through a JSON value: any form, any kind, and the error messages.
pub(crate) fn parse_generic(line: &str) -> Result<Record, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let obj = value
        .as_object()
        .ok_or_else(|| "not a JSON object".to_string())?;
    let v = obj
        .get("v")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| "missing format version `v`".to_string())?;
    if v > FORMAT_VERSION as u64 {
        return Err(format!(
            "format version {v} is newer than this build understands ({FORMAT_VERSION})"
        ));
    }
    let kind = obj
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("?")
        .to_string();
    serde_json::from_value::<Record>(value).map_err(|e| format!("bad `{kind}` event: {e}"))
}

/// Parses a whole session text. A bad last line (no newline after it, or unparsable) is skipped
/// with a warning; a bad line before the last is an error naming the line. A line written by a
/// newer format version is an error wherever it is (nothing of a newer file is dropped). Events
/// of unknown kinds are kept as `unknown` and counted.
pub fn parse_text(name: &str, text: &str) -> Result<Loaded, SessionError> {
    let mut walk = Walk::new(name);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let n = lines.len();
    for (i, raw) in lines.iter().enumerate() {
        walk.line(raw, raw.len(), i + 1 == n, record_of)?;
    }
    Ok(walk.finish_records())
}

/// `parse_line` as `Walk` takes it.
fn record_of(line: &str) -> Result<Walked<Record>, String> {
    parse_line(line).map(|r| Walked {
        seq: r.seq,
        unknown: matches!(r.event, SessionEvent::Unknown),
        item: r,
    })
}

fn newer_version(line: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let n = v.get("v")?.as_u64()?;
    (n > FORMAT_VERSION as u64).then_some(n)
}

/// A line read by `Walk`'s caller: what it keeps of it, its sequence number, and whether it is
/// of a kind this build does not know.
pub(crate) struct Walked<T> {
    pub item: T,
    pub seq: u64,
    pub unknown: bool,
}

/// Reads a session's lines in order with the checks of `parse_text`: what each line becomes is
/// the caller's (a record, or what `timeline` keeps of it); the warnings, the valid prefix and
/// the damaged tail are the walk's.
pub(crate) struct Walk<T> {
    name: String,
    out: Loaded,
    items: Vec<T>,
    lineno: usize,
    offset: u64,
    last_seq: u64,
}

impl<T> Walk<T> {
    pub fn new(name: &str) -> Walk<T> {
        Walk {
            name: name.to_string(),
            out: Loaded::default(),
            items: Vec::new(),
            lineno: 0,
            offset: 0,
            last_seq: 0,
        }
    }

    /// One line, `raw` with its end of line if it has one, `len` bytes long (as `valid_len`
    /// counts); `last`: the file's last line.
    pub fn line(
        &mut self,
        raw: &str,
        len: usize,
        last: bool,
        read: impl FnOnce(&str) -> Result<Walked<T>, String>,
    ) -> Result<(), SessionError> {
        self.lineno += 1;
        let (name, lineno, out) = (&self.name, self.lineno, &mut self.out);
        let complete = raw.ends_with('\n');
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            self.offset += len as u64;
            if complete {
                out.valid_len = self.offset;
            }
            return Ok(());
        }
        let parsed = read(line);
        // A newer format is refused wherever it is (parsing fails on it; only then is the
        // line looked at again, so the common path parses each line once).
        if parsed.is_err()
            && let Some(v) = newer_version(line)
        {
            return Err(SessionError::Newer {
                file: name.into(),
                line: lineno,
                version: v,
            });
        }
        match parsed {
            Ok(w) if complete => {
                if w.unknown {
                    out.unknown += 1;
                }
                // A repeated or skipped number (two writers of one file before sessions were
                // locked) is reported and the line kept in file order; numbering continues
                // from the highest.
                let last_seq = self.last_seq;
                if w.seq <= last_seq {
                    out.warnings.push(format!(
                        "{name}:{lineno}: sequence number {} repeats or goes back after {last_seq} (two writers appended to this session at once?); its events are kept in file order",
                        w.seq
                    ));
                } else if w.seq > last_seq + 1 {
                    out.warnings.push(format!(
                        "{name}:{lineno}: sequence number {} skips after {last_seq}; the events are kept",
                        w.seq
                    ));
                }
                self.last_seq = last_seq.max(w.seq);
                self.items.push(w.item);
                self.offset += len as u64;
                out.valid_len = self.offset;
            }
            Ok(_) => {
                let why = "it has no end of line (the write was cut short)".to_string();
                out.warnings
                    .push(format!("{name}:{lineno}: last line skipped: {why}"));
                out.damaged_tail = Some((lineno, why));
            }
            Err(e) if last => {
                let why = format!("it is truncated or corrupt ({e})");
                out.warnings
                    .push(format!("{name}:{lineno}: last line skipped: {why}"));
                out.damaged_tail = Some((lineno, why));
            }
            Err(message) => {
                return Err(SessionError::Line {
                    file: name.into(),
                    line: lineno,
                    message,
                });
            }
        }
        Ok(())
    }

    /// What was kept, and the load's warnings, valid prefix and damaged tail (in a `Loaded`
    /// without records).
    pub fn finish(mut self) -> (Loaded, Vec<T>) {
        if self.out.unknown > 0 {
            self.out.warnings.push(format!(
                "{}: {} events of unknown kinds (from a newer build?) are kept in the file and not shown",
                self.name, self.out.unknown
            ));
        }
        (self.out, self.items)
    }
}

impl Walk<Record> {
    fn finish_records(self) -> Loaded {
        let (mut loaded, records) = self.finish();
        loaded.records = records;
        loaded
    }
}

/// Reads a file's lines in order without holding the whole file: each line's text with its end
/// of line (invalid UTF-8 replaced, as `String::from_utf8_lossy` does for the whole file), its
/// byte offset and length in the file, and whether it is the file's last.
pub(crate) fn each_line(
    path: &Path,
    mut each: impl FnMut(&str, u64, usize, bool) -> Result<(), SessionError>,
) -> Result<(), SessionError> {
    use std::io::BufRead;
    let file = File::open(path).map_err(io(path))?;
    let mut r = std::io::BufReader::with_capacity(1 << 16, file);
    let mut buf = Vec::new();
    let mut offset = 0u64;
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf).map_err(io(path))?;
        if n == 0 {
            return Ok(());
        }
        let last = r.fill_buf().map_err(io(path))?.is_empty();
        // A line never splits a UTF-8 sequence ('\n' is a byte of its own), so line by line
        // gives the text of the whole file.
        match std::str::from_utf8(&buf) {
            Ok(text) => each(text, offset, n, last)?,
            Err(_) => each(&String::from_utf8_lossy(&buf), offset, n, last)?,
        }
        offset += n as u64;
    }
}

/// Reads a session file (line by line: the file is never held whole).
pub fn load(path: &Path) -> Result<Loaded, SessionError> {
    let mut walk = Walk::new(&path.display().to_string());
    each_line(path, |raw, _, _, last| {
        walk.line(raw, raw.len(), last, record_of)
    })?;
    Ok(walk.finish_records())
}

/// Replaces secrets (API keys, bearer tokens, authorization headers) by `[REDACTED]`.
/// Works on any text, including a serialized JSON line (it never touches quotes or
/// backslashes, so the JSON stays valid).
pub fn scrub(s: &str) -> String {
    const PREFIXES: &[&str] = &[
        "sk-ant-",
        "sk-proj-",
        "sk-",
        "sk_live_",
        "sk_test_",
        "rk_live_",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "hf_",
        "AKIA",
        "AIza",
        "glpat-",
    ];
    const HEADERS: &[&str] = &[
        "authorization",
        "x-api-key",
        "api-key",
        "api_key",
        "apikey",
        "x-goog-api-key",
        "bearer",
    ];
    let is_tok =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=');
    let chars: Vec<char> = s.chars().collect();
    let lower: Vec<char> = chars.iter().map(|c| c.to_ascii_lowercase()).collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let starts_with = |v: &[char], at: usize, p: &str| -> bool {
        let mut k = at;
        for pc in p.chars() {
            if k >= v.len() || v[k] != pc {
                return false;
            }
            k += 1;
        }
        true
    };
    while i < chars.len() {
        let boundary = i == 0 || !chars[i - 1].is_ascii_alphanumeric();
        if boundary {
            // Header names followed by a separator and a value.
            let mut matched = false;
            for h in HEADERS {
                if starts_with(&lower, i, h) {
                    let mut j = i + h.len();
                    // separator: spaces, ':', '=', quotes (escaped or not)
                    let sep_start = j;
                    while j < chars.len() && matches!(chars[j], ' ' | ':' | '=' | '"' | '\\' | '\'')
                    {
                        j += 1;
                    }
                    if j == sep_start && *h != "bearer" {
                        break;
                    }
                    if *h == "bearer" && j == sep_start {
                        break;
                    }
                    // optional scheme word ("Bearer ", "Basic ")
                    let mut k = j;
                    for scheme in ["bearer ", "basic ", "token "] {
                        if starts_with(&lower, k, scheme) {
                            k += scheme.len();
                            break;
                        }
                    }
                    let v0 = k;
                    while k < chars.len() && is_tok(chars[k]) {
                        k += 1;
                    }
                    if k - v0 >= 8 {
                        out.extend(&chars[i..v0]);
                        out.push_str("[REDACTED]");
                        i = k;
                        matched = true;
                    }
                    break;
                }
            }
            if matched {
                continue;
            }
            for p in PREFIXES {
                if starts_with(&chars, i, p) {
                    let mut k = i + p.len();
                    while k < chars.len() && is_tok(chars[k]) {
                        k += 1;
                    }
                    if k - i - p.len() >= 16 {
                        out.push_str("[REDACTED]");
                        i = k;
                        matched = true;
                    }
                    break;
                }
            }
            if matched {
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// An open session file, appended to one event at a time. It holds the session's lock
/// (`session::lock`) from its opening until it drops: one writer per file.
///
/// A new session of the TUI (`create_deferred`) and a continued session (`continue_file`)
/// hold a run's `run_start` and `device` lines until the run's first other event: a run in
/// which nothing happened leaves no file behind, and a continued file byte for byte as it was.
pub struct SessionWriter {
    /// None only for a deferred writer before its first action.
    lock: Option<SessionLock>,
    /// None until the first action of a deferred writer.
    file: Option<File>,
    path: PathBuf,
    /// A run's start and device lines not yet written (nothing else happened yet).
    pending: Vec<String>,
    /// Whether a run's start lines are held until its first other event.
    hold: bool,
}

impl SessionWriter {
    /// Creates a new session file (fails if it exists, or if another writer holds its lock).
    pub fn create(path: &Path) -> Result<SessionWriter, SessionError> {
        Self::create_locked(path, SessionLock::take(path)?)
    }

    /// `create` with the session's lock already taken (by a command, before its other work).
    pub fn create_locked(path: &Path, lock: SessionLock) -> Result<SessionWriter, SessionError> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(io(path))?;
        Ok(SessionWriter {
            lock: Some(lock),
            file: Some(file),
            path: path.to_path_buf(),
            pending: Vec::new(),
            hold: false,
        })
    }

    /// A new session file created at its first action: a run that only starts (and learns its
    /// GPU) and ends leaves no file behind.
    pub fn create_deferred(path: &Path) -> SessionWriter {
        SessionWriter {
            lock: None,
            file: None,
            path: path.to_path_buf(),
            pending: Vec::new(),
            hold: true,
        }
    }

    /// Whether the file exists yet.
    pub fn is_written(&self) -> bool {
        self.file.is_some()
    }

    /// Opens an existing session to continue it: the file must be recognisably a session of
    /// this tool (its first line a valid `run_start`) of a format this build writes; anything else
    /// is refused and left untouched. A damaged last line is moved to `FILE.damaged-<time>`
    /// before the append continues after the last good line. Returns the writer and what was
    /// read (its warnings say what was moved where). The run's start is written with its first
    /// other event: a run that does nothing appends nothing.
    /// Another writer holding the file's lock is refused first, naming it.
    pub fn continue_file(path: &Path) -> Result<(SessionWriter, Loaded), SessionError> {
        Self::continue_locked(path, SessionLock::take(path)?)
    }

    /// `continue_file` with the session's lock already taken.
    pub fn continue_locked(
        path: &Path,
        lock: SessionLock,
    ) -> Result<(SessionWriter, Loaded), SessionError> {
        let mut loaded = Self::check_continuable(path)?;
        let writer = SessionWriter::resume(path, &mut loaded, lock)?;
        Ok((writer, loaded))
    }

    /// The checks of `continue_file`, reading only: what it would continue, or why not.
    pub fn check_continuable(path: &Path) -> Result<Loaded, SessionError> {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(io(path))?;
        if meta.is_dir() {
            return Err(SessionError::Other {
                file: shown,
                message: "is a folder, not a session file".into(),
            });
        }
        let bytes = std::fs::read(path).map_err(io(path))?;
        let not_session = |why: &str| SessionError::NotASession {
            file: shown.clone(),
            why: why.into(),
        };
        let first_end = bytes.iter().position(|b| *b == b'\n');
        let first = match first_end {
            Some(n) => &bytes[..n],
            None => &bytes[..],
        };
        let Ok(first) = std::str::from_utf8(first) else {
            return Err(not_session("its first line is not text"));
        };
        if first.trim().is_empty() {
            return Err(not_session("it is empty or starts with an empty line"));
        }
        if let Some(v) = newer_version(first) {
            return Err(SessionError::NewerToContinue {
                file: shown,
                version: v,
            });
        }
        match parse_line(first) {
            Ok(Record {
                event: SessionEvent::RunStart { .. },
                ..
            }) if first_end.is_some() => {}
            Ok(r) => {
                return Err(not_session(&format!(
                    "its first line is a `{}` event, not `run_start`",
                    r.event.kind()
                )));
            }
            Err(e) => return Err(not_session(&format!("line 1: {e}"))),
        }
        let text = String::from_utf8_lossy(&bytes);
        parse_text(&shown, &text)
    }

    /// Continues a loaded session: a skipped (damaged) tail is copied to `FILE.damaged-<time>`,
    /// then cut off, and the append continues after the last good line.
    fn resume(
        path: &Path,
        loaded: &mut Loaded,
        lock: SessionLock,
    ) -> Result<SessionWriter, SessionError> {
        let shown = path.display().to_string();
        let len = std::fs::metadata(path).map_err(io(path))?.len();
        if len > loaded.valid_len {
            let bytes = std::fs::read(path).map_err(io(path))?;
            let tail = &bytes[loaded.valid_len as usize..];
            if !tail.iter().all(|b| b.is_ascii_whitespace()) {
                let mut keep = PathBuf::from(format!("{shown}.damaged-{}", now() as u64));
                let mut n = 1;
                while keep.exists() {
                    keep = PathBuf::from(format!("{shown}.damaged-{}-{n}", now() as u64));
                    n += 1;
                }
                std::fs::write(&keep, tail).map_err(|e| SessionError::Other {
                    file: shown.clone(),
                    message: format!(
                        "its damaged last line could not be kept in {} ({e}); nothing was changed",
                        keep.display()
                    ),
                })?;
                let (line, why) = loaded.damaged_tail.clone().unwrap_or((0, "damaged".into()));
                loaded.warnings.push(format!(
                    "{shown}:{line}: the damaged last line ({why}; {} bytes) was moved to {}; the session continues after line {}",
                    tail.len(),
                    keep.display(),
                    line.saturating_sub(1)
                ));
            }
            let file = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io(path))?;
            file.set_len(loaded.valid_len).map_err(io(path))?;
        }
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io(path))?;
        Ok(SessionWriter {
            lock: Some(lock),
            file: Some(file),
            path: path.to_path_buf(),
            pending: Vec::new(),
            hold: true,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Puts what was written on the disk (at the end of a run, whatever ended it).
    pub fn sync(&mut self) -> Result<(), SessionError> {
        match self.file.as_mut() {
            Some(f) => f.sync_data().map_err(io(&self.path)),
            None => Ok(()),
        }
    }

    /// Writes one record (numbered by the session's `Recorder`): one write of one line;
    /// decisions are fsync'd. A deferred or continuing writer holds a run's start and device
    /// lines until the first other event, then writes them with it.
    pub fn write(&mut self, rec: &Record) -> Result<(), SessionError> {
        let mut line = serde_json::to_string(rec).map_err(|e| SessionError::Other {
            file: self.path.display().to_string(),
            message: format!("cannot encode the event: {e}"),
        })?;
        line = scrub(&line);
        line.push('\n');
        if self.hold
            && matches!(
                rec.event,
                SessionEvent::RunStart { .. } | SessionEvent::Device { .. }
            )
        {
            self.pending.push(line);
            return Ok(());
        }
        self.hold = false;
        if self.file.is_none() {
            if let Some(d) = self.path.parent() {
                std::fs::create_dir_all(d).map_err(io(d))?;
            }
            if self.lock.is_none() {
                self.lock = Some(SessionLock::take(&self.path)?);
            }
            let f = OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(&self.path)
                .map_err(io(&self.path))?;
            self.file = Some(f);
        }
        if !self.pending.is_empty() {
            line = std::mem::take(&mut self.pending).concat() + &line;
        }
        let Some(file) = self.file.as_mut() else {
            return Err(SessionError::Other {
                file: self.path.display().to_string(),
                message: "not open".into(),
            });
        };
        file.write_all(line.as_bytes()).map_err(io(&self.path))?;
        if rec.event.durable() {
            file.sync_data().map_err(io(&self.path))?;
        }
        Ok(())
    }
}

/// A fresh session file name in a directory: `session-<unix seconds>[-n].jsonl`.
pub fn new_session_path(dir: &Path) -> PathBuf {
    let secs = now() as u64;
    let mut p = dir.join(format!("session-{secs}.jsonl"));
    let mut n = 1;
    while p.exists() {
        p = dir.join(format!("session-{secs}-{n}.jsonl"));
        n += 1;
    }
    p
}
