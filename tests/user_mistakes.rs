//! What a user can get wrong: files that are not sessions, settings that do not exist or do not
//! parse, keys in files others can read. Every mistake is named; nothing is destroyed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(common::exe());
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("ATREX_TUI_CONFIG_DIR", tempdir("no-config"))
        .stdin(std::process::Stdio::null());
    c
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atrex-mistakes-{name}-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&d);
    d
}

fn run(c: &mut Command) -> (i32, String, String) {
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn private(p: &Path, mode: u32) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// `--resume` of files that are not sessions: refused, and the bytes are as they were.
#[test]
fn resuming_what_is_not_a_session_changes_nothing() {
    let d = tempdir("resume");
    let notes = d.join("notes.json");
    std::fs::write(&notes, "{\"title\": \"notes\", \"n\": [1, 2, 3]}\n").unwrap();
    let blob = d.join("blob.bin");
    let bytes: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    std::fs::write(&blob, &bytes).unwrap();
    let newer = d.join("newer.jsonl");
    std::fs::write(
        &newer,
        "{\"v\":1,\"seq\":1,\"t\":1.0,\"kind\":\"run_start\",\"tool_version\":\"0.1.0\",\"suite\":\"s\",\"suite_version\":\"1\"}\n{\"v\":99,\"seq\":2,\"t\":2.0,\"kind\":\"future\"}\n",
    )
    .unwrap();
    for (f, needle) in [
        (&notes, "not an atrex-tui session"),
        (&blob, "not an atrex-tui session"),
        (&newer, "newer atrex-tui"),
    ] {
        let before = std::fs::read(f).unwrap();
        let (code, _, err) = run(bin().arg("--resume").arg(f));
        assert_ne!(code, 0, "{err}");
        assert!(
            err.contains("not changed") || err.contains("nothing was changed"),
            "{err}"
        );
        assert!(err.contains(needle), "{err}");
        assert_eq!(std::fs::read(f).unwrap(), before, "{} changed", f.display());
        assert!(
            !std::fs::read_dir(&d).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("damaged")),
            "nothing set aside for a refused file"
        );
    }
}

#[test]
fn a_missing_config_file_is_an_error_for_every_command() {
    for args in [
        vec!["suite"],
        vec!["doctor"],
        vec!["replay", "demo-hand-edits.jsonl", "--json"],
    ] {
        let (code, _, err) = run(bin()
            .args(["--config", "/nonexistent/atrex.toml"])
            .args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("/nonexistent/atrex.toml: no such settings file"),
            "{err}"
        );
    }
}

