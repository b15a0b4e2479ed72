//! The agent's configuration: the `[agent]` settings (`crate::config`) and the environment. API keys come from
//! the environment or from a config file readable by its owner only (mode 0600); they are never
//! logged, printed or written to sessions (`Secret` has no Debug or Display of its value).

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

pub use crate::config::{AgentSettings, BackendKind};

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

/// A backend that the settings and the environment do not say enough about: what is missing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EndpointError {
    #[error("no model for the OpenAI-compatible backend: set ATREX_MODEL or `model` in [agent]")]
    OpenaiModel,
    #[error("no model for the Anthropic backend: set ATREX_MODEL or `anthropic_model` in [agent]")]
    AnthropicModel,
    #[error(
        "no Anthropic API key: set ANTHROPIC_API_KEY or `anthropic_api_key` in [agent] (file mode 0600)"
    )]
    AnthropicKey,
}

crate::error::text_at_the_edge!(EndpointError);

/// Resolves settings + environment (the environment wins) for a backend (None: the configured
/// one, else the tuner).
pub fn resolve(s: &AgentSettings, want: Option<BackendKind>) -> Result<AgentConfig, EndpointError> {
    let backend = want.or(s.backend).unwrap_or(BackendKind::Tuner);
    let endpoint = match backend {
        BackendKind::Tuner => None,
        BackendKind::Openai => {
            let base_url = env("OPENAI_BASE_URL")
                .or(s.base_url.clone())
                .unwrap_or_else(|| "https://api.openai.com/v1".into());
            let model = env("ATREX_MODEL")
                .or(s.model.clone())
                .ok_or(EndpointError::OpenaiModel)?;
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
                .ok_or(EndpointError::AnthropicModel)?;
            let key = env("ANTHROPIC_API_KEY")
                .or(s.anthropic_api_key.clone())
                .ok_or(EndpointError::AnthropicKey)?;
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
            tools: super::tools::ToolSettings {
                // The tuner has no tools; the LLM backends use them unless turned off.
                enabled: s.tools.unwrap_or(true) && backend != BackendKind::Tuner,
                max_calls: s.max_tool_calls.unwrap_or(d.tools.max_calls),
                max_gpu_s: s.max_gpu_seconds.unwrap_or(d.tools.max_gpu_s),
                max_tokens: s.max_tokens_per_iteration.unwrap_or(d.tools.max_tokens),
            },
        },
        max_reply_tokens: s.max_reply_tokens.unwrap_or(8192),
        timeout: std::time::Duration::from_secs_f64(s.timeout_secs.unwrap_or(120.0).max(0.05)),
        retries: s.retries.unwrap_or(4),
        knowledge_docs: s.knowledge_docs.unwrap_or(6),
    })
}
