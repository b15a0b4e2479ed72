//! `calibrate`: the timer's noise and overhead on a GPU.

use super::{EXIT_NO_GPU, runtime};
use crate::contract::protocol::*;
use crate::pool::client::{WorkerClient, WorkerConfig};
use serde_json::json;

/// Where calibration results are cached.
pub fn calibration_file(gpu_name: &str) -> Option<std::path::PathBuf> {
    let safe: String = gpu_name
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    dirs::cache_dir().map(|d| d.join("atrex-tui").join(format!("calibration-{safe}.json")))
}

pub fn run(device: u32, as_json: bool) -> Result<i32, String> {
    let rt = runtime()?;
    rt.block_on(async {
        let client = WorkerClient::spawn(WorkerConfig::new(device));
        let dev = match client.device().await {
            Ok((d, _)) => d,
            Err(e) => {
                eprintln!("atrex-tui: no GPU {device}: {e}; calibration is unavailable");
                return Ok(EXIT_NO_GPU);
            }
        };
        let ev = client.calibrate().await?;
        let Event::Calibration { copy_bytes_per_s, bytes, median_ms, mma_bf16_flops_per_s, .. } = ev else {
            return Err(format!("unexpected reply {ev:?}"));
        };
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).ok();
        let hardware_key = suite
            .as_ref()
            .and_then(|s| crate::suite::hardware::profile_for_device(&s.hardware, &dev.name).map(|h| h.key.clone()));
        let datasheet = suite
            .as_ref()
            .and_then(|s| crate::suite::hardware::profile_for_device(&s.hardware, &dev.name).map(|h| h.hbm_bytes_per_s));
        let datasheet_bf16 = suite.as_ref().and_then(|s| {
            crate::suite::hardware::profile_for_device(&s.hardware, &dev.name)
                .and_then(|h| h.peak_flops.get("bf16").copied())
        });
        let doc = json!({
            "gpu": dev.name,
            "hardware_key": hardware_key,
            "datasheet_bytes_per_s": datasheet,
            "mma_bf16_flops_per_s": mma_bf16_flops_per_s,
            "datasheet_bf16_flops_per_s": datasheet_bf16,
            "copy_bytes_per_s": copy_bytes_per_s,
            "bytes_moved": bytes,
            "median_ms": median_ms,
            "measured_at": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        });
        if let Some(f) = calibration_file(&dev.name) {
            if let Some(d) = f.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            let _ = std::fs::write(&f, serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        if as_json {
            println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        } else {
            println!(
                "{}: copy bandwidth {:.2} TB/s (read + write, {} MiB moved, median {:.3} ms){}",
                dev.name,
                copy_bytes_per_s / 1e12,
                bytes >> 20,
                median_ms,
                datasheet.map(|d| format!("; datasheet {:.2} TB/s ({:.0}%)", d / 1e12, 100.0 * copy_bytes_per_s / d)).unwrap_or_default()
            );
            match mma_bf16_flops_per_s {
                Some(r) => println!(
                    "tensor cores: mma.sync m16n8k16 bf16 → fp32 {:.0} TFLOP/s{} (the datasheet figure needs wgmma on Hopper; T_SOL keeps the datasheet peak)",
                    r / 1e12,
                    datasheet_bf16
                        .map(|d| format!("; datasheet dense bf16 {:.0} TFLOP/s ({:.0}%)", d / 1e12, 100.0 * r / d))
                        .unwrap_or_default()
                ),
                None => println!("tensor cores: not measured (needs sm_80 or newer)"),
            }
            if let Some(k) = &hardware_key {
                println!("roofline views can use the measured bandwidth: --hardware {k}@calibrated");
            }
        }
        Ok(0)
    })
}
