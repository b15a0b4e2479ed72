//! The workers of a measuring command (`bench`, `measure`, `agent`): which ones (`--device`,
//! `--workers FILE`, the settings' `[[workers]]`, else every local GPU), started as a pool, and
//! the GPU its measurements are for (the first worker up: T_SOL and S are per GPU model, so
//! the pool's jobs run only on workers of that model).

use crate::contract::protocol::DeviceInfo;
use crate::pool::config::Choice;
use crate::pool::{Pool, PoolOptions, PoolStatus, SeatState};
use std::path::Path;

/// A started pool and the GPU its jobs are measured on.
pub(crate) struct Started {
    /// Jobs submitted through it run on workers of `dev`'s model only.
    pub pool: Pool,
    pub dev: DeviceInfo,
    pub driver: String,
    pub nvrtc: Option<String>,
    pub status: PoolStatus,
}

impl Started {
    /// The workers up, by name.
    pub fn names(&self) -> Vec<String> {
        self.status
            .workers
            .iter()
            .filter(|w| matches!(w.state, SeatState::Idle | SeatState::Busy))
            .map(|w| w.name.clone())
            .collect()
    }
}

/// The workers a command chose (`--device` and `--workers` exclude each other).
pub(crate) fn choose(
    device: Option<u32>,
    file: Option<&Path>,
    config: Option<&Path>,
) -> Result<Choice, String> {
    if device.is_some() && file.is_some() {
        return Err("--device picks a GPU of this machine and --workers a pool: give one".into());
    }
    let path = crate::config::settings_path(config);
    let settings = crate::config::Settings::load(path.as_deref())?;
    Ok(crate::pool::config::choose(
        device,
        file,
        &settings.workers,
        path.as_deref(),
    )?)
}

/// Starts the pool and waits for every worker's first start. When no worker is up, says why
/// (on stderr in one line, or with `json` as the error document on stdout: `super::fail`) and
/// gives the exit status: 1 when the workers were configured (a workers file or the settings'
/// `[[workers]]`: they failed, each with its error), `EXIT_NO_GPU` when this machine has no
/// GPU to use.
pub(crate) async fn start(choice: &Choice, opts: PoolOptions, json: bool) -> Result<Started, i32> {
    let pool = Pool::start(choice, opts).await;
    let status = pool.status();
    let first = match (status.first_up(), choice) {
        (Some(first), _) => first,
        (None, Choice::Listed { from, .. }) => {
            let why = format!(
                "no worker of {from} started: {}; nothing was measured",
                status.why_down()
            );
            return Err(super::fail(json, &why, 1));
        }
        (None, _) => {
            let why = format!("no GPU: {}; measurement is unavailable", status.why_down());
            return Err(super::fail(json, &why, super::EXIT_NO_GPU));
        }
    };
    let Some(dev) = first.gpu_info.clone() else {
        let why = format!(
            "worker {} answered without describing its GPU; measurement is unavailable",
            first.name
        );
        return Err(super::fail(json, &why, 1));
    };
    for w in status.workers.iter().filter(|w| w.error.is_some()) {
        eprintln!(
            "atrex-tui: worker {} is down ({}); the others carry on",
            w.name,
            w.error.as_deref().unwrap_or("")
        );
    }
    Ok(Started {
        pool: pool.for_model(Some(dev.name.clone())),
        driver: first.driver.clone().unwrap_or_default(),
        nvrtc: first.nvrtc.clone(),
        dev,
        status,
    })
}
