//! One iteration with tools: request, the model's tool calls carried out in order, their
//! results (with what is left of the budgets and any steering note) sent back, until a
//! `propose` is accepted or a budget ends the iteration without a revision.
//!
//! - A call with bad arguments, a refused call and a tool that fails are answered with an
//!   error result; the conversation goes on.
//! - The tool-call budget: once spent, the model has one more turn, in which only `propose`
//!   is accepted; then the iteration ends.
//! - The GPU budget: once spent, compile, run and profile are refused.
//! - The token budget: once a reply brings the iteration's tokens to it, only a `propose` in
//!   that reply is still carried out; then the iteration ends.
//! - A reply without a tool call gets a nudge (twice at most); a reply in the single-reply
//!   format (hypothesis, category, code block) counts as a `propose`.
//! - An empty reply (no tool call, no text but white space) is a reply without a tool call:
//!   its tokens count, it uses a nudge (one that says the reply was empty), and the iteration
//!   that ends on one says so. The requests that follow stay valid in both protocols: `wire`
//!   gives the empty turn a placeholder text.
//! - Every result reaches the conversation through `carry_out`, which cuts it to its bound
//!   (`bound::result`) and the record's summary to one line; a call refused for its size goes
//!   back to the model with its arguments replaced by a note (`bound::echoed`).
//! - The engineer's stop ends the iteration before the next call or request.

use super::args::{self, Call, Code};
use super::wire::{ToolResult, Turn};
use super::{Executed, Host, ToolRecord, ToolSettings, bound, prompt, schema};
use crate::agent::context::Context;
use crate::agent::driver::{Proposal, ProposeError};
use crate::agent::llm::{Delta, LlmClient, LlmError};
use crate::agent::reply::{self, Change};
use crate::session::ToolSpent;
use std::time::Instant;

/// A call refused before it runs.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("bad arguments: {0}")]
    Arguments(args::ArgError),
    #[error("refused: the token budget of the iteration ({0}) is spent")]
    TokensSpent(u64),
    /// A reply in the single-reply format, in bytes.
    #[error(
        "refused: the reply is {0} bytes, more than the limit of {max} for a proposal",
        max = bound::MAX_ARGS
    )]
    ReplyTooLong(usize),
}

/// Replies without a tool call answered with a nudge before the iteration ends.
pub const MAX_NUDGES: usize = 2;

const STOPPED: &str = "stopped by the engineer before propose";

struct Iteration<'a, H: Host> {
    host: &'a mut H,
    limits: ToolSettings,
    shapes: Vec<u32>,
    spent: ToolSpent,
    tokens: (u64, u64),
    request_id: Option<String>,
    /// Calls numbered so far (refused and bad ones included).
    numbered: u32,
}

