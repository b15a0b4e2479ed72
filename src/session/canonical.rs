//! Reading the lines this build writes — `{"v":V,"seq":N,"t":T,"kind":"K",…}` — in one typed
//! pass for the bulky kinds (shape results and revisions). The generic path
//! (`store::parse_line`) reads a line into a JSON value and then into its event, which copies
//! every field twice; for a session of 100,000 events that is most of its loading time.
//!
//! Invariant: this path only ever succeeds with the record the generic path would read. A line
//! of another form or kind, of a newer format version, or one this path cannot read, is left to
//! the generic path, so every error message stays the generic path's. A revision is read as
//! its `SessionEvent` directly; a shape result (the bulk of a session, and read apart from its
//! envelope by the lazy timeline) through `ShapeLine`, which mirrors its variant field for field
//! (a test compares both paths on every line of the recorded sessions).

use super::event::{FORMAT_VERSION, Record, SessionEvent};
use crate::contract::protocol::ShapeResult;
use serde::Deserialize;

/// The envelope of a line in the order this build writes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Envelope<'a> {
    pub v: u32,
    pub seq: u64,
    pub t: f64,
    pub kind: &'a str,
}

/// A `shape_result` line's fields (`SessionEvent::ShapeResult`).
#[derive(Deserialize)]
pub struct ShapeLine {
    pub op: String,
    pub rev: u32,
    pub mid: u64,
    pub result: ShapeResult,
}

/// A JSON unsigned integer at the start of `s` (no sign, no leading zero) and what follows it.
fn integer(s: &str) -> Option<(u64, &str)> {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 || n > 19 || (n > 1 && s.starts_with('0')) {
        return None;
    }
    Some((s[..n].parse().ok()?, &s[n..]))
}

/// The envelope of a line written in this build's order, of a format version this build reads;
/// None for anything else.
pub fn envelope(line: &str) -> Option<Envelope<'_>> {
    let rest = line.strip_prefix("{\"v\":")?;
    let (v, rest) = integer(rest)?;
    if v > FORMAT_VERSION as u64 {
        return None;
    }
    let (seq, rest) = integer(rest.strip_prefix(",\"seq\":")?)?;
    let rest = rest.strip_prefix(",\"t\":")?;
    let end = rest.find(',')?;
    // serde_json's own number grammar and conversion: the same f64 as the generic path.
    let t: f64 = serde_json::from_str(&rest[..end]).ok()?;
    let rest = rest[end..].strip_prefix(",\"kind\":\"")?;
    let kind = &rest[..rest.find('"')?];
    if kind.contains('\\') {
        return None;
    }
    Some(Envelope {
        v: v as u32,
        seq,
        t,
        kind,
    })
}

/// A `shape_result` line written by this build: its envelope and fields.
pub fn shape_line(line: &str) -> Option<(Envelope<'_>, ShapeLine)> {
    let env = envelope(line)?;
    if env.kind != "shape_result" {
        return None;
    }
    Some((env, serde_json::from_str(line).ok()?))
}

/// The record of a line of a bulky kind written by this build; None: read it the generic way.
pub fn record(line: &str) -> Option<Record> {
    let env = envelope(line)?;
    let event = match env.kind {
        "shape_result" => {
            let l: ShapeLine = serde_json::from_str(line).ok()?;
            SessionEvent::ShapeResult {
                op: l.op,
                rev: l.rev,
                mid: l.mid,
                result: l.result,
            }
        }
        // The event itself, straight from the text: the variant's own fields (the envelope's
        // are not among them, and are ignored), the source copied once.
        "revision" => match serde_json::from_str(line).ok()? {
            e @ SessionEvent::Revision { .. } => e,
            _ => return None,
        },
        _ => return None,
    };
    Some(Record {
        v: env.v,
        seq: env.seq,
        t: env.t,
        event,
    })
}
