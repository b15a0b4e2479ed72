//! `doctor`'s workers section: every configured worker (`--workers FILE`, else the settings'
//! `[[workers]]`, else one per local GPU) started and greeted once, with its launch command,
//! whether it answered `hello`, its host, device, GPU and versions, or why it is down.

use crate::pool::config::{self, Choice};
use crate::pool::{Pool, PoolOptions, PoolStatus, SeatState, WorkerStatus};
use serde_json::json;
use std::path::Path;

/// The workers a command would use and what each said.
pub struct WorkersReport {
    /// Where they come from.
    pub from: String,
    pub status: PoolStatus,
    /// The workers file could not be read (the list is empty then).
    pub problem: Option<String>,
    /// The workers were configured (a workers file or the settings' `[[workers]]`), so one
    /// that is down is wrong; the local default on a machine without a GPU is not.
    pub configured: bool,
}

/// Which workers, without failing: a bad workers file is a problem to show. `settings` is
/// the settings file as far as it could be read.
fn choice(
    file: Option<&Path>,
    settings: &crate::config::Settings,
) -> (Choice, String, Option<String>) {
    if let Some(f) = file {
        return match config::load_file(f) {
            Ok(e) => (
                Choice::Listed {
                    from: f.display().to_string(),
                    specs: config::specs(&e),
                },
                f.display().to_string(),
                None,
            ),
            Err(e) => (
                Choice::Listed {
                    from: f.display().to_string(),
                    specs: vec![],
                },
                f.display().to_string(),
                Some(e.to_string()),
            ),
        };
    }
    match settings.device {
        Some(d) => (
            Choice::Device(d),
            format!("the settings' device = {d}"),
            None,
        ),
        None if !settings.workers.is_empty() => (
            Choice::Listed {
                from: "settings".into(),
                specs: config::specs(&settings.workers),
            },
            "the settings' [[workers]]".into(),
            None,
        ),
        None => (
            Choice::Local,
            "one per local GPU (the default)".into(),
            None,
        ),
    }
}

/// Starts the chosen workers, waits for each one's first answer and stops them.
pub fn check(file: Option<&Path>, settings: &crate::config::Settings) -> WorkersReport {
    let (choice, from, problem) = choice(file, settings);
    let configured = matches!(choice, Choice::Listed { .. });
    let status = crate::pool::runtime()
        .map(|rt| {
            rt.block_on(async { Pool::start(&choice, PoolOptions::default()).await.status() })
        })
        .unwrap_or_default();
    WorkersReport {
        from,
        status,
        problem,
        configured,
    }
}

fn answered(w: &WorkerStatus) -> bool {
    w.protocol.is_some() && w.state != SeatState::Down
}

impl WorkersReport {
    /// What is wrong: a workers file that cannot be read, and each configured worker that did
    /// not answer, with its error.
    pub fn problems(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .problem
            .iter()
            .map(|p| format!("workers: {p}"))
            .collect();
        if self.configured {
            v.extend(
                self.status
                    .workers
                    .iter()
                    .filter(|w| !answered(w))
                    .map(|w| {
                        format!(
                            "worker {} did not answer: {}",
                            w.name,
                            w.error.as_deref().unwrap_or("down")
                        )
                    }),
            );
        }
        v
    }

    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "from": self.from,
            "problem": self.problem,
            "list": self.status.workers.iter().map(|w| json!({
                "name": w.name,
                "command": w.command,
                "group": w.group,
                "device": w.device,
                "answered_hello": answered(w),
                "state": w.state,
                "host": w.host,
                "gpu": w.gpu,
                "driver": w.driver,
                "protocol": w.protocol,
                "tool_version": w.tool_version,
                "error": w.error,
                "start_s": w.start_s,
            })).collect::<Vec<_>>(),
        })
    }

    /// The section as `doctor` prints it.
    pub fn print(&self) {
        let n = self.status.workers.len();
        println!(
            "workers:    {n} from {} ({} up)",
            self.from,
            self.status.up()
        );
        if let Some(p) = &self.problem {
            println!("  problem:  {p}");
        }
        for w in &self.status.workers {
            if answered(w) {
                println!(
                    "  {}: answered hello{} · host {} · GPU {} {} · driver {} · atrex-tui {} (protocol {}){}",
                    w.name,
                    w.start_s
                        .map(|s| format!(" in {s:.2} s"))
                        .unwrap_or_default(),
                    w.host.as_deref().unwrap_or("?"),
                    w.device,
                    w.gpu.as_deref().unwrap_or("?"),
                    w.driver.as_deref().unwrap_or("?"),
                    w.tool_version.as_deref().unwrap_or("?"),
                    w.protocol.map(|p| p.to_string()).unwrap_or_default(),
                    if w.group.is_empty() {
                        String::new()
                    } else {
                        format!(" · group {}", w.group)
                    }
                );
            } else {
                println!(
                    "  {}: no answer: {}",
                    w.name,
                    w.error.as_deref().unwrap_or("down")
                );
            }
            println!("      command: {}", w.command);
        }
    }
}
