//! `atrex-tui doctor`: what this machine offers. Never prints a key. Exits 1 when anything it
//! reports is wrong (settings, suite, workers file or configured workers, workspace, standing
//! files), 0 otherwise: a machine without a GPU, NVRTC or ncu is said, not wrong.

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
    crate::worker::locate::find_tool("ncu")
}

/// The settings file in use and everything wrong with it.
pub struct ConfigReport {
    /// The settings as far as they could be read.
    pub settings: crate::config::Settings,
    pub path: Option<std::path::PathBuf>,
    /// "read", "not present (defaults)", or "none".
    pub state: String,
    pub problems: Vec<String>,
    /// The agent's backend as configured (after the environment), without secrets.
    pub llm: String,
}

/// Checks the settings file (`--config`, else the default) as the TUI and `agent` read it.
pub fn check_config(path: Option<&std::path::Path>) -> ConfigReport {
    use crate::agent::config;
    use crate::config::Settings;
    let mut problems = Vec::new();
    let mut key_refused = None;
    let (state, mut settings) = match path {
        None => (
            "none (no config directory)".to_string(),
            Settings::default(),
        ),
        Some(p) if !p.exists() => (
            "not present: defaults in use".to_string(),
            Settings::default(),
        ),
        Some(p) => {
            let (s, found) = Settings::diagnose(p);
            for e in &found {
                if let crate::error::ConfigError::KeyFileNotPrivate { mode, .. } = e {
                    key_refused = Some(format!(
                        "the settings file's key is refused (mode {mode:04o}, not private to its owner)"
                    ));
                }
            }
            problems.extend(found.iter().map(|e| e.to_string()));
            ("read".into(), s)
        }
    };
    // A refused key is not used, as `agent` and the TUI refuse the file.
    if key_refused.is_some() {
        settings.agent.api_key = None;
        settings.agent.anthropic_api_key = None;
    }
    let llm = match config::resolve(&settings.agent, None) {
        Ok(c) => match &c.endpoint {
            None => "the built-in tuner (no LLM backend configured)".to_string(),
            Some(e) => format!(
                "{} · model {} · {} ({}) · {}",
                c.backend.name(),
                e.model,
                e.base_url,
                match (e.key.is_empty(), &key_refused) {
                    (false, None) => "key set".to_string(),
                    (false, Some(why)) => format!("key set from the environment; {why}"),
                    (true, None) => "no key".to_string(),
                    (true, Some(why)) => format!("no key: {why}"),
                },
                if c.budget.tools.enabled {
                    format!("tools on: {} per iteration", c.budget.tools.describe())
                } else {
                    "tools off: one reply per iteration".to_string()
                }
            ),
        },
        Err(e) => {
            problems.push(format!("agent: {e}"));
            format!(
                "{} configured but unusable{}",
                settings.agent.backend.map(|b| b.name()).unwrap_or("tuner"),
                key_refused
                    .as_ref()
                    .map(|why| format!(" (no key: {why})"))
                    .unwrap_or_default()
            )
        }
    };
    ConfigReport {
        settings,
        path: path.map(|p| p.to_path_buf()),
        state,
        problems,
        llm,
    }
}

/// NVRTC as the worker finds it: the version when it loads here, else where it was looked for.
pub fn nvrtc_status() -> Result<String, String> {
    let dirs = crate::worker::locate::library_dirs();
    if let Some(v) = crate::worker::locate::nvrtc_version() {
        return Ok(v);
    }
    if let Some(d) = dirs.first() {
        return Ok(format!(
            "found in {} (the worker adds it to its loader path)",
            d.display()
        ));
    }
    let roots: Vec<String> = crate::worker::locate::cuda_roots()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    Err(format!(
        "not found: kernels cannot be compiled. Looked on the loader path (LD_LIBRARY_PATH, ldconfig), in {}, and in NVIDIA's Python wheels (virtual environment, conda, user and system site); install the CUDA toolkit or set CUDA_HOME, or pip install nvidia-cuda-nvrtc nvidia-cuda-runtime",
        if roots.is_empty() {
            "CUDA_HOME, /usr/local/cuda*, /opt/cuda (none exist)".to_string()
        } else {
            roots.join(", ")
        }
    ))
}

/// How compiles on this machine are confined: a compiler process started to confine itself as
/// for a compile, and asked.
pub fn compiler_confinement() -> Result<
    crate::worker::compile_child::confine::Confinement,
    crate::worker::compile_child::ChildError,