/// A mistyped `--workspace` is named, not replaced by the built-in suite; an existing empty
/// folder is a workspace as before.
#[test]
fn a_missing_workspace_folder_is_an_error() {
    for args in [vec!["suite"], vec!["doctor"], vec!["export", "rms_norm"]] {
        let (code, out, err) = run(bin().args(["--workspace", "/nonexistent/x"]).args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("/nonexistent/x: no such folder (given with --workspace)"),
            "{err}"
        );
        assert!(out.is_empty(), "{out}");
    }
    let file = tempdir("ws-file").join("not-a-folder");
    std::fs::write(&file, "").unwrap();
    let (code, _, err) = run(bin().arg("--workspace").arg(&file).arg("suite"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not-a-folder: not a folder"), "{err}");

    let empty = tempdir("ws-empty");
    let (code, out, err) = run(bin().arg("--workspace").arg(&empty).arg("suite"));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rms_norm"), "{out}");
}

/// The TUI refuses to start on a settings file with a bad [agent] table, naming file and line,
/// before the terminal is touched.
#[test]
fn the_tui_validates_the_agent_settings_at_start() {
    let d = tempdir("agent-cfg");
    let cfg = d.join("config.toml");
    for (text, needle) in [
        (
            "theme = \"dark\"\n[agent]\nbackend = \"gpt\"\n",
            "config.toml:3",
        ),
        ("[agent]\nbackend = \"openai\"\nmodle = \"m\"\n", "modle"),
    ] {
        std::fs::write(&cfg, text).unwrap();
        let (code, _, err) = run(bin().arg("--config").arg(&cfg));
        assert_ne!(code, 0, "{err}");
        assert!(err.contains(needle) && err.contains("[agent]"), "{err}");
    }
    std::fs::write(
        &cfg,
        "[agent]\nbackend = \"openai\"\nmodel = \"m\"\napi_key = \"sk-abcdefghijklmnopqrstuvwxyz012345\"\n",
    )
    .unwrap();
    private(&cfg, 0o644);
    let (code, _, err) = run(bin().arg("--config").arg(&cfg));
    assert_ne!(code, 0);
    assert!(err.contains("0644") && err.contains("chmod 600"), "{err}");
    assert!(!err.contains("sk-abc"), "{err}");
}

/// `doctor` reports the settings file in use, everything wrong with it, and the backend it
/// configures; never a key. A key in a file others can read is refused, not "set", and a
/// settings file with errors makes doctor exit 1.
#[test]
fn doctor_reports_the_config_and_its_problems() {
    let d = tempdir("doctor-cfg");
    let cfg = d.join("config.toml");
    std::fs::write(
        &cfg,
        "theme = \"dark\"\n[agent]\nbackend = \"openai\"\nmodel = \"kernel-model\"\napi_key = \"sk-abcdefghijklmnopqrstuvwxyz012345\"\n",
    )
    .unwrap();
    private(&cfg, 0o644);
    let doctor = || {
        let mut c = bin();
        c.env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .arg("--config")
            .arg(&cfg)
            .arg("doctor");
        c
    };
    let (code, out, _) = run(&mut doctor());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("config:     {}", cfg.display())),
        "{out}"
    );
    assert!(out.contains("0644") && out.contains("chmod 600"), "{out}");
    assert!(
        out.contains("llm:        openai · model kernel-model"),
        "{out}"
    );
    assert!(!out.contains("key set"), "a refused key is not set: {out}");
    assert!(
        out.contains("no key: the settings file's key is refused (mode 0644"),
        "{out}"
    );
    assert!(
        out.contains("result:     1 problem (exit status 1)"),
        "{out}"
    );
    assert!(out.contains("nvrtc:"), "an NVRTC line always: {out}");
    assert!(!out.contains("sk-abc"), "{out}");
    // Once private, the key is set and nothing is wrong.
    private(&cfg, 0o600);
    let (code, out, _) = run(&mut doctor());
    assert!(out.contains("(key set)"), "{out}");
    assert_eq!(code, 0, "{out}");
    std::fs::write(&cfg, "thme = \"dark\"\n[agent]\nbackend = \"gpt\"\n").unwrap();
    let (code, out, _) = run(&mut doctor());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("  - ") && out.contains("config.toml:1") && out.contains("thme"),
        "{out}"
    );
    let (code, out, _) = run(doctor().arg("--json"));
    assert_eq!(code, 1, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["ok"], false, "{out}");
    let problems = doc["config"]["problems"].to_string();
    assert!(
        problems.contains("config.toml:1") && problems.contains("thme"),
        "{problems}"
    );
    assert!(
        problems.contains("config.toml:3") && problems.contains("gpt"),
        "{problems}"
    );
    let all = doc["problems"].to_string();
    assert!(
        all.contains("config.toml:1") && all.contains("config.toml:3"),
        "{all}"
    );
    assert!(doc["nvrtc"].is_object());
}

