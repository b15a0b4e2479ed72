//! The compile child's limits: wall-clock time (enforced by the parent, which kills the child)
//! and address space (`RLIMIT_AS`, set by the child on itself before NVRTC compiles).
//!
//! The worker reads them from its environment (`ATREX_COMPILE_TIMEOUT_SECS`,
//! `ATREX_COMPILE_MEMORY_GIB`), else the defaults. The settings file's `compile_timeout_secs`
//! and `compile_memory_gib` reach the local workers (and those a launch template starts with the
//! environment passed on, as `srun` does) through that environment: `configure` records them at
//! start and the client adds them to every worker it spawns, unless the variable is set already
//! (the environment wins). A worker started over `ssh` takes them from its own environment.

use std::sync::OnceLock;
use std::time::Duration;

/// The time limit's variable.
pub const TIMEOUT_VAR: &str = "ATREX_COMPILE_TIMEOUT_SECS";
/// The memory limit's variable (GiB, fractions allowed).
pub const MEMORY_VAR: &str = "ATREX_COMPILE_MEMORY_GIB";
/// Default time limit of one compile.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
/// Default address-space limit of the compile child.
pub const DEFAULT_MEMORY_GIB: f64 = 8.0;

/// The limits of one compile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub time: Duration,
    pub memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time: Duration::from_secs_f64(DEFAULT_TIMEOUT_SECS),
            memory_bytes: gib(DEFAULT_MEMORY_GIB),
        }
    }
}

fn gib(g: f64) -> u64 {
    (g * (1u64 << 30) as f64) as u64
}

/// A limit's variable that is not a positive number: the variable and its text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{var}={text:?}: not a positive number")]
pub struct LimitError {
    pub var: &'static str,
    pub text: String,
}

/// A positive finite number, or why not (names the variable).
fn positive(var: &'static str, text: &str) -> Result<f64, LimitError> {
    match text.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(LimitError {
            var,
            text: text.to_string(),
        }),
    }
}

impl Limits {
    /// The limits the environment sets (defaults where a variable is unset). A variable that is
    /// not a positive number is an error naming it.
    pub fn from_env() -> Result<Limits, LimitError> {
        Limits::from_vars(|v| std::env::var(v).ok())
    }

    /// As `from_env`, with the variables looked up by `get`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Limits, LimitError> {
        let mut l = Limits::default();
        if let Some(t) = get(TIMEOUT_VAR) {
            l.time = Duration::from_secs_f64(positive(TIMEOUT_VAR, &t)?);
        }
        if let Some(m) = get(MEMORY_VAR) {
            l.memory_bytes = gib(positive(MEMORY_VAR, &m)?);
        }
        Ok(l)
    }

    /// "60 s", "2.5 s".
    pub fn time_text(&self) -> String {
        format!("{} s", trim_number(self.time.as_secs_f64()))
    }

    /// "8 GiB", "0.5 GiB".
    pub fn memory_text(&self) -> String {
        format!(
            "{} GiB",
            trim_number(self.memory_bytes as f64 / (1u64 << 30) as f64)
        )
    }
}

fn trim_number(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The settings' limits, recorded once at start for the workers this process spawns.
static CONFIGURED: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();

/// Records the settings' limits (seconds, GiB) for the workers this process will start.
pub fn configure(timeout_secs: Option<f64>, memory_gib: Option<f64>) {
    let mut v = Vec::new();
    if let Some(t) = timeout_secs {
        v.push((TIMEOUT_VAR, t.to_string()));
    }
    if let Some(m) = memory_gib {
        v.push((MEMORY_VAR, m.to_string()));
    }
    let _ = CONFIGURED.set(v);
}

/// The variables to give a worker: the settings' limits that the environment does not set.
pub fn worker_env() -> Vec<(&'static str, String)> {
    CONFIGURED
        .get()
        .map(|v| {
            v.iter()
                .filter(|(k, _)| std::env::var_os(k).is_none())
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_come_from_the_variables_and_name_a_bad_one() {
        let l = Limits::from_vars(|_| None).unwrap();
        assert_eq!(l, Limits::default());
        assert_eq!(
            (l.time_text(), l.memory_text()),
            ("60 s".into(), "8 GiB".into())
        );
        let l =
            Limits::from_vars(|v| Some(if v == TIMEOUT_VAR { "5" } else { "0.5" }.into())).unwrap();
        assert_eq!(l.time, Duration::from_secs(5));
        assert_eq!(l.memory_bytes, 1 << 29);
        assert_eq!(l.memory_text(), "0.5 GiB");
        let e = Limits::from_vars(|v| (v == MEMORY_VAR).then(|| "lots".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains(MEMORY_VAR) && e.contains("lots"), "{e}");
        let e = Limits::from_vars(|v| (v == TIMEOUT_VAR).then(|| "-1".into())).unwrap_err();
        assert_eq!(e.var, TIMEOUT_VAR, "{e}");
    }
}
