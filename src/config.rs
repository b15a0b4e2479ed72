//! The user's settings: `<config dir>/atrex-tui/config.toml`, read once per run by
//! `Settings::load` (the TUI, `agent`, `doctor`). Every key is optional; errors name the file
//! and line. API keys in the `[agent]` table are only read from a file private to its owner
//! (mode 0600); `agent::config::resolve` combines these settings with the environment.

use crate::error::ConfigError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The user's settings (`<config dir>/atrex-tui/config.toml`). Every field is optional.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Colour theme: "dark", "light", or a theme file's name.
    pub theme: String,
    /// Syntax theme of the diff pane (a two-face theme name); default: the colour theme's.
    pub syntax_theme: Option<String>,
    /// Seconds of worker silence before a job is killed.
    pub watchdog_secs: Option<f64>,
    /// Seconds one compile may take before its compiler process is killed (default 60).
    pub compile_timeout_secs: Option<f64>,
    /// The compiler process's address-space limit in GiB (default 8).
    pub compile_memory_gib: Option<f64>,
    /// The only GPU to use (default: every GPU, or the `[[workers]]`).
    pub device: Option<u32>,
    /// Hardware profile for T_SOL when the GPU is unknown or absent.
    pub hardware: String,
    /// Where new sessions go (default: the workspace's sessions/).
    pub sessions_dir: Option<PathBuf>,
    /// Record a session for every interactive run.
    pub record_sessions: bool,
    /// Editor for `E` (default: $VISUAL, $EDITOR, vi).
    pub editor: Option<String>,
    /// Force 256-colour output even when the terminal announces truecolor.
    pub force_256_colours: bool,
    /// The `[agent]` table.
    pub agent: AgentSettings,
    /// The `[[workers]]` tables: workers started by launch templates (docs/cluster.md); none:
    /// one local worker per GPU.
    pub workers: Vec<crate::pool::config::WorkerEntry>,
}

/// The file's top level as written: everything but `[agent]`, which is parsed on its own so
/// that its errors say `[agent]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawSettings {
    theme: String,
    syntax_theme: Option<String>,
    watchdog_secs: Option<f64>,
    compile_timeout_secs: Option<f64>,
    compile_memory_gib: Option<f64>,
    device: Option<u32>,
    hardware: String,
    sessions_dir: Option<PathBuf>,
    record_sessions: bool,
    editor: Option<String>,
    force_256_colours: bool,
    /// Parsed on its own by `parse_agent`.
    #[serde(rename = "agent")]
    _agent: Option<toml::Value>,
    /// Parsed on its own by `pool::config::parse_settings`.
    #[serde(rename = "workers")]
    _workers: Option<toml::Value>,
}

impl Default for RawSettings {
    fn default() -> Self {
        let d = Settings::default();
        RawSettings {
            theme: d.theme,
            syntax_theme: d.syntax_theme,
            watchdog_secs: d.watchdog_secs,
            compile_timeout_secs: d.compile_timeout_secs,
            compile_memory_gib: d.compile_memory_gib,
            device: d.device,
            hardware: d.hardware,
            sessions_dir: d.sessions_dir,
            record_sessions: d.record_sessions,
            editor: d.editor,
            force_256_colours: d.force_256_colours,
            _agent: None,
            _workers: None,
        }
    }
}

/// The LLM backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Tuner,
    Openai,
    Anthropic,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Tuner => "tuner",
            BackendKind::Openai => "openai",
            BackendKind::Anthropic => "anthropic",
        }
    }
}

