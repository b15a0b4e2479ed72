//! Reading and appending session files: JSON lines, one write per event.

use super::event::{FORMAT_VERSION, Record, SessionEvent};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A session file that was read: its records and what was skipped.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub records: Vec<Record>,
    /// Problems that did not stop the load (a truncated last line).
    pub warnings: Vec<String>,
    /// Byte length of the valid prefix (where an append continues).
    pub valid_len: u64,
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
/// with a warning; a bad line before the last is an error naming the line.
pub fn parse_text(name: &str, text: &str) -> Result<Loaded, String> {
    let mut out = Loaded::default();
    let mut offset = 0usize;
    let mut last_seq = 0u64;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let n = lines.len();
    for (i, raw) in lines.iter().enumerate() {
        let lineno = i + 1;
        let complete = raw.ends_with('\n');
        let line = raw.trim_end_matches(['\n', '\r']);
        let is_last = i + 1 == n;
        if line.trim().is_empty() {
            offset += raw.len();
            if complete {
                out.valid_len = offset as u64;
            }
            continue;
        }
        match parse_line(line) {
            Ok(r) if complete => {
                if r.seq <= last_seq {
                    return Err(format!(
                        "{name}:{lineno}: sequence number {} does not follow {last_seq}",
                        r.seq
                    ));
                }
                last_seq = r.seq;
                out.records.push(r);
                offset += raw.len();
                out.valid_len = offset as u64;
            }
            Ok(_) => {
                out.warnings.push(format!(
                    "{name}:{lineno}: last line has no end of line (the write was cut short); skipped"
                ));
            }
            Err(e) if is_last => {
                out.warnings.push(format!(
                    "{name}:{lineno}: last line is truncated or corrupt ({e}); skipped"
                ));
            }
            Err(e) => return Err(format!("{name}:{lineno}: {e}")),
        }
    }
    Ok(out)
}

/// Reads a session file.
pub fn load(path: &Path) -> Result<Loaded, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    parse_text(&path.display().to_string(), &text)
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

/// An open session file, appended to one event at a time.
pub struct SessionWriter {
    file: File,
    path: PathBuf,
    seq: u64,
}

impl SessionWriter {
    /// Creates a new session file (fails if it exists).
    pub fn create(path: &Path) -> Result<SessionWriter, String> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(SessionWriter {
            file,
            path: path.to_path_buf(),
            seq: 0,
        })
    }

    /// Continues a loaded session: cuts off a skipped (truncated) tail, then appends after it.
    pub fn resume(path: &Path, loaded: &Loaded) -> Result<SessionWriter, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        if len > loaded.valid_len {
            file.set_len(loaded.valid_len)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        drop(file);
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(SessionWriter {
            file,
            path: path.to_path_buf(),
            seq: loaded.records.last().map(|r| r.seq).unwrap_or(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event: one write of one line; decisions are fsync'd. Returns the record.
    pub fn append(&mut self, event: SessionEvent) -> Result<Record, String> {
        let rec = Record {
            v: FORMAT_VERSION,
            seq: self.seq + 1,
            t: now(),
            event,
        };
        let mut line = serde_json::to_string(&rec).map_err(|e| e.to_string())?;
        line = scrub(&line);
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        if rec.event.durable() {
            self.file
                .sync_data()
                .map_err(|e| format!("{}: {e}", self.path.display()))?;
        }
        self.seq = rec.seq;
        Ok(rec)
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
