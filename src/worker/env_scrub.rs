//! What a worker inherits of this program's environment: everything but secrets.
//!
//! A worker compiles and runs candidate kernels, which are hostile (see `includes`); its compile
//! logs and its output reach the session and language models. The agent's API keys, and any other
//! credential the user's shell holds, have no business there, so every process that compiles or
//! runs a candidate (the worker, and the profiler's `profile-target` under `ncu`) starts with
//! them removed.
//!
//! Invariants:
//! - A variable is a secret when its name (upper-cased), split at `_`, holds one of the words
//!   `KEY`, `KEYS`, `APIKEY`, `TOKEN`, `TOKENS`, `CREDENTIAL`, `CREDENTIALS`, or contains
//!   `SECRET`, `PASSWORD`, `PASSWD` or `APIKEY` anywhere: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
//!   `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD` are; `ATREX_MODEL` and the agent's base
//!   URLs are not.
//! - What the worker and the launch templates need is kept: `PATH`, `LD_LIBRARY_PATH`, `HOME`,
//!   `USER`, `LOGNAME`, `SHELL`, `TMPDIR`, `LANG` and `SSH_AUTH_SOCK` are never secrets, and the
//!   `CUDA_*` and `NVIDIA_*` settings match no word of the rule (a `NVIDIA_API_KEY` does).
//!   `SSH_AUTH_SOCK` stays because templates start remote workers through `ssh`, which
//!   authenticates through the agent socket; the socket lends signatures, never the keys, and
//!   `ssh` forwards it to the remote side only when asked to (`-A`).
//! - Both the inherited variables and those set on the command itself are removed.

use std::ffi::{OsStr, OsString};

/// Names that are kept whatever they look like.
const KEEP: &[&str] = &[
    "PATH",
    "LD_LIBRARY_PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "LANG",
    "SSH_AUTH_SOCK",
];

/// Words of a name that mark a secret.
const WORDS: &[&str] = &[
    "KEY",
    "KEYS",
    "APIKEY",
    "TOKEN",
    "TOKENS",
    "CREDENTIAL",
    "CREDENTIALS",
];

/// Parts of a name that mark a secret wherever they stand.
const PARTS: &[&str] = &["SECRET", "PASSWORD", "PASSWD", "APIKEY"];

/// Whether an environment variable of this name may carry a secret.
pub fn is_secret(name: &OsStr) -> bool {
    let name = name.to_string_lossy().to_ascii_uppercase();
    if KEEP.contains(&name.as_str()) {
        return false;
    }
    name.split('_').any(|w| WORDS.contains(&w)) || PARTS.iter().any(|p| name.contains(p))
}

/// The names to remove from a child: this process's secrets and those set on the command.
fn secrets(cmd: &std::process::Command) -> Vec<OsString> {
    let mut names: Vec<OsString> = std::env::vars_os()
        .map(|(k, _)| k)
        .chain(cmd.get_envs().map(|(k, _)| k.to_owned()))
        .filter(|k| is_secret(k))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Removes every secret from the environment the command will start with.
pub fn scrub(cmd: &mut std::process::Command) {
    for k in secrets(cmd) {
        cmd.env_remove(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for s in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "ATREX_API_KEY",
            "openai_api_key",
            "HF_TOKEN",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "PGPASSWORD",
            "DB_PASSWD",
            "CLIENT_SECRET",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "NVIDIA_API_KEY",
            "MYAPIKEY",
            "SIGNING_KEY",
            "KEY",
        ] {
            assert!(is_secret(OsStr::new(s)), "{s}");
        }
        for s in [
            "PATH",
            "LD_LIBRARY_PATH",
            "HOME",
            "USER",
            "SSH_AUTH_SOCK",
            "CUDA_VISIBLE_DEVICES",
            "CUDA_HOME",
            "CUDA_CACHE_PATH",
            "NVIDIA_VISIBLE_DEVICES",
            "ATREX_MODEL",
            "ATREX_TUI_CONFIG_DIR",
            "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL",
            "KEYBOARD",
            "MONKEY",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(!is_secret(OsStr::new(s)), "{s}");
        }
    }

    /// The environment a command's child sees, as `NAME=value` lines.
    fn child_env(cmd: &mut std::process::Command) -> String {
        let out = cmd.output().expect("env runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn a_spawned_child_carries_no_key() {
        let mut cmd = std::process::Command::new("env");
        cmd.env("ATREX_FAKE_API_KEY", "sk-fake-0123")
            .env("FAKE_SERVICE_TOKEN", "tok-fake-4567")
            .env("ATREX_FAKE_PLAIN", "kept");
        // Before the scrub the child sees them: the test can fail.
        let before = child_env(&mut cmd);
        assert!(before.contains("sk-fake-0123") && before.contains("tok-fake-4567"));
        scrub(&mut cmd);
        let after = child_env(&mut cmd);
        assert!(!after.contains("sk-fake-0123"), "{after}");
        assert!(!after.contains("tok-fake-4567"), "{after}");
        assert!(after.contains("ATREX_FAKE_PLAIN=kept"), "{after}");
        assert!(after.lines().any(|l| l.starts_with("PATH=")), "{after}");
        // Every secret this process holds is on the list to remove.
        let names = secrets(&cmd);
        for (k, _) in std::env::vars_os() {
            assert_eq!(is_secret(&k), names.contains(&k), "{k:?}");
        }
    }
}
