//! Agent settings: the `[agent]` table of config.toml and the environment. API keys come from
//! the environment or from a config file readable by its owner only (mode 0600); they are never
//! logged, printed or written to sessions (`Secret` has no Debug or Display of its value).

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A secret string: its Debug and Display never show the value.
#[derive(Clone, Default, PartialEq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}

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
}

#[derive(Deserialize, Default)]
struct FileDoc {
    #[serde(default)]
    agent: Option<AgentSettings>,
}

/// Parses the `[agent]` table of a settings text; errors name the file and line.
pub fn parse_settings(file: &str, text: &str) -> Result<AgentSettings, String> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| format!(":{}", crate::suite::line_of(text, s.start)))
            .unwrap_or_default();
        format!("{file}{line}: [agent]: {}", e.message())
    })?;
    Ok(doc.agent.unwrap_or_default())
}

/// Reads the `[agent]` table of a config file; refuses a file holding a key whose mode lets
/// others read it.
pub fn read_settings(path: &Path) -> Result<AgentSettings, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(AgentSettings::default()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let s = parse_settings(&path.display().to_string(), &text)?;
    if s.api_key.is_some() || s.anthropic_api_key.is_some() {
        check_private(path)?;
    }
    Ok(s)
}

/// Refuses a file that group or others can read or write.
pub fn check_private(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .permissions()
            .mode()
            & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "{} holds an API key but its mode is {mode:04o}; run `chmod 600 {}` (keys are only read from files private to their owner)",
                path.display(),
                path.display()
            ));
        }
    }
    Ok(())
}

/// The default config file: `<config dir>/config.toml`.
pub fn default_config_file() -> Option<PathBuf> {
    crate::tui::theme::config_dir().map(|d| d.join("config.toml"))
}

/// A resolved backend endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub kind: BackendKind,
    pub base_url: String,
    pub model: String,
    pub key: Secret,
}

/// Everything the agent needs to start.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub backend: BackendKind,
    pub endpoint: Option<Endpoint>,
    pub budget: super::Budget,
    pub max_reply_tokens: u32,
    pub timeout: std::time::Duration,
    pub retries: u32,
    pub knowledge_docs: usize,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.trim().is_empty())
}

/// Resolves settings + environment (the environment wins) for a backend (None: the configured
/// one, else the tuner).
pub fn resolve(s: &AgentSettings, want: Option<BackendKind>) -> Result<AgentConfig, String> {
    let backend = want.or(s.backend).unwrap_or(BackendKind::Tuner);
    let endpoint = match backend {
        BackendKind::Tuner => None,
        BackendKind::Openai => {
            let base_url = env("OPENAI_BASE_URL")
                .or(s.base_url.clone())
                .unwrap_or_else(|| "https://api.openai.com/v1".into());
            let model = env("ATREX_MODEL").or(s.model.clone()).ok_or(
                "no model for the OpenAI-compatible backend: set ATREX_MODEL or `model` in [agent]",
            )?;
            let key = env("OPENAI_API_KEY")
                .or(s.api_key.clone())
                .unwrap_or_default();
            // Local servers (vLLM, llama.cpp, Ollama) need no key.
            Some(Endpoint {
                kind: backend,
                base_url,
                model,
                key: Secret::new(key),
            })
        }
        BackendKind::Anthropic => {
            let base_url = env("ANTHROPIC_BASE_URL")
                .or(s.anthropic_base_url.clone())
                .unwrap_or_else(|| "https://api.anthropic.com".into());
            let model = env("ATREX_MODEL")
                .or(s.anthropic_model.clone())
                .or(s.model.clone())
                .ok_or("no model for the Anthropic backend: set ATREX_MODEL or `anthropic_model` in [agent]")?;
            let key = env("ANTHROPIC_API_KEY")
                .or(s.anthropic_api_key.clone())
                .ok_or("no Anthropic API key: set ANTHROPIC_API_KEY or `anthropic_api_key` in [agent] (file mode 0600)")?;
            Some(Endpoint {
                kind: backend,
                base_url,
                model,
                key: Secret::new(key),
            })
        }
    };
    let d = super::Budget::default();
    Ok(AgentConfig {
        backend,
        endpoint,
        budget: super::Budget {
            max_iters: s.max_iters.unwrap_or(d.max_iters),
            max_tokens: s.max_tokens,
            target_s: s.target_s,
            dropout_k: s.dropout_k.unwrap_or(d.dropout_k),
        },
        max_reply_tokens: s.max_reply_tokens.unwrap_or(8192),
        timeout: std::time::Duration::from_secs_f64(s.timeout_secs.unwrap_or(120.0).max(0.05)),
        retries: s.retries.unwrap_or(4),
        knowledge_docs: s.knowledge_docs.unwrap_or(6),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_in_a_world_readable_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("atrex-agent-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("config.toml");
        std::fs::write(&f, "theme = \"dark\"\n[agent]\nbackend = \"openai\"\nmodel = \"m\"\napi_key = \"sk-abcdefghijklmnopqrstuvwxyz\"\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = read_settings(&f).unwrap_err();
            assert!(e.contains("0644") && e.contains("chmod 600"), "{e}");
            assert!(!e.contains("sk-abc"), "the key never shows in errors");
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let s = read_settings(&f).unwrap();
        assert_eq!(s.backend, Some(BackendKind::Openai));
        let dbg = format!("{:?}", Secret::new(s.api_key.clone().unwrap()));
        assert_eq!(dbg, "[REDACTED]");
        // A file without keys needs no particular mode; unknown keys are errors.
        std::fs::write(&f, "[agent]\nmax_iterz = 3\n").unwrap();
        assert!(read_settings(&f).unwrap_err().contains("max_iterz"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
