//! The measurements family of the reducer: a revision's measurement from its start through
//! compilation, per-shape results and kernel output to its verdict. Events of an older
//! measurement (another `mid`) than the revision's current one are ignored.

use super::{LogLevel, MeasureStatus, Measurement, Model, Results};
use crate::contract::protocol::{Diagnostic, Verdict};
use crate::session::event::SessionEvent;

/// Lines of a kernel's output shown in the log per shape.
const OUTPUT_LOG_LINES: usize = 5;

impl Model {
    /// Applies a `measure_start`, `compiled`, `shape_result`, `kernel_output` or
    /// `measure_done` event.
    pub(super) fn apply_measurements(&mut self, t: f64, ev: &SessionEvent) {
        match ev {
            SessionEvent::MeasureStart { op, rev, mid, mode } => {
                self.last_mid = self.last_mid.max(*mid);
                let made = self.run.made_on(t);
                match self.op_mut(op).rev_mut(*rev) {
                    Some(r) => {
                        r.measurement = Measurement {
                            status: MeasureStatus::Running,
                            mid: *mid,
                            mode: mode.clone(),
                            made: Some(made),
                            ..Default::default()
                        };
                        self.log(
                            t,
                            LogLevel::Info,
                            format!("{op} v{rev}: measuring ({mode})"),
                        );
                    }
                    None => self.unknown(t, op, *rev, "measure_start"),
                }
            }
            SessionEvent::Compiled {
                op,
                rev,
                mid,
                ok,
                diagnostics,
                log,
            } => {
                let mut line = None;
                match self.op_mut(op).rev_mut(*rev) {
                    Some(r) if r.measurement.mid == *mid => {
                        r.measurement.compiled = Some(*ok);
                        r.measurement.diagnostics = diagnostics.clone();
                        r.measurement.compile_log = log.clone();
                        if !ok {
                            line = Some(match Diagnostic::headline(diagnostics) {
                                Some(d) => format!(
                                    "{op} v{rev}: compile error at {}: {}",
                                    d.place(),
                                    d.msg
                                ),
                                None => format!("{op} v{rev}: compile error"),
                            });
                        }
                    }
                    Some(_) => {}
                    None => self.unknown(t, op, *rev, "compiled"),
                }
                if let Some(l) = line {
                    self.log(t, LogLevel::Error, l);
                }
            }
            SessionEvent::ShapeResult {
                op,
                rev,
                mid,
                result,
            } => self.shape_result(t, op, *rev, *mid, |r| {
                r.insert(result.shape, result.clone())
            }),
            SessionEvent::KernelOutput {
                op,
                rev,
                mid,
                shape,
                text,
                dropped,
            } => {
                let mut lines = Vec::new();
                match self.op_mut(op).rev_mut(*rev) {
                    Some(r) if r.measurement.mid == *mid => {
                        r.measurement.output.push((*shape, text.clone()));
                        lines = output_log_lines(op, *rev, *shape, text, *dropped);
                    }
                    Some(_) => {}
                    None => self.unknown(t, op, *rev, "kernel_output"),
                }
                for l in lines {
                    self.log(t, LogLevel::Info, l);
                }
            }
            SessionEvent::MeasureDone {
                op,
                rev,
                mid,
                verdict,
                message,
            } => self.measure_done(t, op, *rev, *mid, verdict, message),
            _ => unreachable!("Model::apply routes only measurement events to apply_measurements"),
        }
    }

    /// Takes one shape's result into the revision's measurement when it is of its current
    /// measurement (`mid`); `put` stores it (whole, or its brief).
    pub(super) fn shape_result(
        &mut self,
        t: f64,
        op: &str,
        rev: u32,
        mid: u64,
        put: impl FnOnce(&mut Results),
    ) {
        match self.op_mut(op).rev_mut(rev) {
            Some(r) if r.measurement.mid == mid => put(&mut r.measurement.results),
            Some(_) => {}
            None => self.unknown(t, op, rev, "shape_result"),
        }
    }

    /// Ends a measurement with its verdict, logged as good or as a warning.
    fn measure_done(
        &mut self,
        t: f64,
        op: &str,
        rev: u32,
        mid: u64,
        verdict: &Verdict,
        message: &Option<String>,
    ) {
        let mut line = None;
        let run = self.run.clone();
        match self.op_mut(op).rev_mut(rev) {
            Some(r) if r.measurement.mid == mid => {
                r.measurement.status = MeasureStatus::Done(verdict.clone());
                // The device was not known at the start (a worker that answered later in the
                // same run): take it now.
                if let Some(m) = r.measurement.made.as_mut()
                    && m.gpu.is_none()
                    && m.run == run.runs
                {
                    *m = run.made_on(m.t);
                }
                r.measurement.message = message.clone();
                let v = r.verdict();
                let lvl = if v.failed() {
                    LogLevel::Warn
                } else {
                    LogLevel::Good
                };
                line = Some((
                    lvl,
                    format!(
                        "{op} v{rev}: {}{}",
                        v.label(),
                        message
                            .as_deref()
                            .map(|m| format!(" · {m}"))
                            .unwrap_or_default()
                    ),
                ));
            }
            Some(_) => {}
            None => self.unknown(t, op, rev, "measure_done"),
        }
        if let Some((l, s)) = line {
            self.log(t, l, s);
        }
    }
}

/// The log lines for what a kernel printed: its first `OUTPUT_LOG_LINES` lines, then a count
/// of the rest (and of the bytes over the limit that were not kept).
fn output_log_lines(
    op: &str,
    rev: u32,
    shape: Option<u32>,
    text: &str,
    dropped: u64,
) -> Vec<String> {
    let mut lines = Vec::new();
    let origin = shape.map(|s| format!(" shape {s}")).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    for l in all.iter().take(OUTPUT_LOG_LINES) {
        lines.push(format!("{op} v{rev}{origin} printed: {l}"));
    }
    if all.len() > OUTPUT_LOG_LINES || dropped > 0 {
        lines.push(format!(
            "{op} v{rev}{origin}: {} more lines{} (all kept lines are in the session)",
            all.len().saturating_sub(OUTPUT_LOG_LINES),
            if dropped > 0 {
                format!(", {dropped} bytes over the 64 KiB limit not kept")
            } else {
                String::new()
            }
        ));
    }
    lines
}
