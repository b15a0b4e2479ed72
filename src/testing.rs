//! Helpers shared by the crate's unit tests: the built-in suite, a fresh scratch folder and a
//! workspace on it.

use crate::suite::{Suite, SuiteSource, Workspace};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The built-in suite, loaded once per test binary.
pub fn suite() -> &'static Suite {
    static S: OnceLock<Suite> = OnceLock::new();
    S.get_or_init(|| Suite::load(SuiteSource::Embedded).unwrap())
}

/// A new, empty folder under the system's temporary folder, unique to this process and call.
pub fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "atrex-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A workspace in `dir`.
pub fn ws(dir: &Path) -> Workspace {
    Workspace {
        dir: dir.to_path_buf(),
        reason: "test",
    }
}
