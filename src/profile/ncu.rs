//! Parsing Nsight Compute's raw page (`--csv --page raw`): a header of metric names, a row of
//! units, then one row per profiled kernel launch.

use super::PageError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The figures of one profiled kernel launch that the gauges and findings use. Every field is
/// optional: an ncu version or a section set may not provide it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct KernelProfile {
    pub name: String,
    pub duration_ns: Option<f64>,
    pub dram_throughput_pct: Option<f64>,
    pub dram_read_bytes: Option<f64>,
    pub dram_write_bytes: Option<f64>,
    pub sm_throughput_pct: Option<f64>,
    pub memory_throughput_pct: Option<f64>,
    pub l1_hit_pct: Option<f64>,
    pub l2_hit_pct: Option<f64>,
    pub achieved_occupancy_pct: Option<f64>,
    pub theoretical_occupancy_pct: Option<f64>,
    pub registers_per_thread: Option<f64>,
    pub shared_static_bytes: Option<f64>,
    pub shared_dynamic_bytes: Option<f64>,
    /// Local (spill) memory per thread from the compiler, where known.
    pub local_bytes_per_thread: Option<f64>,
    /// Local memory traffic in sectors (loads + stores), from the counters.
    pub local_sectors: Option<f64>,
    pub tensor_pipe_pct: Option<f64>,
    pub waves_per_sm: Option<f64>,
    pub grid_size: Option<f64>,
    pub block_size: Option<f64>,
    /// Warp stall reasons (cycles per issued instruction), largest first.
    pub stalls: Vec<(String, f64)>,
    /// fp64 add/mul/fma thread instructions per cycle (summed over the SM sub-partitions).
    pub fp64_per_cycle: Option<f64>,
    pub shared_bank_conflicts: Option<f64>,
    pub shared_wavefronts: Option<f64>,
    /// Average active threads per executed warp instruction (32 = no divergence).
    pub threads_per_instruction: Option<f64>,
    /// Global load sectors per request (4 = 4-byte accesses fully coalesced).
    pub global_ld_sectors_per_request: Option<f64>,
    /// Every metric of the row, converted to base units where the unit is known.
    #[serde(skip)]
    pub raw: BTreeMap<String, f64>,
}

/// Scale of a unit to its base (bytes, nanoseconds, …).
fn unit_scale(unit: &str) -> f64 {
    match unit.trim() {
        "Kbyte" | "KB" => 1e3,
        "Mbyte" | "MB" => 1e6,
        "Gbyte" | "GB" => 1e9,
        "Tbyte" => 1e12,
        "KiB" | "Kibyte" => 1024.0,
        "MiB" | "Mibyte" => 1024.0 * 1024.0,
        "GiB" | "Gibyte" => 1024.0 * 1024.0 * 1024.0,
        "nsecond" | "ns" => 1.0,
        "usecond" | "us" => 1e3,
        "msecond" | "ms" => 1e6,
        "second" | "s" => 1e9,
        "Kbyte/block" => 1e3,
        _ => 1.0,
    }
}

pub(super) fn number(s: &str) -> Option<f64> {
    let t = s.trim().replace(',', "");
    if t.is_empty() || t == "n/a" {
        return None;
    }
    t.parse::<f64>().ok()
}

