//! What the model is told in an iteration with tools: how to work, the budgets, the nudge
//! after a reply without a tool call (or an empty one), the last turn, and the engineer's notes.

use super::budget::ToolSettings;

/// Added to the system prompt.
pub fn system(limits: &ToolSettings) -> String {
    format!(
        "## Tools\nIn this iteration you work like a kernel engineer at the bench, with tools that \
         run in the harness on the GPU: `compile` (diagnostics, registers, spills), `run` \
         (correctness and S on the shapes you choose, quick or full), `profile` (Nsight Compute \
         figures and findings on one shape), `lookup` and `read` (the knowledge base: \
         techniques, anti-patterns, hardware notes and reference cards, templates). Try your \
         idea before you propose it: compile it, run it on a few representative shapes, profile \
         it when you need to know what limits it. Then call `propose` with the revision (the \
         whole file or a diff against the incumbent), its hypothesis and its category: that ends \
         the iteration, and the harness measures the revision on every shape. Propose ONE \
         optimization idea, the best version you found. This replaces the reply format above: \
         end with the `propose` tool, not with a code block.\n\
         Budget of this iteration: {}. Every tool result ends with what is left; once the tool \
         calls are spent you have one more turn, for `propose` only.",
        limits.describe()
    )
}

/// The last line of the first message.
pub const START: &str = "Use the tools as you need, then call `propose`.";

/// After a reply that called no tool.
pub const NUDGE: &str = "Continue with the tools, and end the iteration by calling `propose` \
                         with your revision (hypothesis, category, and source or diff).";

/// After an empty reply (no text, no tool call).
pub const EMPTY: &str = "Your reply was empty: it had no text and no tool call. Call a tool, or \
                         end the iteration by calling `propose` with your revision (hypothesis, \
                         category, and source or diff).";

/// When the tool calls are spent.
pub const LAST_TURN: &str = "The tool-call budget is spent: this is your last turn. Call \
                             `propose` now with your best revision; any other call is refused.";

/// The engineer's notes, as they reach the model with the next tool result.
pub fn notes(notes: &[String]) -> String {
    notes
        .iter()
        .map(|n| format!("Note from the engineer (follow it): {n}"))
        .collect::<Vec<_>>()
        .join("\n")
}
