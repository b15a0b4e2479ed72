//! `profile`: a candidate under Nsight Compute.

use super::{EXIT_NO_GPU, runtime};
use crate::contract::outcome::*;
use crate::contract::protocol::{KernelResources, Source};
use crate::pool::client::{WorkerClient, WorkerConfig};
use crate::profile::{KernelProfile, Profile};
use crate::suite::{Problem, Suite};
use std::collections::BTreeMap;
use std::path::Path;

/// `profile`: the candidate under Nsight Compute for one shape; `(clock control, source page)`
/// say how ncu runs.
pub fn run(
    suite: &Suite,
    op: &str,
    kernel: Option<&Path>,
    defines: &[String],
    shape: Option<u32>,
    (clock_control, source): (&str, bool),
    device: u32,
    as_json: bool,
) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    let candidate = super::defines::candidate(suite, p, kernel, defines)?;
    let shape_id = resolve_shape(p, shape)?;
    let mut opts = match crate::profile::NcuOptions::find() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("atrex-tui: {e}");
            return Ok(EXIT_NO_GPU);
        }
    };
    opts.clock_control = clock_control.to_string();
    opts.source = source;
    let rt = runtime()?;
    let (dev_name, resources) = device_and_resources(&rt, device, p, &candidate, shape_id)?;
    if dev_name.is_empty() {
        eprintln!("atrex-tui: no GPU {device}: profiling is unavailable");
        return Ok(EXIT_NO_GPU);
    }
    if !as_json {
        eprintln!(
            "profiling {} shape {shape_id} under {} ...",
            p.name,
            opts.ncu.display()
        );
    }
    let prof = match crate::profile::profile(
        suite,
        p,
        candidate,
        shape_id,
        device,
        &opts,
        Some(&dev_name),
        resources.as_ref(),
    ) {
        Ok(pr) => pr,
        Err(e) => {
            eprintln!("atrex-tui: {e}");
            return Ok(1);
        }
    };
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&prof).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    print_text(&prof, &dev_name);
    Ok(0)
}

/// The shape asked for (checked to exist), else the operator's largest.
fn resolve_shape(p: &Problem, shape: Option<u32>) -> Result<u32, String> {
    Ok(match shape {
        Some(s) => {
            if p.shape(s).is_none() {
                return Err(format!("{} has no shape {s}", p.name));
            }
            s
        }
        None => crate::profile::largest_shape(p).ok_or("no shapes")?,
    })
}

/// The device's name and the candidate's compiled resources; an empty name when there is no GPU.
fn device_and_resources(
    rt: &tokio::runtime::Runtime,
    device: u32,
    p: &Problem,
    candidate: &Source,
    shape_id: u32,
) -> Result<(String, Option<BTreeMap<String, KernelResources>>), String> {
    rt.block_on(async {
        let client = WorkerClient::spawn(WorkerConfig::new(device));
        let name = match client.device().await {
            Ok((d, _)) => d.name,
            Err(_) => return Err("no GPU".to_string()),
        };
        let res = compile_resources(&client, p, candidate, shape_id).await?;
        Ok((name, res))
    })
    .or_else(|e| {
        if e == "no GPU" {
            Ok((String::new(), None))
        } else {
            Err(e)
        }
    })
}

/// A percentage, right-aligned, or a dash.
fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{x:5.1}%"))
        .unwrap_or_else(|| "    -".into())
}

/// A 20-cell bar of a percentage.
fn bar(v: Option<f64>) -> String {
    let n = (v.unwrap_or(0.0) / 5.0).round().clamp(0.0, 20.0) as usize;
    format!("{}{}", "█".repeat(n), "·".repeat(20 - n))
}

/// Prints the profile as text: a header, each kernel's metrics, and the findings.
fn print_text(prof: &Profile, dev_name: &str) {
    println!(
        "{} · {} · shape {} · {dev_name} · {:.1} s",
        prof.operator, prof.kernel_file, prof.shape, prof.wall_s
    );
    for k in &prof.kernels {
        print_kernel(k);
    }
    if let Some(r) = prof.redundant_traffic_ratio {
        println!("DRAM bytes / Q = {r:.3}");
    }
    for f in &prof.findings {
        println!("{}", f.line());
    }
    print_source(&prof.source);
}

/// Prints where the warps wait, kernel by kernel.
fn print_source(pages: &[crate::profile::SourceProfile]) {
    for l in pages.iter().flat_map(|s| s.lines()) {
        println!("{l}");
    }
}

/// `profile --source-csv`: a source page saved earlier, summarised without a GPU.
pub fn summarise_csv(suite: &Suite, op: &str, csv: &Path, as_json: bool) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    let text = std::fs::read_to_string(csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    let pages =
        crate::profile::parse_source_csv(&text).map_err(|e| format!("{}: {e}", csv.display()))?;
    if pages.is_empty() {
        return Err(format!(
            "{}: no kernel in it (expected the output of `ncu --import REPORT --csv --page source --print-source sass`)",
            csv.display()
        ));
    }
    if as_json {
        let doc = serde_json::json!({"operator": p.name, "file": csv.display().to_string(), "source": pages});
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    println!("{} · {}", p.name, csv.display());
    print_source(&pages);
    Ok(0)
}

/// Prints one kernel's launch, throughput, occupancy, hit rates and top stalls.
fn print_kernel(k: &KernelProfile) {
    println!(
        "kernel {}: {:.2} µs, grid {} × block {}, {} registers/thread, {:.2} waves/SM",
        k.name,
        k.duration_ns.unwrap_or(0.0) / 1e3,
        k.grid_size.unwrap_or(0.0),
        k.block_size.unwrap_or(0.0),
        k.registers_per_thread.unwrap_or(0.0),
        k.waves_per_sm.unwrap_or(0.0)
    );
    println!(
        "  DRAM       {} {}  ({:.1} MB read, {:.1} MB written)",
        bar(k.dram_throughput_pct),
        pct(k.dram_throughput_pct),
        k.dram_read_bytes.unwrap_or(0.0) / 1e6,
        k.dram_write_bytes.unwrap_or(0.0) / 1e6
    );
    println!(
        "  SM         {} {}",
        bar(k.sm_throughput_pct),
        pct(k.sm_throughput_pct)
    );
    println!(
        "  occupancy  {} {} (theoretical {})",
        bar(k.achieved_occupancy_pct),
        pct(k.achieved_occupancy_pct),
        pct(k.theoretical_occupancy_pct)
    );
    println!(
        "  L1 hit {}  L2 hit {}  tensor pipe {}",
        pct(k.l1_hit_pct),
        pct(k.l2_hit_pct),
        pct(k.tensor_pipe_pct)
    );
    let stalls: Vec<String> = k
        .stalls
        .iter()
        .take(4)
        .map(|(r, v)| format!("{r} {v:.2}"))
        .collect();
    println!("  stalls (cycles/instruction): {}", stalls.join(", "));
}