/// Runs the iteration's conversation: the proposal, or why there is none.
pub async fn iterate<H: Host>(
    client: &LlmClient,
    ctx: &Context,
    host: &mut H,
    limits: &ToolSettings,
) -> Result<Proposal, ProposeError> {
    let system = format!("{}\n\n{}", ctx.system, prompt::system(limits));
    let defs = schema::definitions();
    let mut it = Iteration {
        shapes: host.shapes(),
        host,
        limits: *limits,
        spent: ToolSpent::default(),
        tokens: (0, 0),
        request_id: None,
        numbered: 0,
    };
    let mut turns = vec![Turn::User(format!("{}\n{}", ctx.user, prompt::START))];
    let mut nudges = 0;
    let mut empty_replies = 0;
    let mut last_turn = false;
    loop {
        if turns.len() > 1 && it.host.stop_requested() {
            return Err(it.no_proposal(STOPPED.into()));
        }
        let c = {
            let host = &mut *it.host;
            let mut on_delta = |d: Delta<'_>| host.live(d);
            client
                .complete_tools(&system, &turns, &defs, &mut on_delta)
                .await
        };
        let c = match c {
            Ok(c) => c,
            Err(LlmError::ToolsRefused(m)) if turns.len() == 1 => {
                return Err(ProposeError::ToolsRefused(m));
            }
            Err(e) => return Err(ProposeError::Fatal(e.to_string())),
        };
        it.tokens.0 += c.tokens_in;
        it.tokens.1 += c.tokens_out;
        it.spent.tokens = it.tokens.0 + it.tokens.1;
        if c.request_id.is_some() {
            it.request_id = c.request_id.clone();
        }
        let tokens_spent = it.limits.tokens_spent(&it.spent);
        if c.tool_calls.is_empty() {
            let empty = c.text.trim().is_empty();
            if empty {
                empty_replies += 1;
            }
            // A reply in the single-reply format is a proposal too.
            let mut error = None;
            if c.text.len() > bound::MAX_ARGS {
                let why = Refused::ReplyTooLong(c.text.len());
                error = Some(it.carry_out(Err(why), "reply", "").await.1.text);
            } else if let Ok(r) = reply::parse(&c.text) {
                let code = match r.change {
                    Change::Full(s) => Code::Source(s),
                    Change::Patch(d) => Code::Diff(d),
                };
                let call = Call::Propose {
                    hypothesis: r.hypothesis,
                    category: r.category,
                    code,
                };
                let done = it.carry_out(Ok(call), "reply", "").await;
                if let Some(p) = done.0 {
                    return Ok(p);
                }
                error = Some(done.1.text);
            }
            if tokens_spent {
                return Err(it.no_proposal(format!(
                    "the token budget of the iteration ({}) is spent before propose",
                    it.limits.max_tokens
                )));
            }
            if last_turn || nudges >= MAX_NUDGES {
                return Err(it.no_proposal(if empty {
                    format!(
                        "the model's last reply was empty (no text and no tool call; {empty_replies} empty replies in this iteration)"
                    )
                } else {
                    "the model ended its turn without calling propose".into()
                }));
            }
            nudges += 1;
            let mut text = match error {
                Some(e) => format!("Your proposal could not be used: {e}\n{}", prompt::NUDGE),
                None if empty => prompt::EMPTY.to_string(),
                None => prompt::NUDGE.to_string(),
            };
            it.append_news(&mut text);
            turns.push(Turn::Assistant {
                text: c.text,
                calls: vec![],
            });
            turns.push(Turn::User(text));
            continue;
        }
        turns.push(Turn::Assistant {
            text: c.text.clone(),
            calls: bound::echoed(&c.tool_calls),
        });
        let mut results = Vec::new();
        for u in &c.tool_calls {
            if it.host.stop_requested() {
                return Err(it.no_proposal(STOPPED.into()));
            }
            let parsed = match args::parse(u, &it.shapes) {
                Ok(call) if tokens_spent && !matches!(call, Call::Propose { .. }) => {
                    Err(Refused::TokensSpent(it.limits.max_tokens))
                }
                Ok(call) => Ok(call),
                Err(e) => Err(Refused::Arguments(e)),
            };
            let (proposal, done) = it.carry_out(parsed, &u.name, &u.input).await;
            if let Some(p) = proposal {
                return Ok(p);
            }
            results.push(ToolResult {
                id: u.id.clone(),
                text: done.text,
                error: !done.ok,
            });
        }
        if tokens_spent {
            return Err(it.no_proposal(format!(
                "the token budget of the iteration ({}) is spent before propose",
                it.limits.max_tokens
            )));
        }
        if last_turn {
            return Err(it.no_proposal(format!(
                "the tool-call budget ({}) is spent and the last turn did not propose",
                it.limits.max_calls
            )));
        }
        let last = results.last_mut().expect("a result per call");
        if it.spent.calls >= it.limits.max_calls {
            last_turn = true;
            last.text.push_str(&format!("\n{}", prompt::LAST_TURN));
        }
        it.append_news(&mut last.text);
        turns.push(Turn::Results(results));
    }
}

impl<H: Host> Iteration<'_, H> {
    fn no_proposal(&self, reason: String) -> ProposeError {
        ProposeError::NoProposal {
            reason,
            tokens_in: self.tokens.0,
            tokens_out: self.tokens.1,
            request_id: self.request_id.clone(),
        }
    }

    /// The engineer's notes that arrived, and the budget line.
    fn append_news(&mut self, text: &mut String) {
        let notes = self.host.steering();
        if !notes.is_empty() {
            text.push('\n');
            text.push_str(&prompt::notes(&notes));
        }
        text.push('\n');
        text.push_str(&self.limits.left_line(&self.spent));
    }

    /// Carries out one call (or answers a refused one), records it; the proposal when it was
    /// an accepted `propose`. Every result passes here: its text is cut to the tool's bound,
    /// its summary to one line, the name to `bound::MAX_NAME` bytes.
    async fn carry_out(
        &mut self,
        call: Result<Call, Refused>,
        name: &str,
        input: &str,
    ) -> (Option<Proposal>, Executed) {
        self.numbered += 1;
        let t0 = Instant::now();
        let (name, args_line) = match &call {
            Ok(c) => (c.name().to_string(), c.summary()),
            Err(_) => (
                bound::prefix(name, bound::MAX_NAME - '…'.len_utf8()),
                args::raw_summary(input),
            ),
        };
        self.host.started(&name, &args_line);
        let refusal = match &call {
            Ok(c) => self.limits.refusal(&self.spent, c),
            Err(e) => Some(e.to_string()),
        };
        let mut done = match (call, refusal) {
            (_, Some(why)) => Executed::failed(why.clone(), why),
            (Ok(c), None) => self.host.execute(&c).await,
            (Err(_), None) => unreachable!("an error is a refusal"),
        };
        done.text = bound::result(&name, &done.text);
        done.summary = args::one_line(&done.summary, bound::MAX_SUMMARY);
        if done.proposal.is_none() {
            self.spent.calls += 1;
        }
        self.spent.gpu_s += done.gpu_s;
        self.host.finished(ToolRecord {
            call: self.numbered,
            name,
            args: args_line,
            ok: done.ok,
            result: done.summary.clone(),
            ms: t0.elapsed().as_secs_f64() * 1e3,
            gpu_s: done.gpu_s,
            spent: self.spent,
        });
        let proposal = done.proposal.clone().map(|p| Proposal {
            hypothesis: p.hypothesis,
            category: p.category.into(),
            change: p.change,
            request_id: self.request_id.clone(),
            tokens_in: self.tokens.0,
            tokens_out: self.tokens.1,
            point: None,
            change_note: String::new(),
        });
        (proposal, done)
    }
}
