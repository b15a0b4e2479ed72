//! The proposers: the built-in tuner and an LLM (one reply, or a conversation with tools).

use super::*;

/// The built-in tuner as a proposer.
pub struct TunerProposer {
    pub search: Search,
    outstanding: Option<Point>,
}

impl TunerProposer {
    /// A tuner over given bases (the first one is the incumbent).
    #[cfg(test)]
    pub fn with_bases(bases: Vec<Base>, incumbent_s: Option<f64>, seed: u64) -> TunerProposer {
        TunerProposer {
            search: Search::new(bases, incumbent_s, seed),
            outstanding: None,
        }
    }

    /// The incumbent first, then the knowledge base's templates for the operator.
    pub fn new(
        op: &str,
        incumbent: &str,
        incumbent_s: Option<f64>,
        seed: u64,
    ) -> Result<TunerProposer, super::super::tuner::BaseError> {
        let mut bases = vec![Base::from_source("incumbent", incumbent)?];
        for d in crate::agent::knowledge::templates_for(op) {
            if let Ok(b) = Base::from_source(&d.meta.id, &d.body) {
                bases.push(b);
            }
        }
        Ok(TunerProposer {
            search: Search::new(bases, incumbent_s, seed),
            outstanding: None,
        })
    }

    /// Seeds the search with configurations measured earlier (resume).
    pub fn seed_history(&mut self, measured: &[(String, Option<f64>)]) {
        for (src, s) in measured {
            if let Some(p) = self.point_of(src) {
                self.search.seed_measured(p, *s);
            }
        }
    }

    /// The configuration of a source: the base whose code matches outside the plan, and its defines.
    fn point_of(&self, src: &str) -> Option<Point> {
        let plan = crate::contract::plan::parse(src).ok()?;
        let strip = |s: &str| s.split("*/").skip(1).collect::<Vec<_>>().join("*/");
        for (i, b) in self.search.bases.iter().enumerate() {
            if strip(&b.source) != strip(src) {
                continue;
            }
            let mut values = Vec::new();
            for (k, vs) in &b.tune {
                let v = plan.defines.get(k)?;
                values.push(vs.iter().position(|x| x.num_eq(v))?);
            }
            return Some(Point { base: i, values });
        }
        None
    }
}

impl Proposer for TunerProposer {
    fn author(&self) -> Author {
        Author::Tuner
    }
    fn name(&self) -> String {
        "tuner".into()
    }
    async fn propose(
        &mut self,
        _ctx: &Context,
        _state: &AgentState,
        _stream: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Proposal, ProposeError> {
        loop {
            let Some((p, kind)) = self.search.next_point() else {
                return Err(ProposeError::Exhausted);
            };
            let base = &self.search.bases[p.base];
            let defines = base.defines(&p.values);
            let source = match crate::contract::plan::rewrite::set_defines(&base.source, &defines) {
                Ok(s) => s,
                Err(_) if defines.is_empty() => base.source.clone(),
                Err(e) => {
                    // An unusable configuration counts as a failed one.
                    self.search.report(&p, None);
                    let _ = e;
                    continue;
                }
            };
            let dtext: Vec<String> = defines.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let (hypothesis, category) = match &kind {
                StepKind::Coordinate(k) => (
                    format!(
                        "coordinate descent on {k}: {} = {} ({})",
                        k,
                        defines.get(k).map(|v| v.to_string()).unwrap_or_default(),
                        dtext.join(" ")
                    ),
                    "launch-config",
                ),
                StepKind::Variant => (
                    format!("template variant {} ({})", base.name, dtext.join(" ")),
                    "template",
                ),
                StepKind::Restart => (
                    format!(
                        "random restart (tuner dropout) at {} ({})",
                        base.name,
                        dtext.join(" ")
                    ),
                    if p.base == 0 {
                        "launch-config"
                    } else {
                        "template"
                    },
                ),
            };
            self.outstanding = Some(p.clone());
            return Ok(Proposal {
                hypothesis,
                category: category.into(),
                change: Change::Full(source),
                request_id: None,
                tokens_in: 0,
                tokens_out: 0,
                point: Some(p),
                change_note: format!("{}: {}", base.name, dtext.join(" ")),
            });
        }
    }
    fn observe(&mut self, p: &Proposal, score: Option<f64>) {
        if let Some(pt) = &p.point {
            self.search.report(pt, score);
        }
        self.outstanding = None;
    }
    fn dropout(&mut self) {
        self.search.force_restart();
    }
}

/// An LLM as a proposer.
pub struct LlmProposer {
    pub client: LlmClient,
}

impl Proposer for LlmProposer {
    fn author(&self) -> Author {
        Author::Model(self.client.endpoint.model.clone())
    }
    fn name(&self) -> String {
        format!(
            "{} ({})",
            self.client.endpoint.model,
            self.client.endpoint.kind.name()
        )
    }
    fn supports_tools(&self) -> bool {
        true
    }
    async fn propose_with_tools<H: Host>(
        &mut self,
        ctx: &Context,
        host: &mut H,
        limits: &ToolSettings,
    ) -> Result<Proposal, ProposeError> {
        crate::agent::tools::conversation::iterate(&self.client, ctx, host, limits).await
    }
    async fn propose(
        &mut self,
        ctx: &Context,
        _state: &AgentState,
        stream: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Proposal, ProposeError> {
        let mut messages = vec![Message {
            role: "user",
            content: ctx.user.clone(),
        }];
        let (mut tin, mut tout) = (0, 0);
        let mut request_id = None;
        for attempt in 0..2 {
            let c = match self.client.complete(&ctx.system, &messages, stream).await {
                Ok(c) => c,
                Err(LlmError::Fatal(e)) => return Err(ProposeError::Fatal(e)),
                Err(e @ (LlmError::Exhausted(_) | LlmError::ToolsRefused(_))) => {
                    return Err(ProposeError::Fatal(e.to_string()));
                }
            };
            tin += c.tokens_in;
            tout += c.tokens_out;
            request_id = c.request_id.clone().or(request_id);
            match reply::parse(&c.text) {
                Ok(r) => {
                    return Ok(Proposal {
                        hypothesis: r.hypothesis,
                        category: r.category.into(),
                        change: r.change,
                        request_id,
                        tokens_in: tin,
                        tokens_out: tout,
                        point: None,
                        change_note: String::new(),
                    });
                }
                Err(e) if attempt == 0 => {
                    stream(Delta::Reset(&e.to_string()));
                    messages.push(Message {
                        role: "assistant",
                        content: c.text,
                    });
                    messages.push(Message {
                        role: "user",
                        content: reply::corrective(&e),
                    });
                }
                Err(e) => {
                    return Err(ProposeError::Failed {
                        reason: e.to_string(),
                        tokens_in: tin,
                        tokens_out: tout,
                        request_id,
                    });
                }
            }
        }
        unreachable!()
    }
}
