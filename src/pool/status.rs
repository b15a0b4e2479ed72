//! The pool's status as it is published: each worker's state, identity, restarts and errors,
//! and the queue's length. The actor (`actor`) makes a new one after every message it handles
//! and publishes it only when it changed; the TUI, `doctor` and the commands read it.
//!
//! Invariant: a status is a value (cloned out of the pool), never a view into the actor's state.

use crate::contract::protocol::DeviceInfo;

/// A worker's state as the pool shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatState {
    /// Being started and greeted.
    Starting,
    /// Up and free.
    Idle,
    /// Up, running a shape or leased.
    Busy,
    /// Could not start or greet; tried again later.
    Down,
}

/// One worker of the pool, as shown by the TUI, `doctor` and the commands.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkerStatus {
    /// The label, else `host:device` once it answered hello, else its command.
    pub name: String,
    /// The command line that starts it.
    pub command: String,
    /// Started by a launch template (else this machine's default worker of a GPU).
    pub templated: bool,
    pub group: String,
    pub device: u32,
    pub host: Option<String>,
    pub gpu: Option<String>,
    /// Its GPU's description, once it answered hello.
    pub gpu_info: Option<DeviceInfo>,
    pub driver: Option<String>,
    pub nvrtc: Option<String>,
    pub protocol: Option<u32>,
    pub tool_version: Option<String>,
    /// The GPU indices its machine shows (from its hello).
    pub visible: Vec<u32>,
    pub state: SeatState,
    /// Why it is down (or why its last start failed).
    pub error: Option<String>,
    /// Restarts after a loss.
    pub restarts: u64,
    /// How long its last start took, from launch to its answer to `hello`, in seconds (through
    /// `srun`, the wait for the allocation included); None until it answered.
    pub start_s: Option<f64>,
    /// Whether its first start finished (up or down).
    pub greeted: bool,
}

/// The pool as a whole.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct PoolStatus {
    pub workers: Vec<WorkerStatus>,
    /// Shapes waiting for a worker.
    pub queued: usize,
    /// Shapes running.
    pub running: usize,
    /// Shapes put back on the queue after their worker was lost.
    pub requeued: u64,
}

/// Per host: workers up (free), busy, starting and down, and their restarts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostCount {
    pub up: usize,
    pub busy: usize,
    pub starting: usize,
    pub down: usize,
    pub restarts: u64,
}

impl PoolStatus {
    /// Every worker's first start has finished.
    pub fn ready(&self) -> bool {
        self.workers.iter().all(|w| w.greeted)
    }

    /// The first worker that is up.
    pub fn first_up(&self) -> Option<&WorkerStatus> {
        self.workers
            .iter()
            .find(|w| matches!(w.state, SeatState::Idle | SeatState::Busy))
    }

    pub fn up(&self) -> usize {
        self.workers
            .iter()
            .filter(|w| matches!(w.state, SeatState::Idle | SeatState::Busy))
            .count()
    }

    pub fn restarts(&self) -> u64 {
        self.workers.iter().map(|w| w.restarts).sum()
    }

    /// Workers per host (the host from hello, else the worker's name), in the order first seen.
    pub fn by_host(&self) -> Vec<(String, HostCount)> {
        let mut out: Vec<(String, HostCount)> = Vec::new();
        for w in &self.workers {
            let host = w
                .host
                .clone()
                .unwrap_or_else(|| w.name.split(':').next().unwrap_or(&w.name).to_string());
            let i = match out.iter().position(|(h, _)| *h == host) {
                Some(i) => i,
                None => {
                    out.push((host, HostCount::default()));
                    out.len() - 1
                }
            };
            let c = &mut out[i].1;
            match w.state {
                SeatState::Idle => c.up += 1,
                SeatState::Busy => c.busy += 1,
                SeatState::Starting => c.starting += 1,
                SeatState::Down => c.down += 1,
            }
            c.restarts += w.restarts;
        }
        out
    }

    /// Why nothing can run, when no worker is up: each worker's error.
    pub fn why_down(&self) -> String {
        let v: Vec<String> = self
            .workers
            .iter()
            .map(|w| {
                format!(
                    "{}: {}",
                    w.name,
                    w.error.as_deref().unwrap_or(match w.state {
                        SeatState::Starting => "starting",
                        _ => "down",
                    })
                )
            })
            .collect();
        if v.is_empty() {
            "the pool has no workers".into()
        } else {
            v.join("; ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_counted_by_state() {
        let w = |host: &str, state, restarts| WorkerStatus {
            name: format!("{host}:0"),
            command: String::new(),
            templated: false,
            group: String::new(),
            device: 0,
            host: Some(host.into()),
            gpu: None,
            gpu_info: None,
            driver: None,
            nvrtc: None,
            protocol: None,
            tool_version: None,
            visible: vec![],
            state,
            error: None,
            restarts,
            start_s: None,
            greeted: true,
        };
        let st = PoolStatus {
            workers: vec![
                w("a", SeatState::Idle, 0),
                w("a", SeatState::Busy, 2),
                w("b", SeatState::Down, 1),
            ],
            ..Default::default()
        };
        let h = st.by_host();
        assert_eq!(h[0].0, "a");
        assert_eq!((h[0].1.up, h[0].1.busy, h[0].1.restarts), (1, 1, 2));
        assert_eq!((h[1].1.down, h[1].1.restarts), (1, 1));
        assert_eq!(st.up(), 2);
        assert_eq!(st.restarts(), 3);
    }
}
