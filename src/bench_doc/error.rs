//! Why a text is not a bench document, and why documents do not merge. Each message names what
//! to look at: the shape, the field, the file and both values.

use std::path::PathBuf;

/// A text or JSON value that is not a bench document (`bench OP --json`).
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    #[error("not a JSON document ({0})")]
    Json(#[source] serde_json::Error),
    #[error("not a bench document (`bench OP --json`)")]
    NotADocument,
    #[error("not a bench document (`bench OP --json`): {0}")]
    Fields(#[source] serde_json::Error),
    #[error("a shape result without its shape id")]
    NoShapeId,
    #[error("shape {0} is no shape id")]
    BadShapeId(String),
    #[error("shape {id}: not a shape result ({source})")]
    ShapeResult {
        id: u32,
        #[source]
        source: serde_json::Error,
    },
}

/// Bench documents that `bench --merge` refuses to join.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("--merge needs at least two bench documents")]
    TooFew,
    #[error(
        "{}: no source_sha256 (written by an earlier atrex-tui): nothing shows that the runs measured the same source",
        .0.display()
    )]
    NoSourceSha(PathBuf),
    #[error(
        "{}: {field} is {theirs}, {} has {first}: only runs of one kernel on one GPU model and mode merge",
        .file.display(), .first_file.display()
    )]
    Differ {
        file: PathBuf,
        field: &'static str,
        theirs: String,
        first_file: PathBuf,
        first: String,
    },
    #[error("the documents are of `{of}`, not `{asked}`")]
    OtherOperator { of: String, asked: String },
    #[error("`{0}` is not in the suite")]
    NotInSuite(String),
    #[error("{}: {op} has no shape {id}", .file.display())]
    NoSuchShape { file: PathBuf, op: String, id: u32 },
    #[error("{op} shape {id}: its T_SOL cannot be computed")]
    NoSol { op: String, id: u32 },
    #[error(
        "{}: shape {id} was scored against T_SOL {theirs} ms, the suite gives {suite} ms: the problem or hardware files changed since that run",
        .file.display()
    )]
    OtherSol {
        file: PathBuf,
        id: u32,
        theirs: f64,
        suite: f64,
    },
    #[error("{}: shape {id} has a result but is not in shapes_asked", .file.display())]
    NotAsked { file: PathBuf, id: u32 },
    #[error(
        "shape {id} is in both {} and {}: the parts must cover disjoint shapes",
        .first.display(), .second.display()
    )]
    AskedTwice {
        id: u32,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("{}: no wall_s (not a document of `bench --json`)", .0.display())]
    NoWallS(PathBuf),
}

crate::error::text_at_the_edge!(DocError, MergeError);
