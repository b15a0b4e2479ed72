//! The peers file (docs/peers-json.md): S_op of the kernels a user would otherwise call — a
//! library's, timed on the same GPU, the same shapes and the same T_SOL as the suite's own — per
//! operator, with whether each passes the suite's check.
//!
//! Where it is read: the workspace's `docs/measurements/peers-KEY.json` for the hardware profile
//! KEY when there is one, else the file built into the binary (`docs/measurements/peers-H200.json`,
//! as the shipped standing is); a workspace file that cannot be used is a warning naming it, and
//! the built-in figures stand in.
//!
//! Invariants: a file that reads is whole — every peer names a source the file describes, every
//! S lies in 0..=1, a range holds its S_op and its per-shape figures, and a peer that fails the
//! check says why; a newer format version is refused, never half read. What depends on the suite
//! (an operator or shape it does not have, a shape count that is no longer the suite's) is not
//! an error of the file but a judgement made when the figures are compared (`judge`).

use crate::suite::Suite;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// The built-in peers file's text (the H200's).
pub const TEXT: &str = include_str!("../../docs/measurements/peers-H200.json");

/// How the built-in file is named in messages.
pub const NAME: &str = "docs/measurements/peers-H200.json (built-in)";

/// The hardware profile of the built-in file.
const BUILT_IN_HARDWARE: &str = "H200";

/// A peers file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeersFile {
    /// Format version (`FORMAT_VERSION`).
    pub version: u32,
    /// The suite whose shapes and T_SOL the figures are against (suite.toml's `name`).
    pub suite: String,
    /// The hardware profile key of T_SOL, e.g. `H200`.
    pub hardware: String,
    /// The GPU the peers were timed on, as the driver names it.
    pub gpu: String,
    /// When they were measured, YYYY-MM-DD.
    pub date: String,
    /// How they were measured.
    pub method: String,
    /// The libraries the figures come from, by a key the peers name.
    pub sources: BTreeMap<String, Source>,
    /// Per operator, the peers measured.
    pub operators: BTreeMap<String, OpPeers>,
}

/// A library the figures come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub library: String,
    pub version: String,
    /// What it ran on (e.g. `torch 2.11 + cu130`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Source {
    /// `vLLM 0.33.0 (torch 2.11 + cu130)`.
    pub fn label(&self) -> String {
        match &self.runtime {
            Some(r) => format!("{} {} ({r})", self.library, self.version),
            None => format!("{} {}", self.library, self.version),
        }
    }
}

/// The peers of one operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpPeers {
    /// How many of the suite's shapes they were measured on (all of them, as the suite had).
    pub shapes: usize,
    pub peers: Vec<Peer>,
}

/// One peer's figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// What was timed, e.g. `vLLM Triton fused_moe`.
    pub name: String,
    /// The key of its source in `sources`.
    pub source: String,
    /// S_op as the suite computes it, from its timings (for a peer that fails the check: as if
    /// every shape had passed).
    pub s_op: f64,
    /// Whether its outputs pass the suite's check (the strict level).
    pub passes: bool,
    /// Why it fails the check (required when `passes` is false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// The smallest and largest S over the shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_range: Option<[f64; 2]>,
    /// S per shape id, where recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_shape: BTreeMap<u32, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Why a peers file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PeersError {
    #[error("{}: cannot be read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a peers file: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{}: format version {found}, newer than this atrex-tui reads ({FORMAT_VERSION}): update atrex-tui",
        path.display()
    )]
    Newer { path: PathBuf, found: u32 },
    #[error("{}: {what}", path.display())]
    Invalid { path: PathBuf, what: String },
}

/// Only the version, read first so that a newer file is refused as such.
#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