/// A clean environment (no settings file, an empty workspace) is nothing wrong, with or without
/// a GPU: exit 0, `"ok": true`. A workspace named with `--workspace` that is a file is refused
/// before any command runs (exit 2, as every usage error), doctor included.
#[test]
fn doctor_exits_0_when_nothing_is_wrong_and_a_workspace_that_is_a_file_is_refused() {
    let d = tempdir("doctor-clean");
    let ws = d.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let (code, out, err) = run(bin().arg("--workspace").arg(&ws).args(["doctor", "--json"]));
    assert_eq!(code, 0, "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["ok"], true, "{out}");
    assert_eq!(doc["problems"], serde_json::json!([]), "{out}");
    let (code, out, _) = run(bin().arg("--workspace").arg(&ws).arg("doctor"));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("result:     nothing wrong"), "{out}");
    let file = d.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let (code, out, err) = run(bin().arg("--workspace").arg(&file).arg("doctor"));
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&file.display().to_string()) && err.contains("not a folder"),
        "{err}"
    );
}

#[test]
fn a_phase_view_counts_the_shapes_of_its_operators() {
    let (_, out, _) = run(bin().args(["suite", "--phase", "decode"]));
    assert!(
        out.lines()
            .next()
            .unwrap()
            .starts_with("26 operators, 369 shapes · phase decode"),
        "{out}"
    );
    let (_, out, _) = run(bin().args(["suite"]));
    assert!(
        out.lines()
            .next()
            .unwrap()
            .starts_with("30 operators, 440 shapes · phase all"),
        "{out}"
    );
}

/// `--define` names that the kernel's plan does not have (most likely typos) are refused before
/// anything runs or is recorded, naming the kernel and the plan's parameters; a value outside a
/// parameter's tune list is not a mistake (it joins the list: docs/kernel-contract.md).
#[test]
fn a_define_of_an_unknown_parameter_is_refused_before_anything_runs() {
    let d = tempdir("define");
    let session = d.join("s.jsonl");
    let (code, _, err) = run(bin().args(["bench", "unified_attention", "--define", "WRAPS=8"]));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("unified_attention baseline")
            && err.contains("`WRAPS` is not a tunable parameter of its plan")
            && err.contains("BKV, PV_SPLIT, WARPS"),
        "{err}"
    );
    let (code, _, err) = run(bin().args(["compile", "rms_norm", "--define", "BLOCK"]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("expected KEY=VALUE"), "{err}");
    let (code, _, err) = run(bin()
        .args(["measure", "unified_attention", "--kernel"])
        .arg("problems/unified_attention/baseline.cu")
        .args(["--define", "BKVV=48", "--session"])
        .arg(&session));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`BKVV` is not a tunable parameter"), "{err}");
    assert!(!session.exists(), "nothing is recorded");
    std::fs::remove_dir_all(&d).ok();
}

