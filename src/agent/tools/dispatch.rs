//! Carrying out a checked tool call: compile, run and profile through the loop's `Measurer`
//! (the worker and its harness: nothing runs on the host), lookup and read on the knowledge
//! base, and `propose` checked against the incumbent.

use super::args::{Call, Code};
use super::{Executed, Proposed, lookup, render};
use crate::agent::driver::Measurer;
use crate::agent::knowledge::{self, Doc};
use crate::agent::patch;
use crate::agent::reply::Change;
use crate::contract::protocol::{JobKind, Mode};
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use std::time::Instant;

/// What the tools work with.
pub struct Bench<'a, M: Measurer> {
    pub measurer: &'a mut M,
    pub problem: &'a Problem,
    pub hw: &'a HardwareProfile,
    pub docs: &'a [Doc],
    pub incumbent: &'a str,
}

impl<M: Measurer> Bench<'_, M> {
    /// The source a call names: the incumbent, a whole file, or the incumbent patched.
    fn source(&self, code: &Code) -> Result<String, patch::PatchError> {
        match code {
            Code::Incumbent => Ok(self.incumbent.to_string()),
            Code::Source(s) => Ok(s.clone()),
            Code::Diff(d) => patch::apply(self.incumbent, d),
        }
    }

    pub async fn execute(&mut self, call: &Call) -> Executed {
        let code = match call {
            Call::Compile { code }
            | Call::Run { code, .. }
            | Call::Profile { code, .. }
            | Call::Propose { code, .. } => Some(code),
            Call::Lookup { .. } | Call::Read { .. } => None,
        };
        let source = match code.map(|c| self.source(c)) {
            Some(Err(e)) => {
                return Executed::failed(
                    format!("{e}\n(the diff is applied to the incumbent as the context shows it)"),
                    super::args::one_line(&e.to_string(), 100),
                );
            }
            Some(Ok(s)) => s,
            None => String::new(),
        };
        let t0 = Instant::now();
        let mut done = match call {
            Call::Compile { .. } => {
                let o = self
                    .measurer
                    .run(&source, JobKind::Compile, Mode::Quick)
                    .await;
                render::compile(&o, &source)
            }
            Call::Run { shapes, mode, .. } => {
                let ids: Vec<u32> = shapes
                    .clone()
                    .unwrap_or_else(|| self.problem.shapes.iter().map(|s| s.id).collect());
                let o = self
                    .measurer
                    .run_shapes(&source, JobKind::All, *mode, &ids)
                    .await;
                render::run(&o, self.problem, *mode, &source)
            }
            Call::Profile { shape, .. } => {
                let Some(shape) = shape.or_else(|| crate::profile::largest_shape(self.problem))
                else {
                    return Executed::failed(
                        "the operator has no shape to profile".into(),
                        "no shape".into(),
                    );
                };
                match self.measurer.profile(&source, shape).await {
                    Ok(p) => render::profile(&p),
                    Err(e) => Executed::failed(
                        format!("the profile failed: {e}"),
                        format!("failed: {}", super::args::one_line(&e.to_string(), 100)),
                    ),
                }
            }
            Call::Lookup { query } => {
                let arch = knowledge::arch_family(&self.hw.arch);
                lookup::lookup(self.docs, query, arch, &self.problem.name)
            }
            Call::Read { id } => lookup::read(self.docs, id),
            Call::Propose {
                hypothesis,
                category,
                code,
            } => self.propose(hypothesis, category, code, &source),
        };
        if call.uses_gpu() {
            done.gpu_s = t0.elapsed().as_secs_f64();
        }
        done
    }

    /// A proposal that changes the incumbent ends the iteration.
    fn propose(
        &self,
        hypothesis: &str,
        category: &'static str,
        code: &Code,
        source: &str,
    ) -> Executed {
        if source.trim() == self.incumbent.trim() {
            return Executed::failed(
                "the revision does not change the incumbent".into(),
                "no change".into(),
            );
        }
        let change = match code {
            Code::Diff(d) => Change::Patch(d.clone()),
            _ => Change::Full(source.to_string()),
        };
        let mut e = Executed::ok(
            "accepted: the harness measures this revision on every shape now".into(),
            format!("[{category}] {}", super::args::one_line(hypothesis, 100)),
        );
        e.proposal = Some(Proposed {
            hypothesis: hypothesis.to_string(),
            category,
            change,
        });
        e
    }
}
