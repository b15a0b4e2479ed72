//! The decision on a measured revision (nothing in suggest mode, the auto rule, or the
//! engineer through the gate) and what it changes: incumbent, best seen, stall count.

use super::*;

impl<P: Proposer, M: Measurer, G: Gate, S: Sink> Driver<P, M, G, S> {
    /// The decision in the driver's mode; None: the engineer stopped (the revision stays
    /// pending and the loop ends).
    pub(super) async fn decide(
        &mut self,
        op: &str,
        rev: u32,
        source: &str,
        quick: &MeasureSummary,
        ev: &mut Evidence,
    ) -> Option<AgentDecision> {
        Some(match self.mode {
            DecisionMode::Suggest => AgentDecision::Pending,
            DecisionMode::Auto => self.decide_auto(op, rev, source, ev).await,
            DecisionMode::Human => return self.decide_human(rev, quick).await,
        })
    }

    /// The auto rule: a full measurement that passes with 5-seed strict correctness, then an
    /// A B B A gain above the noise (any passing candidate when the incumbent does not pass).
    async fn decide_auto(
        &mut self,
        op: &str,
        rev: u32,
        source: &str,
        ev: &mut Evidence,
    ) -> AgentDecision {
        let full_ok = ev
            .full
            .as_ref()
            .is_some_and(|f| f.passed() && f.strict_ok && f.seeds >= 5);
        let accept = if full_ok && self.state.incumbent_s.is_none() {
            // The incumbent does not pass: any passing candidate is better.
            true
        } else if full_ok {
            let noise = ev.full.as_ref().map(|f| f.noise).unwrap_or(0.0);
            let inc_src = self.state.incumbent_source.clone();
            let a = self.abba(&inc_src, source, noise).await;
            let ok = a.significant();
            ev.abba = Some(a);
            ok
        } else {
            false
        };
        let d = if accept {
            Decision::Accepted
        } else {
            Decision::Rejected
        };
        self.sink.record(SessionEvent::Decision {
            op: op.to_string(),
            rev,
            decision: d,
            by: DecidedBy::Auto,
        });
        if accept {
            AgentDecision::Accepted
        } else {
            AgentDecision::Rejected
        }
    }

    /// The engineer's decision on a passing revision (a failing one is rejected); None: stop.
    async fn decide_human(&mut self, rev: u32, quick: &MeasureSummary) -> Option<AgentDecision> {
        if quick.passed() {
            self.agent_state(
                "waiting",
                Some(format!("v{rev}: accept (y), reject (n) or steer (s)")),
                vec![],
            );
            match self.gate.decide(rev).await {
                GateAnswer::Decided(Decision::Accepted) => Some(AgentDecision::Accepted),
                GateAnswer::Decided(Decision::Rejected) => Some(AgentDecision::Rejected),
                GateAnswer::Steer(note) => {
                    self.state.steering.push(note);
                    self.agent_state(
                        "running",
                        Some(format!(
                            "v{rev} left pending; steered, working on the next revision"
                        )),
                        vec![],
                    );
                    Some(AgentDecision::Pending)
                }
                GateAnswer::Stop => None,
            }
        } else {
            Some(AgentDecision::Rejected)
        }
    }

    /// After the decision: the best S_op seen, the incumbent when accepted, and the count of
    /// revisions without an improvement.
    pub(super) fn settle(
        &mut self,
        decision: AgentDecision,
        score: Option<f64>,
        rev: u32,
        source: &str,
        ev: &Evidence,
    ) {
        let best_before = self.best_seen;
        if let Some(s) = score {
            self.best_seen = Some(best_before.map_or(s, |b| b.max(s)));
        }
        if decision == AgentDecision::Accepted {
            let improved = match (score, self.state.incumbent_s) {
                (Some(s), Some(i)) => s > i,
                (Some(_), None) => true,
                _ => false,
            };
            self.state.incumbent_rev = rev;
            self.state.incumbent_source = source.to_string();
            self.state.incumbent_s = score;
            self.incumbent_measure = ev.full.clone().or(ev.quick.clone());
            if improved || self.mode == DecisionMode::Auto {
                self.state.since_improvement = 0;
            } else {
                self.bump_stall();
            }
        } else if self.mode == DecisionMode::Suggest
            && matches!((score, best_before), (Some(s), Some(b)) if s > b)
        {
            // Nothing is accepted without a decision: a new best measurement counts.
            self.state.since_improvement = 0;
        } else {
            self.bump_stall();
        }
    }
}