/// Parses the raw page. Returns one profile per launch; an empty list when the text holds no
/// table (the caller says why).
pub fn parse_raw_csv(text: &str) -> Result<Vec<KernelProfile>, PageError> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(h) = lines
        .iter()
        .position(|l| l.starts_with("\"ID\"") || l.starts_with("ID,"))
    else {
        return Ok(Vec::new());
    };
    // The table from its header on, without the profiler's own `==PROF==` lines.
    let table: String = lines[h..]
        .iter()
        .filter(|l| !l.starts_with("==") && !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(table.as_bytes());
    let mut records = reader.records();
    let row = |r: Option<Result<csv::StringRecord, csv::Error>>| match r {
        None => Ok(None),
        Some(Ok(rec)) => Ok(Some(rec.iter().map(|f| f.to_string()).collect::<Vec<_>>())),
        Some(Err(e)) => Err(PageError::Table(e)),
    };
    let header = row(records.next())?.unwrap_or_default();
    let col = |name: &str| header.iter().position(|c| c == name);
    let name_col = col("Kernel Name").ok_or(PageError::NoKernelName)?;
    let mut out = Vec::new();
    let mut units: Vec<String> = Vec::new();
    let mut first = true;
    while let Some(f) = row(records.next())? {
        // The units row (when present) follows the header and has an empty ID column.
        if first {
            first = false;
            if f.first().map(|u| u.trim().is_empty()).unwrap_or(false) {
                units = f;
                continue;
            }
        }
        if f.len() < header.len() {
            continue;
        }
        let mut raw = BTreeMap::new();
        for (i, name) in header.iter().enumerate() {
            if let Some(v) = number(&f[i]) {
                let scale = units.get(i).map(|u| unit_scale(u)).unwrap_or(1.0);
                raw.insert(name.clone(), v * scale);
            }
        }
        out.push(from_raw(f[name_col].clone(), raw));
    }
    Ok(out)
}