fn is_day(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

fn is_s(x: f64) -> bool {
    x.is_finite() && (0.0..=1.0).contains(&x)
}

impl PeersFile {
    /// Reads the text of a peers file; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<PeersFile, PeersError> {
        let parse = |source| PeersError::Parse {
            path: path.to_path_buf(),
            source,
        };
        let v: VersionOnly = serde_json::from_str(text).map_err(parse)?;
        if v.version > FORMAT_VERSION {
            return Err(PeersError::Newer {
                path: path.to_path_buf(),
                found: v.version,
            });
        }
        let f: PeersFile = serde_json::from_str(text).map_err(parse)?;
        match f.problems().into_iter().next() {
            Some(what) => Err(PeersError::Invalid {
                path: path.to_path_buf(),
                what,
            }),
            None => Ok(f),
        }
    }

    /// Reads a peers file from disk.
    pub fn read(path: &Path) -> Result<PeersFile, PeersError> {
        let text = std::fs::read_to_string(path).map_err(|source| PeersError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PeersFile::parse(path, &text)
    }

    /// What is wrong with the file in itself, each naming where.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.version == 0 {
            out.push("version 0 (the first format is 1)".into());
        }
        if !is_day(&self.date) {
            out.push(format!("date `{}` is not YYYY-MM-DD", self.date));
        }
        for (name, v) in [
            ("suite", &self.suite),
            ("hardware", &self.hardware),
            ("gpu", &self.gpu),
            ("method", &self.method),
        ] {
            if v.trim().is_empty() {
                out.push(format!("`{name}` is empty"));
            }
        }
        for (key, s) in &self.sources {
            if s.library.trim().is_empty() || s.version.trim().is_empty() {
                out.push(format!("source `{key}`: library and version are required"));
            }
        }
        for (op, o) in &self.operators {
            if o.shapes == 0 && !o.peers.is_empty() {
                out.push(format!("{op}: `shapes` is 0"));
            }
            for p in &o.peers {
                let at = format!("{op}, peer `{}`", p.name);
                if !self.sources.contains_key(&p.source) {
                    out.push(format!(
                        "{at}: source `{}` is not among `sources` ({})",
                        p.source,
                        self.sources.keys().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
                if !is_s(p.s_op) {
                    out.push(format!("{at}: s_op {} is not an S (0 to 1)", p.s_op));
                }
                if !p.passes && p.check.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    out.push(format!(
                        "{at}: fails the check (`passes` false) without saying why (`check`)"
                    ));
                }
                for (id, s) in &p.per_shape {
                    if !is_s(*s) {
                        out.push(format!("{at}: shape {id}'s S {s} is not an S (0 to 1)"));
                    }
                }
                if let Some([lo, hi]) = p.s_range {
                    if !(is_s(lo) && is_s(hi) && lo <= hi) {
                        out.push(format!("{at}: s_range [{lo}, {hi}] is not a range of S"));
                    } else if !(lo..=hi).contains(&p.s_op) {
                        out.push(format!(
                            "{at}: s_op {} outside s_range [{lo}, {hi}]",
                            p.s_op
                        ));
                    } else if let Some((id, s)) =
                        p.per_shape.iter().find(|(_, s)| !(lo..=hi).contains(*s))
                    {
                        out.push(format!(
                            "{at}: shape {id}'s S {s} outside s_range [{lo}, {hi}]"
                        ));
                    }
                }
            }
        }
        out
    }
}

/// A peers file as read, and where from.
#[derive(Debug, Clone, PartialEq)]
pub struct Peers {
    pub file: PeersFile,
    /// The path it was read from, or `NAME` for the built-in file.
    pub origin: String,
}

impl Peers {
    /// The built-in file (a test checks that it reads).
    pub fn built_in() -> Result<PeersFile, PeersError> {
        PeersFile::parse(Path::new(NAME), TEXT)
    }

    /// The source a peer names (the file guarantees there is one).
    pub fn source(&self, p: &Peer) -> Option<&Source> {
        self.file.sources.get(&p.source)
    }

    /// What of the file does not fit `suite`: operators and shapes it does not have (the
    /// figures of an operator whose shape count differs are `stale`, not a warning).
    pub fn judge(&self, suite: &Suite) -> Vec<String> {
        let mut out = Vec::new();
        for (op, o) in &self.file.operators {
            let Some(p) = suite.problem(op) else {
                out.push(format!(
                    "{}: `{op}` is not an operator of the suite (its peers are not shown)",
                    self.origin
                ));
                continue;
            };
            for peer in &o.peers {
                if let Some(id) = peer.per_shape.keys().find(|id| p.shape(**id).is_none()) {
                    out.push(format!(
                        "{}: {op}, peer `{}`: shape {id} is not in the suite",
                        self.origin, peer.name
                    ));
                }
            }
        }
        out
    }

    /// Why the figures of `op` do not compare with the suite's today, if they do not.
    pub fn stale(&self, suite: &Suite, op: &str) -> Option<String> {
        let o = self.file.operators.get(op)?;
        let p = suite.problem(op)?;
        (o.shapes != p.shapes.len()).then(|| {
            format!(
                "measured on {} shapes; the suite has {}",
                o.shapes,
                p.shapes.len()
            )
        })
    }
}

/// The workspace's own peers file for the hardware profile `hardware`.
pub fn workspace_file(ws: &Path, hardware: &str) -> PathBuf {
    ws.join("docs/measurements")
        .join(format!("peers-{hardware}.json"))
}

/// The peers for `hardware` on `suite`: the workspace's file when it has one that can be used,
/// else the built-in file when it is of this suite and profile; with warnings, each naming its
/// file.
pub fn load(ws: &Path, suite: &Suite, hardware: &str) -> (Option<Peers>, Vec<String>) {
    let mut warnings = Vec::new();
    let path = workspace_file(ws, hardware);
    if path.exists() {
        match PeersFile::read(&path) {
            Ok(f) if f.suite != suite.name => warnings.push(format!(
                "{}: peers of the suite `{}`, not `{}` (not shown)",
                path.display(),
                f.suite,
                suite.name
            )),
            Ok(f) if f.hardware != hardware => warnings.push(format!(
                "{}: peers on the profile `{}`, not `{hardware}` (not shown)",
                path.display(),
                f.hardware
            )),
            Ok(file) => {
                let p = Peers {
                    file,
                    origin: path.display().to_string(),
                };
                warnings.extend(p.judge(suite));
                return (Some(p), warnings);
            }
            Err(e) => warnings.push(e.to_string()),
        }
    }
    if hardware != BUILT_IN_HARDWARE {
        return (None, warnings);
    }
    match Peers::built_in() {
        Ok(file) if file.suite == suite.name => {
            if !warnings.is_empty() {
                warnings.push(format!("the peers shown are those of {NAME}"));
            }
            let p = Peers {
                file,
                origin: NAME.to_string(),
            };
            warnings.extend(p.judge(suite));
            (Some(p), warnings)
        }
        Ok(_) => (None, warnings),
        Err(e) => {
            warnings.push(e.to_string());
            (None, warnings)
        }
    }
}

#[cfg(test)]
#[path = "peers_tests.rs"]
mod tests;
