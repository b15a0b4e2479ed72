//! `atrex-tui doctor`: what this machine offers. Never prints a key; always exits 0.

use crate::suite::Workspace;
use serde_json::json;

/// Terminal colour support from the environment.
pub fn colour_support() -> &'static str {
    let ct = std::env::var("COLORTERM")
        .unwrap_or_default()
        .to_lowercase();
    if ct.contains("truecolor") || ct.contains("24bit") {
        return "truecolor";
    }
    let term = std::env::var("TERM").unwrap_or_default();
    if term.contains("256color") {
        "256 colours"
    } else if term.is_empty() || term == "dumb" {
        "none (not a terminal or TERM unset)"
    } else {
        "16 colours"
    }
}

/// `ncu` on PATH or in the CUDA installation.
pub fn find_ncu() -> Option<std::path::PathBuf> {
    crate::engine::locate::find_tool("ncu")
}

/// Which LLM endpoint is configured, without any secret.
pub fn llm_endpoint() -> Option<String> {
    if let Ok(url) = std::env::var("OPENAI_BASE_URL") {
        let key = if std::env::var("OPENAI_API_KEY").is_ok() {
            "key set"
        } else {
            "no key"
        };
        return Some(format!("OpenAI-compatible at {url} ({key})"));
    }
    if std::env::var("OPENAI_API_KEY").is_ok() {
        return Some("OpenAI (key set)".into());
    }
    if std::env::var("ANTHROPIC_API_KEY").is_ok() {
        return Some("Anthropic Messages API (key set)".into());
    }
    None
}

pub fn run(ws: &Workspace, as_json: bool) -> Result<i32, String> {
    let suite = crate::suite::Suite::load(ws.suite_source());
    let probe = crate::engine::client::probe_blocking(0);
    let ncu = find_ncu();
    let llm = llm_endpoint();
    let colours = colour_support();
    if as_json {
        let doc = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "workspace": ws.dir.display().to_string(),
            "workspace_reason": ws.reason,
            "suite": match &suite { Ok(s) => json!({"source": s.source.describe(), "operators": s.problems.len(), "shapes": s.shape_count()}), Err(e) => json!({"error": e.to_string()}) },
            "gpu": match &probe { Ok(p) => serde_json::to_value(p).unwrap_or_default(), Err(e) => json!({"error": e}) },
            "ncu": ncu.as_ref().map(|p| p.display().to_string()),
            "llm_endpoint": llm,
            "terminal_colours": colours,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    println!("atrex-tui {}", env!("CARGO_PKG_VERSION"));
    println!("workspace:  {} ({})", ws.dir.display(), ws.reason);
    match &suite {
        Ok(s) => println!(
            "suite:      {} — {} operators, {} shapes",
            s.source.describe(),
            s.problems.len(),
            s.shape_count()
        ),
        Err(e) => println!("suite:      error: {e}"),
    }
    match &probe {
        Ok(p) => {
            println!("driver:     CUDA {} (libcuda found)", p.driver_version);
            println!(
                "nvrtc:      {}",
                p.nvrtc_version
                    .as_deref()
                    .unwrap_or("not found: kernels cannot be compiled")
            );
            if p.devices.is_empty() {
                println!("gpus:       none visible");
            }
            for d in &p.devices {
                println!(
                    "gpu {}:      {} · sm_{}{} · {} SMs · L2 {} MiB · {:.1} GiB · SM clock {} MHz · memory clock {} MHz",
                    d.index,
                    d.name,
                    d.cc_major,
                    d.cc_minor,
                    d.sm_count,
                    d.l2_bytes >> 20,
                    d.memory_bytes as f64 / (1u64 << 30) as f64,
                    d.sm_clock_mhz,
                    d.mem_clock_mhz
                );
            }
        }
        Err(e) => println!("gpu:        unavailable ({e}); browse, replay and edit still work"),
    }
    match &ncu {
        Some(p) => println!("ncu:        {}", p.display()),
        None => println!("ncu:        not found (deep profiles unavailable)"),
    }
    match &llm {
        Some(s) => println!("llm:        {s}"),
        None => println!("llm:        none configured (the built-in tuner is used)"),
    }
    println!("colours:    {colours}");
    Ok(0)
}