/// `profile --source-csv`: a source page saved from ncu is summarised without a GPU; a file that
/// is not one is named, and profiling options do not go with it.
#[test]
fn a_saved_source_page_is_summarised_and_a_wrong_file_named() {
    let page = "tests/fixtures/ncu/h200-unified_attention-shape12-source.csv";
    let (code, out, err) = run(bin().args(["profile", "unified_attention", "--source-csv", page]));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("where the warps wait: unified_attention_wgmma · 135368 samples"),
        "{out}"
    );
    assert!(out.contains("37.2%  mbarrier [R25+URZ+0x30010]"), "{out}");
    assert!(out.contains("hot instructions:"), "{out}");
    let (code, out, err) = run(bin().args([
        "profile",
        "unified_attention",
        "--source-csv",
        page,
        "--json",
    ]));
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["source"][0]["samples"], 135368);
    assert_eq!(d["source"][0]["hot"].as_array().unwrap().len(), 12);
    let d = tempdir("source-page");
    let bad = d.join("not-a-page.csv");
    std::fs::write(&bad, "==PROF== Disconnected\n").unwrap();
    let (code, _, err) = run(bin()
        .args(["profile", "unified_attention", "--source-csv"])
        .arg(&bad));
    assert_eq!(code, 1);
    assert!(
        err.contains("not-a-page.csv: no kernel in it") && err.contains("--page source"),
        "{err}"
    );
    let (code, _, err) = run(bin().args([
        "profile",
        "unified_attention",
        "--source-csv",
        page,
        "--shape",
        "3",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    std::fs::remove_dir_all(&d).ok();
}

/// `compile --sass -` prints the disassembly: with `--json` on the same stdout it is refused
/// before anything compiles, naming the way out.
#[test]
fn a_disassembly_to_stdout_does_not_go_into_the_json_document() {
    let (code, out, err) = run(bin().args(["compile", "rms_norm", "--sass", "-", "--json"]));
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("--sass FILE"), "{err}");
}

/// `bench --merge`: the committed block_scaled_mm results split in two parts join back to the
/// same document's S_op without a GPU; parts of another source, or a shape in both, are refused
/// with the file and the field named.
#[test]
fn bench_merge_joins_parts_and_refuses_mismatches() {
    let d = tempdir("merge");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/measurements/bench-best-block_scaled_mm.json"),
    )
    .unwrap();
    let whole: serde_json::Value = serde_json::from_str(&text).unwrap();
    let part = |keep: &dyn Fn(u64) -> bool, name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut p = whole.clone();
        let shapes: Vec<serde_json::Value> = whole["shapes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| keep(s["shape"].as_u64().unwrap()))
            .cloned()
            .collect();
        p["shapes"] = serde_json::Value::Array(shapes);
        p.as_object_mut().unwrap().remove("parts");
        p.as_object_mut().unwrap().remove("shapes_asked");
        edit(&mut p);
        let f = d.join(name);
        std::fs::write(&f, serde_json::to_string(&p).unwrap()).unwrap();
        f
    };
    let even = part(&|s| s % 2 == 0, "even.json", &|_| {});
    let odd = part(&|s| s % 2 == 1, "odd.json", &|_| {});
    let (code, out, err) = run(bin()
        .args(["bench", "--merge"])
        .arg(&even)
        .arg(&odd)
        .arg("--json"));
    assert_eq!(code, 0, "{err}");
    let m: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(m["shapes"].as_array().unwrap().len(), 24);
    assert!((m["s_op"].as_f64().unwrap() - whole["s_op"].as_f64().unwrap()).abs() < 1e-12);
    assert!(
        m["parts"][1]["file"]
            .as_str()
            .unwrap()
            .ends_with("odd.json"),
        "{}",
        m["parts"][1]["file"]
    );
    assert_eq!(
        m["sol_checked"], true,
        "the committed run's T_SOL is the suite's"
    );
    // Another source in one part.
    let other = part(&|s| s % 2 == 1, "other.json", &|p| {
        p["source_sha256"] = "0".repeat(64).into()
    });
    let (code, _, err) = run(bin().args(["bench", "--merge"]).arg(&even).arg(&other));
    assert_eq!(code, 1);
    assert!(err.contains("other.json: source_sha256 is"), "{err}");
    // A shape in both parts.
    let (code, _, err) = run(bin().args(["bench", "--merge"]).arg(&even).arg(&even));
    assert_eq!(code, 1);
    assert!(err.contains("shape 0 is in both"), "{err}");
    // A merge is not a measurement: it takes no kernel.
    let (code, _, err) = run(bin()
        .args(["bench", "--merge"])
        .arg(&even)
        .arg(&odd)
        .args(["--kernel", "x.cu"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}

/// A launch plan past the parser's limits (an expression in 20,000 parentheses), in the kernel
/// file or in a `--define` value, is a plan error naming its line (exit 1): neither atrex-tui
/// (which rewrites the plan for `--define`) nor its worker runs out of stack.
#[test]
fn a_plan_past_the_expression_limits_is_a_plan_error_not_an_abort() {
    let k = "tests/kernels/hostile_plan_deep_parens.cu";
    for cmd in ["bench", "compile"] {
        let (code, _, err) =
            run(bin().args([cmd, "rms_norm", "--kernel", k, "--define", "BLOCK=512"]));
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(
            err.contains("hostile_plan_deep_parens.cu: line 4")
                && err.contains("at most 4096")
                && err.len() < 1000,
            "{cmd}: {err}"
        );
    }
    // Without a define the worker reads the plan, before it looks for a GPU or NVRTC.
    let (code, out, err) = run(bin().args(["compile", "rms_norm", "--kernel", k]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("plan error") && out.contains("line 4") && out.contains("at most 4096"),
        "{out}{err}"
    );
    // The value of a define: the plan's tune line it would join (line 9 of the baseline).
    let deep = format!("MAX_THREADS={}T{}", "(".repeat(20_000), ")".repeat(20_000));
    for cmd in ["bench", "compile"] {
        let (code, _, err) = run(bin().args([cmd, "rms_norm", "--define", &deep]));
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(
            err.contains("line 9") && err.contains("at most 4096") && err.len() < 1000,
            "{cmd}: {err}"
        );
    }
}

/// A session another writer holds: `measure --session` refuses it naming the holder, before it
/// looks for a GPU, and leaves the file as it was.
#[test]
fn a_session_being_written_is_refused_naming_its_writer() {
    let d = tempdir("locked");
    let session = d.join("s.jsonl");
    std::fs::write(&session, "").unwrap();
    let lock = atrex_tui::session::SessionLock::take(&session).unwrap();
    let (code, _, err) = run(bin()
        .args(["measure", "rms_norm", "--kernel"])
        .arg("problems/rms_norm/baseline.cu")
        .arg("--session")
        .arg(&session));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "session {} is being written by ",
            session.display()
        )) && err.contains(&format!("(pid {} on ", std::process::id()))
            && err.contains(&format!("`atrex-tui replay {}`", session.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&session).unwrap(), b"", "nothing is recorded");
    drop(lock);
    std::fs::remove_dir_all(&d).ok();
}

/// `import-atrex-bench` exits like `diff`: 1 when something differs, so an error is 2 (a folder
/// that is not a benchmark checkout, `--write` without a workspace of its own), named on stderr.
#[test]
fn import_errors_exit_2_and_name_the_cause() {
    let not_bench = tempdir("not-bench");
    let (code, out, err) = run(bin().arg("import-atrex-bench").arg(&not_bench));
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.starts_with("atrex-tui: "), "{err}");
    assert!(err.contains(&not_bench.display().to_string()), "{err}");
    assert!(out.is_empty(), "{out}");
    // --write in a workspace without problems/ (the built-in suite): refused, exit 2.
    let bare = tempdir("import-bare-ws");
    let (code, _, err) = run(bin()
        .arg("import-atrex-bench")
        .arg(&not_bench)
        .arg("--write")
        .arg("--workspace")
        .arg(&bare));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--write needs a workspace"), "{err}");
    assert!(!bare.join("problems").exists());
}

/// A measuring command asked for JSON answers in JSON on stdout, also when it fails: no GPU
/// (exit 2), an unknown operator (exit 1). Without `--json` the same failures are one line on
/// stderr.
#[test]
fn bench_json_says_its_errors_as_json() {
    let gpu = Command::new(common::exe())
        .args(["doctor", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .is_some_and(|d| d["gpu"].get("error").is_none());
    let doc = |args: &[&str]| {
        let (code, out, err) = run(bin().args(args));
        let v: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}\n{err}"));
        assert!(err.is_empty(), "{args:?}: {err}");
        assert_eq!(v["exit"], code, "{args:?}: {v}");
        (code, v)
    };
    let (code, v) = doc(&["bench", "no_such_op", "--json"]);
    assert_eq!(code, 1);
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown operator `no_such_op`")),
        "{v}"
    );
    if gpu {
        eprintln!("SKIPPED (the no-GPU part): this machine has a GPU");
        return;
    }
    for args in [
        &["bench", "rms_norm", "--quick", "--json"][..],
        &["bench", "--all", "--json"][..],
    ] {
        let (code, v) = doc(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("no GPU: ")),
            "{args:?}: {v}"
        );
    }
    let (code, out, err) = run(bin().args(["bench", "rms_norm", "--quick"]));
    assert_eq!(code, 2);
    assert!(
        out.is_empty() && err.starts_with("atrex-tui: no GPU: "),
        "{out}{err}"
    );
}