fn from_raw(name: String, raw: BTreeMap<String, f64>) -> KernelProfile {
    let get = |names: &[&str]| names.iter().find_map(|n| raw.get(*n).copied());
    let sum = |names: &[&str]| {
        let v: Vec<f64> = names.iter().filter_map(|n| raw.get(*n).copied()).collect();
        if v.is_empty() {
            None
        } else {
            Some(v.iter().sum())
        }
    };
    let mut stalls: Vec<(String, f64)> = raw
        .iter()
        .filter_map(|(k, v)| {
            let reason = k
                .strip_prefix("smsp__average_warps_issue_stalled_")?
                .strip_suffix("_per_issue_active.ratio")?;
            (*v > 0.0 && reason != "selected").then(|| (reason.to_string(), *v))
        })
        .collect();
    stalls.sort_by(|a, b| b.1.total_cmp(&a.1));
    let tensor = raw
        .iter()
        .filter(|(k, _)| {
            k.contains("pipe_tensor")
                && (k.ends_with("pct_of_peak_sustained_active")
                    || k.ends_with("pct_of_peak_sustained_elapsed"))
        })
        .map(|(_, v)| *v)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let ld_sectors = get(&["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]);
    let ld_requests = get(&["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]);
    KernelProfile {
        name,
        duration_ns: get(&["gpu__time_duration.sum"]),
        dram_throughput_pct: get(&[
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        ]),
        dram_read_bytes: get(&["dram__bytes_read.sum"]),
        dram_write_bytes: get(&["dram__bytes_write.sum"]),
        sm_throughput_pct: get(&["sm__throughput.avg.pct_of_peak_sustained_elapsed"]),
        memory_throughput_pct: get(&[
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        ]),
        l1_hit_pct: get(&["l1tex__t_sector_hit_rate.pct"]),
        l2_hit_pct: get(&["lts__t_sector_hit_rate.pct"]),
        achieved_occupancy_pct: get(&["sm__warps_active.avg.pct_of_peak_sustained_active"]),
        theoretical_occupancy_pct: get(&["sm__maximum_warps_per_active_cycle_pct"]),
        registers_per_thread: get(&["launch__registers_per_thread"]),
        shared_static_bytes: get(&["launch__shared_mem_per_block_static"]),
        shared_dynamic_bytes: get(&["launch__shared_mem_per_block_dynamic"]),
        local_bytes_per_thread: None,
        local_sectors: sum(&[
            "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
            "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
        ]),
        tensor_pipe_pct: tensor,
        waves_per_sm: get(&["launch__waves_per_multiprocessor"]),
        grid_size: get(&["launch__grid_size"]),
        block_size: get(&["launch__block_size"]),
        stalls,
        fp64_per_cycle: sum(&[
            "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed",
            "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed",
            "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed",
        ]),
        shared_bank_conflicts: sum(&[
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        ]),
        shared_wavefronts: sum(&[
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
        ]),
        threads_per_instruction: get(&["smsp__thread_inst_executed_per_inst_executed.ratio"]),
        global_ld_sectors_per_request: match (ld_sectors, ld_requests) {
            (Some(s), Some(r)) if r > 0.0 => Some(s / r),
            _ => None,
        },
        raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = "==PROF== Connected to process 1\n\
\"ID\",\"Process ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\",\"dram__throughput.avg.pct_of_peak_sustained_elapsed\",\"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio\",\"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio\",\"launch__grid_size\"\n\
\"\",\"\",\"\",\"usecond\",\"Mbyte\",\"%\",\"ratio\",\"ratio\",\"\"\n\
\"0\",\"1\",\"k\",\"12.5\",\"3.25\",\"81.2\",\"7.5\",\"0.5\",\"1,024\"\n";

    #[test]
    fn parses_units_and_stalls() {
        let k = parse_raw_csv(MINI).unwrap();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].name, "k");
        assert_eq!(k[0].duration_ns, Some(12500.0));
        assert_eq!(k[0].dram_read_bytes, Some(3.25e6));
        assert_eq!(k[0].dram_throughput_pct, Some(81.2));
        assert_eq!(k[0].grid_size, Some(1024.0));
        assert_eq!(k[0].stalls[0], ("long_scoreboard".to_string(), 7.5));
        assert_eq!(k[0].stalls.len(), 2);
    }

    #[test]
    fn parses_a_report_recorded_on_the_h200() {
        let text = include_str!("../../tests/fixtures/ncu/h200-rms_norm-baseline-shape27.csv");
        let k = parse_raw_csv(text).unwrap();
        assert_eq!(k.len(), 1);
        let k = &k[0];
        assert_eq!(k.name, "rms_norm_kernel");
        assert_eq!(k.duration_ns, Some(307_168.0));
        assert_eq!(k.dram_read_bytes, Some(129_559_296.0));
        assert_eq!(k.dram_write_bytes, Some(110_845_440.0));
        assert_eq!(k.grid_size, Some(505_888.0));
        assert_eq!(k.block_size, Some(32.0));
        assert_eq!(k.registers_per_thread, Some(30.0));
        assert_eq!(k.sm_throughput_pct, Some(30.93));
        assert_eq!(k.achieved_occupancy_pct, Some(19.05));
        assert_eq!(k.theoretical_occupancy_pct, Some(50.0));
        assert_eq!(k.threads_per_instruction, Some(21.11));
        assert!((k.tensor_pipe_pct.unwrap() - 0.65).abs() < 0.05);
        assert!(k.dram_throughput_pct.unwrap() > 10.0 && k.dram_throughput_pct.unwrap() < 20.0);
        assert_eq!(k.global_ld_sectors_per_request, Some(8.0));
        assert_eq!(k.stalls[0].0, "long_scoreboard");
        assert_eq!(k.fp64_per_cycle, Some(0.0));
        // 260 MB in 307 µs is latency-bound, not memory-bound: the rules say why.
        let f = crate::profile::classify(
            std::slice::from_ref(k),
            Some(0.93),
            Some(crate::suite::roofline::Bottleneck::Memory),
            true,
            Some(132),
        );
        let rules: Vec<&str> = f.iter().map(|x| x.rule.as_str()).collect();
        assert_eq!(
            rules,
            vec!["warp_divergence", "low_occupancy", "latency_bound"]
        );
    }

    #[test]
    fn no_table_is_empty_not_an_error() {
        assert!(
            parse_raw_csv("==PROF== No kernels were profiled.\n")
                .unwrap()
                .is_empty()
        );
        assert!(parse_raw_csv("").unwrap().is_empty());
    }

    #[test]
    fn csv_quoting() {
        let text =
            "\"ID\",\"Kernel Name\",\"launch__grid_size\"\n\"0\",\"k<\"\"a,b\"\">\",\"1,024\"\n";
        let k = parse_raw_csv(text).unwrap();
        assert_eq!(k[0].name, "k<\"a,b\">");
        assert_eq!(k[0].grid_size, Some(1024.0));
    }
}
