//! The budgets of one iteration with tools: tool calls, GPU seconds and tokens (the `[agent]`
//! settings `tools`, `max_tool_calls`, `max_gpu_seconds`, `max_tokens_per_iteration`), what has
//! been spent, and what a tool result tells the model is left.

use super::args::Call;
use crate::session::ToolSpent;
use serde::{Deserialize, Serialize};

/// Whether iterations use tools, and their budgets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ToolSettings {
    /// Tools are offered to backends that support them (the LLM backends); off: one request,
    /// one reply per iteration.
    pub enabled: bool,
    /// Tool calls per iteration before `propose`; once spent the model has one more turn, in
    /// which only `propose` is accepted.
    pub max_calls: u32,
    /// GPU seconds per iteration (compile, run and profile); once spent those tools are refused.
    pub max_gpu_s: f64,
    /// Tokens (in + out, over the iteration's requests); once spent the iteration ends.
    pub max_tokens: u64,
}

pub const DEFAULT_MAX_CALLS: u32 = 12;
pub const DEFAULT_MAX_GPU_S: f64 = 120.0;
pub const DEFAULT_MAX_TOKENS: u64 = 250_000;

impl Default for ToolSettings {
    /// Off (the settings turn tools on for the LLM backends), with the default budgets.
    fn default() -> Self {
        ToolSettings {
            enabled: false,
            max_calls: DEFAULT_MAX_CALLS,
            max_gpu_s: DEFAULT_MAX_GPU_S,
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }
}

impl ToolSettings {
    /// On, with the default budgets.
    pub fn on() -> ToolSettings {
        ToolSettings {
            enabled: true,
            ..Default::default()
        }
    }

    /// Why a call may not run now (None: it may): the tool-call budget, or the GPU budget for
    /// the tools that use the GPU. `propose` is never refused.
    pub fn refusal(&self, spent: &ToolSpent, call: &Call) -> Option<String> {
        if matches!(call, Call::Propose { .. }) {
            return None;
        }
        if spent.calls >= self.max_calls {
            return Some(format!(
                "refused: the tool-call budget ({}) is spent; call propose now with your best revision",
                self.max_calls
            ));
        }
        if call.uses_gpu() && spent.gpu_s >= self.max_gpu_s {
            return Some(format!(
                "refused: the GPU budget ({:.0} s) is spent; lookup, read and propose still work",
                self.max_gpu_s
            ));
        }
        None
    }

    pub fn tokens_spent(&self, spent: &ToolSpent) -> bool {
        spent.tokens >= self.max_tokens
    }

    /// The line each tool result ends with.
    pub fn left_line(&self, spent: &ToolSpent) -> String {
        format!(
            "[budget left: {} of {} tool calls · {:.0} of {:.0} GPU s · {} of {} tokens]",
            self.max_calls.saturating_sub(spent.calls),
            self.max_calls,
            (self.max_gpu_s - spent.gpu_s).max(0.0),
            self.max_gpu_s,
            self.max_tokens.saturating_sub(spent.tokens),
            self.max_tokens
        )
    }

    /// The budgets in words, for the system prompt.
    pub fn describe(&self) -> String {
        format!(
            "{} tool calls, {:.0} GPU seconds and {} tokens",
            self.max_calls, self.max_gpu_s, self.max_tokens
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::args::Code;

    #[test]
    fn calls_then_gpu_are_refused_and_propose_never() {
        let l = ToolSettings {
            enabled: true,
            max_calls: 2,
            max_gpu_s: 1.0,
            max_tokens: 100,
        };
        let run = Call::Compile {
            code: Code::Incumbent,
        };
        let lookup = Call::Lookup { query: "x".into() };
        let propose = Call::Propose {
            hypothesis: "h".into(),
            category: "fusion",
            code: Code::Source("s".into()),
        };
        let mut s = ToolSpent::default();
        assert_eq!(l.refusal(&s, &run), None);
        s.gpu_s = 1.5;
        assert!(l.refusal(&s, &run).unwrap().contains("GPU budget (1 s)"));
        assert_eq!(l.refusal(&s, &lookup), None);
        s.calls = 2;
        assert!(
            l.refusal(&s, &lookup)
                .unwrap()
                .contains("tool-call budget (2)")
        );
        assert_eq!(l.refusal(&s, &propose), None);
        s.tokens = 100;
        assert!(l.tokens_spent(&s));
        assert_eq!(
            l.left_line(&s),
            "[budget left: 0 of 2 tool calls · 0 of 1 GPU s · 0 of 100 tokens]"
        );
    }
}
