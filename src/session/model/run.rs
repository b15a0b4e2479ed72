//! The run family of the reducer: the start of a run, the device it measures on, errors, and
//! events of kinds this build does not know.

use super::{LogLevel, Model};
use crate::session::event::SessionEvent;

impl Model {
    /// Applies a `run_start`, `device`, `error` or unknown event.
    pub(super) fn apply_run(&mut self, t: f64, ev: &SessionEvent) {
        match ev {
            SessionEvent::RunStart {
                tool_version,
                resumed,
                gpu,
                driver,
                nvrtc,
                hardware,
                suite,
                suite_version,
            } => {
                self.interrupt_running(t);
                self.run.tool_version = Some(tool_version.clone());
                self.run.gpu = gpu.clone();
                self.run.driver = driver.clone();
                self.run.nvrtc = nvrtc.clone();
                self.run.hardware = hardware.clone();
                self.run.suite = Some(format!("{suite} v{suite_version}"));
                self.run.runs += 1;
                self.log(
                    t,
                    LogLevel::Info,
                    format!(
                        "{} atrex-tui {tool_version}{}",
                        if *resumed {
                            "resumed with"
                        } else {
                            "started with"
                        },
                        // The GPU, when known at the start; otherwise a `device` event follows
                        // once the worker has answered.
                        gpu.as_deref()
                            .map(|g| format!(" · {g}"))
                            .unwrap_or_default()
                    ),
                );
            }
            SessionEvent::Device {
                gpu,
                driver,
                nvrtc,
                hardware,
            } => {
                self.run.gpu = gpu.clone();
                self.run.driver = driver.clone();
                self.run.nvrtc = nvrtc.clone();
                if hardware.is_some() {
                    self.run.hardware = hardware.clone();
                }
                self.log(
                    t,
                    LogLevel::Info,
                    format!(
                        "device: {} · driver {} · T_SOL on {}",
                        gpu.as_deref().unwrap_or("none"),
                        driver.as_deref().unwrap_or("-"),
                        hardware.as_deref().unwrap_or("-")
                    ),
                );
            }
            SessionEvent::Unknown => self.unknown_events += 1,
            SessionEvent::Error { op, message } => {
                self.log(
                    t,
                    LogLevel::Error,
                    format!(
                        "{}{message}",
                        op.as_deref().map(|o| format!("{o}: ")).unwrap_or_default()
                    ),
                );
            }
            _ => unreachable!("Model::apply routes only run events to apply_run"),
        }
    }
}