/// The `[agent]` table of config.toml. Every key is optional.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSettings {
    pub backend: Option<BackendKind>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// Only accepted when the file's mode is 0600 (or stricter).
    pub api_key: Option<String>,
    pub anthropic_base_url: Option<String>,
    pub anthropic_model: Option<String>,
    pub anthropic_api_key: Option<String>,
    pub max_iters: Option<usize>,
    pub max_tokens: Option<u64>,
    pub max_reply_tokens: Option<u32>,
    pub target_s: Option<f64>,
    pub dropout_k: Option<usize>,
    pub timeout_secs: Option<f64>,
    pub retries: Option<u32>,
    pub knowledge_docs: Option<usize>,
    /// Tools inside an iteration (docs/agent.md): default on for the LLM backends.
    pub tools: Option<bool>,
    /// Per iteration with tools: tool calls (at least 1).
    #[serde(deserialize_with = "at_least_one_u32")]
    pub max_tool_calls: Option<u32>,
    /// Per iteration with tools: GPU seconds of compile, run and profile (positive).
    #[serde(deserialize_with = "positive_seconds")]
    pub max_gpu_seconds: Option<f64>,
    /// Per iteration with tools: tokens in + out (at least 1).
    #[serde(deserialize_with = "at_least_one_u64")]
    pub max_tokens_per_iteration: Option<u64>,
}

/// A count of at least 1 (its error names the key's line).
fn at_least_one_u32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let n = u32::deserialize(d)?;
    if n == 0 {
        return Err(serde::de::Error::custom("must be at least 1"));
    }
    Ok(Some(n))
}

fn at_least_one_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = u64::deserialize(d)?;
    if n == 0 {
        return Err(serde::de::Error::custom("must be at least 1"));
    }
    Ok(Some(n))
}

/// A positive, finite number of seconds (an integer is accepted).
fn positive_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let x = f64::deserialize(d)?;
    if !(x > 0.0 && x.is_finite()) {
        return Err(serde::de::Error::custom(
            "must be a positive number of seconds",
        ));
    }
    Ok(Some(x))
}

impl AgentSettings {
    pub fn holds_keys(&self) -> bool {
        self.api_key.is_some() || self.anthropic_api_key.is_some()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            theme: "dark".into(),
            syntax_theme: None,
            watchdog_secs: None,
            compile_timeout_secs: None,
            compile_memory_gib: None,
            device: None,
            hardware: "H200".into(),
            sessions_dir: None,
            record_sessions: true,
            editor: None,
            force_256_colours: false,
            agent: AgentSettings::default(),
            workers: Vec::new(),
        }
    }
}

/// The configuration directory (`ATREX_TUI_CONFIG_DIR`, else the user's config directory's
/// atrex-tui/): config.toml and themes/.
pub fn config_dir() -> Option<PathBuf> {
    std::env::var_os("ATREX_TUI_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| dirs::config_dir().map(|d| d.join("atrex-tui")))
}

fn parse_error(file: &str, text: &str, table: &'static str, e: &toml::de::Error) -> ConfigError {
    ConfigError::Parse {
        file: file.to_string(),
        line: e.span().map(|s| crate::suite::line_of(text, s.start)),
        table,
        message: e.message().to_string(),
    }
}

impl Settings {
    /// Parses a settings text (no file-mode check: see `load`); the first problem is the error.
    pub fn parse(file: &str, text: &str) -> Result<Settings, ConfigError> {
        let (s, mut problems) = Settings::parse_all(file, text);
        match problems.is_empty() {
            true => Ok(s),
            false => Err(problems.remove(0)),
        }
    }

    /// Every problem of a settings text, with the settings as far as they could be read (a
    /// part with a problem keeps its defaults).
    pub fn parse_all(file: &str, text: &str) -> (Settings, Vec<ConfigError>) {
        let mut problems = Vec::new();
        let raw: RawSettings = toml::from_str(text).unwrap_or_else(|e| {
            problems.push(parse_error(file, text, "", &e));
            RawSettings::default()
        });
        if let Some(w) = raw.watchdog_secs
            && !(w > 0.0 && w.is_finite())
        {
            problems.push(ConfigError::Invalid {
                file: file.into(),
                message: "watchdog_secs must be a positive number of seconds".into(),
            });
        }
        for (key, v, unit) in [
            ("compile_timeout_secs", raw.compile_timeout_secs, "seconds"),
            ("compile_memory_gib", raw.compile_memory_gib, "GiB"),
        ] {
            if let Some(v) = v
                && !(v > 0.0 && v.is_finite())
            {
                problems.push(ConfigError::Invalid {
                    file: file.into(),
                    message: format!("{key} must be a positive number of {unit}"),
                });
            }
        }
        let agent = parse_agent(file, text).unwrap_or_else(|e| {
            problems.push(e);
            AgentSettings::default()
        });
        let workers = crate::pool::config::parse_settings(file, text).unwrap_or_else(|e| {
            problems.push(e);
            Vec::new()
        });
        let s = Settings {
            theme: raw.theme,
            syntax_theme: raw.syntax_theme,
            watchdog_secs: raw.watchdog_secs,
            compile_timeout_secs: raw.compile_timeout_secs,
            compile_memory_gib: raw.compile_memory_gib,
            device: raw.device,
            hardware: raw.hardware,
            sessions_dir: raw.sessions_dir,
            record_sessions: raw.record_sessions,
            editor: raw.editor,
            force_256_colours: raw.force_256_colours,
            agent,
            workers,
        };
        (s, problems)
    }

    /// What `doctor` shows: the settings of an existing file as far as they could be read, and
    /// every problem (syntax, keys, the file mode of a file holding keys).
    pub fn diagnose(path: &Path) -> (Settings, Vec<ConfigError>) {
        match std::fs::read_to_string(path) {
            Err(source) => (
                Settings::default(),
                vec![ConfigError::Read {
                    file: path.to_path_buf(),
                    source,
                }],
            ),
            Ok(text) => {
                let (s, mut problems) = Settings::parse_all(&path.display().to_string(), &text);
                if s.agent.holds_keys()
                    && let Err(e) = check_private(path)
                {
                    problems.push(e);
                }
                (s, problems)
            }
        }
    }

    /// Reads the settings file when there is one (defaults when it does not exist), once: the
    /// `[agent]` table with its keys' file-mode rule included.
    pub fn load(path: Option<&Path>) -> Result<Settings, ConfigError> {
        let Some(p) = path else {
            return Ok(Settings::default());
        };
        let text = match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    file: p.to_path_buf(),
                    source,
                });
            }
        };
        let s = Settings::parse(&p.display().to_string(), &text)?;
        if s.agent.holds_keys() {
            check_private(p)?;
        }
        Ok(s)
    }

    /// `<config dir>/config.toml`.
    pub fn default_path() -> Option<PathBuf> {
        config_dir().map(|d| d.join("config.toml"))
    }
}