> {
    use crate::worker::compile_child;
    compile_child::probe(&compile_child::child_exe())
}

/// Why the workspace cannot be used (read, or created where it does not exist yet), if so.
pub fn workspace_problem(ws: &Workspace) -> Option<String> {
    let d = &ws.dir;
    match std::fs::metadata(d) {
        Ok(m) if !m.is_dir() => Some(format!("{}: the workspace is not a directory", d.display())),
        Ok(m) => {
            if let Err(e) = std::fs::read_dir(d) {
                Some(format!(
                    "{}: the workspace cannot be read: {e}",
                    d.display()
                ))
            } else if m.permissions().readonly() {
                Some(format!(
                    "{}: the workspace is read-only: records, sessions and kernels cannot be written",
                    d.display()
                ))
            } else {
                None
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Created on first write: its nearest existing folder must be one.
            let above = d.ancestors().skip(1).find(|a| a.exists())?;
            (!above.is_dir()).then(|| {
                format!(
                    "{}: the workspace cannot be created: {} is not a directory",
                    d.display(),
                    above.display()
                )
            })
        }
        Err(e) => Some(format!(
            "{}: the workspace cannot be used: {e}",
            d.display()
        )),
    }
}

/// What `doctor` finds: every check's outcome, and the problems among them.
struct Findings {
    suite: Result<crate::suite::Suite, crate::suite::LoadError>,
    probe: Result<crate::contract::protocol::ProbeInfo, crate::pool::WorkerError>,
    ncu: Option<std::path::PathBuf>,
    cfg: ConfigReport,
    pool: super::doctor_workers::WorkersReport,
    nvrtc: Result<String, String>,
    colours: &'static str,
    confinement: Result<
        crate::worker::compile_child::confine::Confinement,
        crate::worker::compile_child::ChildError,
    >,
    standing: Option<(crate::standing::Standing, crate::standing::Tally)>,
    ws_problem: Option<String>,
    /// Everything reported that is wrong; a missing GPU, NVRTC or ncu is not.
    problems: Vec<String>,
}

pub fn run(
    ws: &Workspace,
    config: Option<&std::path::Path>,
    workers: Option<&std::path::Path>,
    as_json: bool,
) -> Result<i32, String> {
    let f = check(ws, config, workers);
    let code = if f.problems.is_empty() { 0 } else { 1 };
    if as_json {
        let doc = findings_json(ws, &f);
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        print_findings(ws, &f);
    }
    Ok(code)
}

/// Runs every check.
fn check(
    ws: &Workspace,
    config: Option<&std::path::Path>,
    workers: Option<&std::path::Path>,
) -> Findings {
    let suite = crate::suite::Suite::load(ws.suite_source());
    let probe = crate::pool::client::probe_blocking(0);
    let ncu = find_ncu();
    let cfg_path = config
        .map(|p| p.to_path_buf())
        .or_else(crate::config::Settings::default_path);
    let cfg = check_config(cfg_path.as_deref());
    let pool = super::doctor_workers::check(workers, &cfg.settings);
    let nvrtc = match &probe {
        Ok(p) => match &p.nvrtc_version {
            Some(v) => Ok(v.clone()),
            None => nvrtc_status(),
        },
        Err(_) => nvrtc_status(),
    };
    let colours = colour_support();
    let confinement = compiler_confinement();
    // The standing of this GPU's profile (the default profile without a GPU).
    let gpu_name = probe
        .as_ref()
        .ok()
        .and_then(|p| p.devices.first())
        .map(|d| d.name.clone());
    let standing = suite.as_ref().ok().map(|s| {
        let key = gpu_name
            .as_deref()
            .and_then(|g| crate::suite::hardware::profile_for_device(&s.hardware, g))
            .map(|h| h.key.clone())
            .unwrap_or_else(|| crate::config::Settings::default().hardware);
        let view = crate::standing::Store::load(ws, s).view(&key, gpu_name.as_deref());
        let t = view.tally(s, crate::suite::PhaseFilter::All);
        (view, t)
    });
    // Everything reported that is wrong; a missing GPU, NVRTC or ncu is not.
    let mut problems: Vec<String> = Vec::new();
    let ws_problem = workspace_problem(ws);
    problems.extend(ws_problem.iter().cloned());
    problems.extend(cfg.problems.iter().cloned());
    if let Err(e) = &suite {
        problems.push(format!("suite: {e}"));
    }
    if let Some((v, _)) = &standing {
        problems.extend(v.problems.iter().cloned());
    }
    problems.extend(pool.problems());
    Findings {
        suite,
        probe,
        ncu,
        cfg,
        pool,
        nvrtc,
        colours,
        confinement,
        standing,
        ws_problem,
        problems,
    }
}

/// `doctor --json`.
fn findings_json(ws: &Workspace, f: &Findings) -> serde_json::Value {
    json!({
        "ok": f.problems.is_empty(),
        "problems": f.problems,
        "version": env!("CARGO_PKG_VERSION"),
        "workspace": ws.dir.display().to_string(),
        "workspace_reason": ws.reason,
        "workspace_problem": f.ws_problem,
        "config": {
            "path": f.cfg.path.as_ref().map(|p| p.display().to_string()),
            "state": f.cfg.state,
            "problems": f.cfg.problems,
        },
        "suite": match &f.suite { Ok(s) => json!({"source": s.source.describe(), "operators": s.problems.len(), "shapes": s.shape_count()}), Err(e) => json!({"error": e.to_string()}) },
        "gpu": match &f.probe { Ok(p) => serde_json::to_value(p).unwrap_or_default(), Err(e) => json!({"error": e.to_string()}) },
        "nvrtc": match &f.nvrtc { Ok(v) => json!({"version": v}), Err(e) => json!({"error": e.to_string()}) },
        "compiler_confinement": match &f.confinement {
            Ok(c) => json!({"active": c.active(), "confinement": c, "text": c.describe()}),
            Err(e) => json!({"active": false, "error": e.to_string()}),
        },
        "ncu": f.ncu.as_ref().map(|p| p.display().to_string()),
        "llm": f.cfg.llm,
        "workers": f.pool.to_json(),
        "terminal_colours": f.colours,
        "standing": f.standing.as_ref().map(|(v, t)| json!({
            "hardware": v.hardware,
            "file": v.file.display().to_string(),
            "source": v.describe(),
            "measured": t.measured,
            "stale": t.stale,
            "missing": t.missing,
            "problems": v.problems,
        })),
    })
}

/// `doctor`'s text: a line per check, then the problems.
fn print_findings(ws: &Workspace, f: &Findings) {
    println!("atrex-tui {}", env!("CARGO_PKG_VERSION"));
    println!("workspace:  {} ({})", ws.dir.display(), ws.reason);
    if let Some(p) = &f.ws_problem {
        println!("  problem:  {p}");
    }
    match &f.cfg.path {
        Some(p) => println!("config:     {} ({})", p.display(), f.cfg.state),
        None => println!("config:     {}", f.cfg.state),
    }
    for e in &f.cfg.problems {
        println!("  problem:  {e}");
    }
    match &f.suite {
        Ok(s) => println!(
            "suite:      {} — {} operators, {} shapes",
            s.source.describe(),
            s.problems.len(),
            s.shape_count()
        ),
        Err(e) => println!("suite:      error: {e}"),
    }
    if let Some((v, t)) = &f.standing {
        println!(
            "standing:   {} {} — {} measured, {} stale, {} without a record",
            v.hardware,
            v.describe(),
            t.measured,
            t.stale,
            t.missing
        );
        for p in &v.problems {
            println!("  problem:  {p}");
        }
    }
    match &f.probe {
        Ok(p) => {
            println!("driver:     CUDA {} (libcuda found)", p.driver_version);
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
    match &f.nvrtc {
        Ok(v) => println!("nvrtc:      {v}"),
        Err(e) => println!("nvrtc:      {e}"),
    }
    match &f.confinement {
        Ok(c) => println!("compiler confinement: {}", c.describe()),
        Err(e) => println!("compiler confinement: unknown ({e})"),
    }
    match &f.ncu {
        Some(p) => println!("ncu:        {}", p.display()),
        None => println!("ncu:        not found (deep profiles unavailable)"),
    }
    println!("llm:        {}", f.cfg.llm);
    f.pool.print();
    println!("colours:    {}", f.colours);
    if f.problems.is_empty() {
        println!("result:     nothing wrong");
    } else {
        println!(
            "result:     {} problem{} (exit status 1):",
            f.problems.len(),
            if f.problems.len() == 1 { "" } else { "s" }
        );
        for p in &f.problems {
            println!("  - {p}");
        }
    }
}
