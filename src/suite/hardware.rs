//! Hardware profiles: problems/hardware/<KEY>.toml.

use crate::suite::{LoadError, SuiteSource, line_of, toml_error};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct RawHardware {
    name: String,
    key: String,
    #[serde(default)]
    arch: String,
    sm_count: u32,
    l2_bytes: u64,
    #[serde(default)]
    hbm_bytes: u64,
    hbm_bytes_per_s: f64,
    peak_flops: BTreeMap<String, f64>,
    #[serde(default)]
    sources: BTreeMap<String, String>,
}

/// Peak rates and sizes of one GPU model.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HardwareProfile {
    pub name: String,
    pub key: String,
    pub arch: String,
    pub sm_count: u32,
    pub l2_bytes: u64,
    pub hbm_bytes: u64,
    /// Bytes per second.
    pub hbm_bytes_per_s: f64,
    /// Dense FLOP/s per dtype path, keyed by the W dtype labels.
    pub peak_flops: BTreeMap<String, f64>,
    pub sources: BTreeMap<String, String>,
    #[serde(skip)]
    pub file: String,
}

impl HardwareProfile {
    /// The ridge point (FLOP per byte) of a dtype path.
    pub fn ridge(&self, dtype: &str) -> Option<f64> {
        self.peak_flops.get(dtype).map(|p| p / self.hbm_bytes_per_s)
    }
}

/// Parses one hardware profile.
pub fn parse(file: &str, text: &str) -> Result<HardwareProfile, LoadError> {
    let raw: RawHardware = toml::from_str(text).map_err(|e| toml_error(file, None, text, e))?;
    let bad = |field: &str, msg: String| LoadError {
        file: file.to_string(),
        operator: None,
        field: Some(field.to_string()),
        line: text
            .lines()
            .position(|l| {
                l.trim_start()
                    .starts_with(field.rsplit('.').next().unwrap_or(field))
            })
            .map(|i| i + 1)
            .or(Some(line_of(text, 0))),
        msg,
    };
    if !(raw.hbm_bytes_per_s.is_finite() && raw.hbm_bytes_per_s > 0.0) {
        return Err(bad(
            "hbm_bytes_per_s",
            format!("{} is not a positive rate", raw.hbm_bytes_per_s),
        ));
    }
    for (d, v) in &raw.peak_flops {
        if !crate::suite::DTYPES.contains(&d.as_str()) {
            return Err(bad(
                &format!("peak_flops.{d}"),
                format!("unknown dtype `{d}`"),
            ));
        }
        if !(v.is_finite() && *v > 0.0) {
            return Err(bad(
                &format!("peak_flops.{d}"),
                format!("{v} is not a positive rate"),
            ));
        }
    }
    Ok(HardwareProfile {
        name: raw.name,
        key: raw.key,
        arch: raw.arch,
        sm_count: raw.sm_count,
        l2_bytes: raw.l2_bytes,
        hbm_bytes: raw.hbm_bytes,
        hbm_bytes_per_s: raw.hbm_bytes_per_s,
        peak_flops: raw.peak_flops,
        sources: raw.sources,
        file: file.to_string(),
    })
}

/// Loads every problems/hardware/*.toml, sorted by key; keys must be unique.
pub fn load_all(source: &SuiteSource) -> Result<Vec<HardwareProfile>, LoadError> {
    let mut out: Vec<HardwareProfile> = Vec::new();
    for f in source.list("hardware") {
        if !f.ends_with(".toml") {
            continue;
        }
        let rel = format!("hardware/{f}");
        let file = source.display_path(&rel);
        let text = source.read(&rel).unwrap_or_default();
        let hw = parse(&file, &text)?;
        if let Some(other) = out.iter().find(|h| h.key.eq_ignore_ascii_case(&hw.key)) {
            return Err(LoadError {
                file,
                operator: None,
                field: Some("key".into()),
                line: None,
                msg: format!("duplicate hardware key `{}` (also {})", hw.key, other.file),
            });
        }
        out.push(hw);
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// Profiles measured on this machine by `atrex-tui calibrate`: the datasheet profile with the
/// measured copy bandwidth, keyed `KEY@calibrated` (compute peaks stay the datasheet's).
pub fn calibrated_variants(base: &[HardwareProfile]) -> Vec<HardwareProfile> {
    let Some(dir) = dirs::cache_dir().map(|d| d.join("atrex-tui")) else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("calibration-") && name.ends_with(".json")) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let (Some(key), Some(bw)) = (
            doc["hardware_key"].as_str(),
            doc["copy_bytes_per_s"].as_f64(),
        ) else {
            continue;
        };
        let Some(b) = base.iter().find(|h| h.key == key) else {
            continue;
        };
        if !(bw.is_finite() && bw > 0.0) {
            continue;
        }
        let mut h = b.clone();
        h.key = format!("{key}@calibrated");
        h.name = format!("{} (measured copy bandwidth)", b.name);
        h.hbm_bytes_per_s = bw;
        if let Some(r) = doc["mma_bf16_flops_per_s"].as_f64() {
            h.sources.insert(
                "peak_flops".into(),
                format!(
                    "{} (kept: mma.sync m16n8k16 bf16 measured {:.0} TFLOP/s on this GPU; on Hopper \
                     the datasheet rate needs wgmma, so the measured rate is not a ceiling)",
                    b.sources.get("peak_flops").map(String::as_str).unwrap_or("datasheet"),
                    r / 1e12
                ),
            );
        }
        h.sources.insert(
            "hbm_bytes_per_s".into(),
            format!(
                "measured by `atrex-tui calibrate` on {} ({})",
                doc["gpu"].as_str().unwrap_or("?"),
                e.path().display()
            ),
        );
        h.file = e.path().display().to_string();
        if !out.iter().any(|o: &HardwareProfile| o.key == h.key) {
            out.push(h);
        }
    }
    out
}

/// The hardware profile that matches a device, by name (H200, H100, H20, B200).
pub fn profile_for_device<'a>(
    profiles: &'a [HardwareProfile],
    device_name: &str,
) -> Option<&'a HardwareProfile> {
    let n = device_name.to_uppercase();
    let key = if n.contains("H200") {
        "H200"
    } else if n.contains("H100") {
        "H100_SXM"
    } else if n.contains("H20") {
        "H20"
    } else if n.contains("B200") {
        "B200"
    } else {
        return None;
    };
    profiles.iter().find(|h| h.key == key)
}