/// The settings file a command reads (`--config`, else the default).
pub fn settings_path(config: Option<&Path>) -> Option<PathBuf> {
    config
        .map(|p| p.to_path_buf())
        .or_else(Settings::default_path)
}

/// Parses the `[agent]` table of a settings text; errors name the file, the line and `[agent]`.
fn parse_agent(file: &str, text: &str) -> Result<AgentSettings, ConfigError> {
    #[derive(Deserialize, Default)]
    struct AgentOnly {
        #[serde(default)]
        agent: Option<AgentSettings>,
    }
    let doc: AgentOnly =
        toml::from_str(text).map_err(|e| parse_error(file, text, "[agent]: ", &e))?;
    Ok(doc.agent.unwrap_or_default())
}

/// Refuses a file that group or others can read or write.
pub fn check_private(path: &Path) -> Result<(), ConfigError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|source| ConfigError::Read {
                file: path.to_path_buf(),
                source,
            })?
            .permissions()
            .mode()
            & 0o777;
        if mode & 0o077 != 0 {
            return Err(ConfigError::KeyFileNotPrivate {
                file: path.to_path_buf(),
                mode,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compile limits are read, and one that is not a positive number is named.
    #[test]
    fn compile_limits_are_read_and_checked() {
        let s = Settings::parse(
            "config.toml",
            "compile_timeout_secs = 120\ncompile_memory_gib = 4.5\n",
        )
        .unwrap();
        assert_eq!(
            (s.compile_timeout_secs, s.compile_memory_gib),
            (Some(120.0), Some(4.5))
        );
        let e = Settings::parse("config.toml", "compile_memory_gib = 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("compile_memory_gib must be a positive number of GiB"),
            "{e}"
        );
        let e = Settings::parse("config.toml", "compile_timeout_secs = -5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("compile_timeout_secs"), "{e}");
    }

    #[test]
    fn bad_settings_name_file_and_line() {
        let e = Settings::parse("config.toml", "theme = \"dark\"\nwatchdog_secs = \"ten\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("config.toml:2:"), "{e}");
        let e = Settings::parse("config.toml", "\n\nthme = \"dark\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("config.toml:3:") && e.contains("thme"), "{e}");
        let e = Settings::parse("config.toml", "watchdog_secs = -1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("watchdog_secs"), "{e}");
        let e = Settings::parse("config.toml", "theme = \"dark\"\n[agent]\nmodle = \"m\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("config.toml:3: [agent]: ") && e.contains("modle"),
            "{e}"
        );
        let s = Settings::parse(
            "config.toml",
            "theme = \"light\"\nsyntax_theme = \"GitHub\"\n[agent]\nbackend = \"openai\"\n",
        )
        .unwrap();
        assert_eq!(s.theme, "light");
        assert_eq!(s.agent.backend, Some(BackendKind::Openai));
    }

    #[test]
    fn tool_budgets_are_read_and_checked_with_their_line() {
        let s = Settings::parse(
            "config.toml",
            "[agent]\nbackend = \"anthropic\"\ntools = false\nmax_tool_calls = 5\nmax_gpu_seconds = 30\nmax_tokens_per_iteration = 90000\n",
        )
        .unwrap();
        assert_eq!(s.agent.tools, Some(false));
        assert_eq!(s.agent.max_tool_calls, Some(5));
        assert_eq!(s.agent.max_gpu_seconds, Some(30.0));
        assert_eq!(s.agent.max_tokens_per_iteration, Some(90_000));
        for (text, line, want) in [
            ("[agent]\nmax_tool_calls = 0\n", 2, "must be at least 1"),
            (
                "[agent]\nmodel = \"m\"\n\nmax_gpu_seconds = -2.5\n",
                4,
                "positive number of seconds",
            ),
            ("[agent]\nmax_gpu_seconds = \"lots\"\n", 2, "invalid type"),
            (
                "[agent]\nmax_tokens_per_iteration = 0\n",
                2,
                "must be at least 1",
            ),
            ("[agent]\ntools = \"yes\"\n", 2, "invalid type"),
            ("[agent]\nmax_tool_calls = 2.5\n", 2, "invalid type"),
        ] {
            let e = Settings::parse("config.toml", text)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("config.toml:{line}: [agent]: ")) && e.contains(want),
                "{text:?}: {e}"
            );
        }
        // Tools are on for the LLM backends unless turned off, never for the tuner.
        let resolve = |text: &str, b| {
            let s = Settings::parse("config.toml", text).unwrap();
            crate::agent::config::resolve(&s.agent, Some(b))
                .unwrap()
                .budget
                .tools
        };
        let on = resolve(
            "[agent]\nmodel = \"m\"\nmax_tool_calls = 7\n",
            BackendKind::Openai,
        );
        assert!(on.enabled);
        assert_eq!(on.max_calls, 7);
        assert!(
            !resolve(
                "[agent]\nmodel = \"m\"\ntools = false\n",
                BackendKind::Openai
            )
            .enabled
        );
        assert!(!resolve("", BackendKind::Tuner).enabled);
    }

    #[test]
    fn a_key_in_a_world_readable_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("atrex-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("config.toml");
        std::fs::write(&f, "theme = \"dark\"\n[agent]\nbackend = \"openai\"\nmodel = \"m\"\napi_key = \"sk-abcdefghijklmnopqrstuvwxyz\"\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = Settings::load(Some(&f)).unwrap_err().to_string();
            assert!(e.contains("0644") && e.contains("chmod 600"), "{e}");
            assert!(!e.contains("sk-abc"), "the key never shows in errors");
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let s = Settings::load(Some(&f)).unwrap();
        assert_eq!(s.agent.backend, Some(BackendKind::Openai));
        // A file without keys needs no particular mode; unknown keys are errors.
        std::fs::write(&f, "[agent]\nmax_iterz = 3\n").unwrap();
        let e = Settings::load(Some(&f)).unwrap_err().to_string();
        assert!(e.contains("max_iterz"), "{e}");
        assert!(Settings::load(Some(&dir.join("absent.toml"))).unwrap() == Settings::default());
        std::fs::remove_dir_all(&dir).ok();
    }
}
