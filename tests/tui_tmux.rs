//! End to end: the real binary in tmux (send-keys, capture-pane). Skipped, with a message, when
//! tmux is not installed.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn capture(session: &str) -> String {
    tmux(&["capture-pane", "-p", "-t", session])
}

fn wait_for(session: &str, what: &str, secs: u64) -> String {
    let t0 = Instant::now();
    loop {
        let s = capture(session);
        if s.contains(what) {
            return s;
        }
        if t0.elapsed() > Duration::from_secs(secs) {
            panic!("screen never showed `{what}`:\n{s}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `tmux new-session -d -s NAME -x W -y H bash -c SCRIPT`. tmux's server exits when its last
/// session is killed (the previous test's), and a new session started in that moment fails
/// with "server exited unexpectedly": started again then.
fn new_session(name: &str, w: &str, h: &str, script: &str) -> bool {
    for _ in 0..5 {
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                name,
                "-x",
                w,
                "-y",
                h,
                "bash",
                "-c",
                script,
            ])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// One tmux test at a time (they share the tmux server and the machine's two cores).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Kill(String);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}

#[test]
fn starts_navigates_opens_help_and_quits_cleanly_in_tmux() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // This walk is the no-GPU first minute (the session picker); a GPU machine runs
    // `the_tui_measures_a_kernel_on_the_gpu_in_tmux` instead.
    let doctor = Command::new(common::exe())
        .args(["doctor", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok());
    if doctor.is_some_and(|d| d["gpu"].get("error").is_none()) {
        eprintln!("SKIPPED: this machine has a GPU");
        return;
    }
    if Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!("SKIPPED: tmux is not installed (apt-get install tmux to run this test)");
        return;
    }
    let exe = common::exe();
    let dir = std::env::temp_dir().join(format!("atrex-tmux-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cfg")).unwrap();
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui_ws");
    let session = format!("atrex-e2e-{}", std::process::id());
    let _kill = Kill(session.clone());
    // After the TUI exits, the shell reports the exit code and the terminal modes.
    let script = format!(
        "ATREX_TUI_CONFIG_DIR='{cfg}' '{exe}' --workspace '{ws}' --config '{cfg}/config.toml'; echo \"EXIT=$?\"; stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo; sleep 60",
        cfg = dir.join("cfg").display(),
        exe = exe.display(),
        ws = ws.display(),
    );
    // the session file goes to a temporary folder, not the fixture
    std::fs::write(
        dir.join("cfg/config.toml"),
        format!("sessions_dir = '{}'\n", dir.join("sessions").display()),
    )
    .unwrap();
    assert!(new_session(&session, "100", "30", &script));
    let s = wait_for(&session, "operators · all", 20);
    assert!(s.contains("paged_attention_decode"), "{s}");
    wait_for(&session, "no GPU: browse and replay only", 30);
    // Without a GPU the recorded sessions are offered (the built-in demos at least); Esc
    // dismisses the picker.
    let s = wait_for(&session, "open a recorded session?", 10);
    assert!(s.contains("demo-agent-tuner.jsonl"), "{s}");
    tmux(&["send-keys", "-t", &session, "Escape"]);
    let t0 = Instant::now();
    while capture(&session).contains("open a recorded session?") {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the picker did not close"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // navigate to rms_norm (the second operator) and see its baseline source
    tmux(&["send-keys", "-t", &session, "j"]);
    let s = wait_for(&session, "revisions · rms_norm", 5);
    assert!(s.contains("rms_norm v0 · full source"), "{s}");
    // p without a GPU (or ncu): one line in the log, nothing else.
    tmux(&["send-keys", "-t", &session, "p"]);
    wait_for(&session, "cannot profile rms_norm v0: no GPU", 5);
    // P filters by phase (rms_norm stays selected).
    tmux(&["send-keys", "-t", &session, "P"]);
    wait_for(&session, "operators · prefill", 5);
    tmux(&["send-keys", "-t", &session, "P", "P"]);
    let s = wait_for(&session, "operators · all", 5);
    assert!(s.contains("revisions · rms_norm"), "{s}");
    tmux(&["send-keys", "-t", &session, "Tab"]);
    wait_for(&session, "y accept", 5);
    tmux(&["send-keys", "-t", &session, "?"]);
    wait_for(&session, "keys · Esc closes", 5);
    // The capture may catch the overlay half drawn: wait for its rows.
    wait_for(&session, "accept the selected revision", 5);
    tmux(&["send-keys", "-t", &session, "Escape"]);
    let t0 = Instant::now();
    while capture(&session).contains("keys · Esc closes") {
        assert!(t0.elapsed() < Duration::from_secs(5), "help did not close");
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&["send-keys", "-t", &session, "q"]);
    let s = wait_for(&session, "EXIT=", 10);
    assert!(s.contains("EXIT=0"), "{s}");
    // the terminal is restored: canonical mode and echo are back, the alternate screen is gone
    let modes = wait_for(&session, "icanon", 5);
    assert!(
        modes.contains(" icanon") || modes.contains("\nicanon"),
        "{modes}"
    );
    assert!(
        !modes.contains("-icanon") && !modes.contains("-echo"),
        "{modes}"
    );
    assert!(
        !modes.contains("operators · all"),
        "the alternate screen was left:\n{modes}"
    );
    // nothing was done, so no session file was left behind
    let files: Vec<_> = std::fs::read_dir(dir.join("sessions"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(files.len(), 0, "{files:?}");
}

/// On a GPU machine: the TUI's worker comes up, `m` measures rms_norm's baseline (quick, all 56
/// shapes) and the log shows its S_op; the session records the results. Needs tmux and a GPU.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_tui_measures_a_kernel_on_the_gpu_in_tmux() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success()),
        "this GPU test needs tmux"
    );
    let exe = common::exe();
    let dir = std::env::temp_dir().join(format!("atrex-tmux-gpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cfg")).unwrap();
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui_ws");
    let session = format!("atrex-gpu-{}", std::process::id());
    let _kill = Kill(session.clone());
    std::fs::write(
        dir.join("cfg/config.toml"),
        format!("sessions_dir = '{}'\n", dir.join("sessions").display()),
    )
    .unwrap();
    let script = format!(
        "ATREX_TUI_CONFIG_DIR='{cfg}' '{exe}' --workspace '{ws}' --config '{cfg}/config.toml'; echo \"EXIT=$?\"; sleep 60",
        cfg = dir.join("cfg").display(),
        exe = exe.display(),
        ws = ws.display(),
    );
    assert!(new_session(&session, "160", "40", &script));
    wait_for(&session, "operators · all", 20);
    // One GPU: "worker ready"; several: "2/2 workers ready" and the pool line.
    let t0 = Instant::now();
    while !["worker ready", "workers ready"]
        .iter()
        .any(|w| capture(&session).contains(w))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the workers never came up:\n{}",
            capture(&session)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&["send-keys", "-t", &session, "j"]);
    wait_for(&session, "revisions · rms_norm", 5);
    let t0 = Instant::now();
    tmux(&["send-keys", "-t", &session, "m"]);
    wait_for(&session, "rms_norm v0: compiled ok", 30);
    let s = wait_for(&session, "rms_norm v0: S 0.", 120);
    eprintln!(
        "measured in the TUI in {:.1} s:\n{s}",
        t0.elapsed().as_secs_f64()
    );
    if let Ok(out) = std::env::var("OUT") {
        let _ = std::fs::write(PathBuf::from(out).join("tui-gpu.txt"), &s);
    }
    tmux(&["send-keys", "-t", &session, "q"]);
    let s = wait_for(&session, "EXIT=", 10);
    assert!(s.contains("EXIT=0"), "{s}");
    let files: Vec<_> = std::fs::read_dir(dir.join("sessions"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(files.len(), 1);
    let log = std::fs::read_to_string(files[0].path()).unwrap();
    let results = log.matches("\"shape_result\"").count();
    assert_eq!(results, 56, "one shape result per shape in the session");
}

/// `kill -INT` (and TERM, HUP) leave the terminal as they found it (canonical mode, echo, no
/// alternate screen) and the process exits with 128 + the signal, as a shell expects.
#[test]
fn a_signal_restores_the_terminal_and_exits_with_128_plus_the_signal() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !tmux_present() {
        return;
    }
    for (sig, number) in [
        ("INT", libc::SIGINT),
        ("TERM", libc::SIGTERM),
        ("HUP", libc::SIGHUP),
    ] {
        let dir = scratch(&format!("sig{sig}"), "");
        let session = format!("atrex-sig{sig}-{}", std::process::id());
        let _kill = Kill(session.clone());
        let script = format!(
            "{}; echo \"EXIT=$?\"; stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo; sleep 60",
            tui_command(&dir, "")
        );
        assert!(new_session(&session, "100", "30", &script));
        wait_for(&session, "operators · all", 20);
        let pid = tui_pid(&dir);
        // SAFETY: kill(2) passes no pointers; `pid` is the TUI this test started (its pid file).
        assert_eq!(unsafe { libc::kill(pid, number) }, 0);
        let modes = wait_for(&session, "icanon", 10);
        assert!(
            modes.contains(&format!("EXIT={}", 128 + number)),
            "SIG{sig}: {modes}"
        );
        assert!(
            !modes.contains("-icanon") && !modes.contains("-echo"),
            "SIG{sig} left the terminal raw:\n{modes}"
        );
        assert!(
            !modes.contains("operators · all"),
            "SIG{sig} left the alternate screen:\n{modes}"
        );
    }
}

/// Whether tmux runs here; says SKIPPED when not.
fn tmux_present() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: tmux is not installed (apt-get install tmux to run this test)");
    }
    ok
}

/// Whether this machine has a GPU (the walks below are the no-GPU ones).
fn has_gpu() -> bool {
    Command::new(common::exe())
        .args(["doctor", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .is_some_and(|d| d["gpu"].get("error").is_none())
}

/// A scratch folder with a copy of the fixture workspace (`ws`: the TUI writes `ws/kernels`)
/// and settings (`cfg/config.toml`: sessions in `sessions/`, then `extra`).
fn scratch(name: &str, extra: &str) -> PathBuf {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let dest = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), dest).unwrap();
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("atrex-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui_ws"),
        &dir.join("ws"),
    );
    std::fs::create_dir_all(dir.join("cfg")).unwrap();
    std::fs::write(
        dir.join("cfg/config.toml"),
        format!(
            "sessions_dir = '{}'\n{extra}",
            dir.join("sessions").display()
        ),
    )
    .unwrap();
    dir
}

/// The command line that starts the TUI of `dir` (its pid in `dir/pid`: the shell `exec`s it),
/// with `args` after the workspace and settings.
fn tui_command(dir: &std::path::Path, args: &str) -> String {
    format!(
        "ATREX_TUI_CONFIG_DIR='{d}/cfg' sh -c 'echo $$ > {d}/pid; exec {exe} --workspace {d}/ws --config {d}/cfg/config.toml {args}'",
        d = dir.display(),
        exe = common::exe().display(),
    )
}

/// The TUI's pid (written by `tui_command`).
fn tui_pid(dir: &std::path::Path) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(dir.join("pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the TUI never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until process `pid` is stopped (state `T` in /proc).
fn wait_stopped(pid: i32, session: &str) {
    let t0 = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // pid (comm) STATE ...: the state follows the last ')'.
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        if state.starts_with('T') {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the TUI did not stop ({stat}):\n{}",
            capture(session)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the no-GPU session picker and dismisses it.
fn dismiss_picker(session: &str) {
    wait_for(session, "open a recorded session?", 30);
    tmux(&["send-keys", "-t", session, "Escape"]);
    let t0 = Instant::now();
    while capture(session).contains("open a recorded session?") {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the picker did not close"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The revisions of `op` a session file holds, in file order: (rev, parent, source).
fn revisions(file: &std::path::Path, op: &str) -> Vec<(u64, Option<u64>, String)> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "revision" && v["op"] == op)
        .map(|v| {
            (
                v["rev"].as_u64().unwrap(),
                v["parent"].as_u64(),
                v["source"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `E` with a real editor: the TUI gives the terminal away, the save is recorded as a new
/// revision (its parent, the starting kernel, recorded before it), and the TUI takes the
/// terminal back without asking it anything and carries on. With vim (or vi) where installed,
/// and always with a one-line script as the editor.
#[test]
fn an_external_edit_is_recorded_and_the_tui_carries_on_in_tmux() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if has_gpu() {
        eprintln!("SKIPPED: this machine has a GPU (the walk is the no-GPU one)");
        return;
    }
    if !tmux_present() {
        return;
    }
    let vim = ["vim", "vi"].into_iter().find(|v| {
        Command::new(v)
            .args(["--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if vim.is_none() {
        eprintln!("no vim or vi here: the script editor only");
    }
    let mut editors: Vec<(&str, String)> = Vec::new();
    if let Some(v) = vim {
        // No settings, no swap or viminfo files: the keys below do what they say.
        editors.push((v, format!("{v} -u NONE -N -n -i NONE")));
    }
    editors.push(("script", String::new()));
    for (name, editor) in editors {
        let dir = scratch(&format!("edit-{name}"), "");
        let editor = if name == "script" {
            let script = dir.join("append.sh");
            std::fs::write(
                &script,
                "#!/bin/sh\necho '// appended by a script' >> \"$1\"\n",
            )
            .unwrap();
            format!("sh {}", script.display())
        } else {
            editor
        };
        let mut cfg = std::fs::read_to_string(dir.join("cfg/config.toml")).unwrap();
        cfg.push_str(&format!("editor = '{editor}'\n"));
        std::fs::write(dir.join("cfg/config.toml"), cfg).unwrap();
        let session = format!("atrex-edit-{name}-{}", std::process::id());
        let _kill = Kill(session.clone());
        let script = format!("{}; echo \"EXIT=$?\"; sleep 60", tui_command(&dir, ""));
        assert!(new_session(&session, "100", "30", &script));
        wait_for(&session, "operators · all", 20);
        dismiss_picker(&session);
        tmux(&["send-keys", "-t", &session, "j"]);
        wait_for(&session, "rms_norm v0 · full source", 5);
        tmux(&["send-keys", "-t", &session, "E"]);
        let added = if name == "script" {
            "// appended by a script"
        } else {
            // vim shows the file; append a line and write it out.
            let t0 = Instant::now();
            loop {
                let s = capture(&session);
                if s.contains("v0.cu") && !s.contains("operators · all") {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{name} did not open:\n{s}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            tmux(&["send-keys", "-t", &session, "G", "o"]);
            tmux(&["send-keys", "-t", &session, "-l", "// added in vim"]);
            tmux(&["send-keys", "-t", &session, "Escape"]);
            tmux(&["send-keys", "-t", &session, "-l", ":wq"]);
            tmux(&["send-keys", "-t", &session, "Enter"]);
            "// added in vim"
        };
        // Back in the TUI: the save is v1 from v0, and the editor's exit is logged.
        let s = wait_for(&session, "editor closed (exit status: 0)", 15);
        assert!(s.contains("rms_norm v1 by human (from v0)"), "{name}:\n{s}");
        assert!(s.contains("operators · all"), "{name}:\n{s}");
        assert!(s.contains("+1 −0"), "{name}: v1 is one line from v0:\n{s}");
        // It still runs: keys work, and q quits cleanly.
        tmux(&["send-keys", "-t", &session, "j"]);
        wait_for(&session, "revisions · silu_and_mul", 5);
        tmux(&["send-keys", "-t", &session, "q"]);
        let s = wait_for(&session, "EXIT=", 10);
        assert!(s.contains("EXIT=0"), "{name}:\n{s}");
        // The session file: v0 (the kernel edited) before v1, v1 one line more.
        let files: Vec<PathBuf> = std::fs::read_dir(dir.join("sessions"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let revs = revisions(&files[0], "rms_norm");
        let baseline =
            std::fs::read_to_string(dir.join("ws/problems/rms_norm/baseline.cu")).unwrap();
        assert_eq!(revs.len(), 2, "{name}: {revs:?}");
        assert_eq!((revs[0].0, revs[0].1), (0, None), "{name}");
        assert_eq!(
            revs[0].2, baseline,
            "{name}: v0 is the kernel that was edited"
        );
        assert_eq!((revs[1].0, revs[1].1), (1, Some(0)), "{name}");
        assert_eq!(
            revs[1].2,
            format!("{baseline}{added}\n"),
            "{name}: v1 is v0 and the added line"
        );
    }
}

/// `--resume FILE` then `q` without doing anything leaves the file byte for byte as it was
/// (a tracked demo session stays clean).
#[test]
fn resuming_and_quitting_leaves_the_session_as_it_was_in_tmux() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !tmux_present() {
        return;
    }
    let dir = scratch("resume-idle", "");
    std::fs::create_dir_all(dir.join("sessions")).unwrap();
    let demo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sessions/demo-hand-edits.jsonl");
    let original = std::fs::read(&demo).unwrap();
    let file = dir.join("sessions/demo-hand-edits.jsonl");
    std::fs::write(&file, &original).unwrap();
    let session = format!("atrex-resume-{}", std::process::id());
    let _kill = Kill(session.clone());
    let script = format!(
        "{}; echo \"EXIT=$?\"; sleep 60",
        tui_command(&dir, &format!("--resume {}", file.display()))
    );
    assert!(new_session(&session, "100", "30", &script));
    wait_for(&session, "operators · all", 20);
    // Let the workers' start (and its answer) happen before quitting.
    let t0 = Instant::now();
    // The header says "worker ready" or, where narrow, "… MHz ready"; "no GPU" without one.
    while !["no GPU", "worker ready", "workers ready", "MHz ready"]
        .iter()
        .any(|w| capture(&session).contains(w))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the workers never answered:\n{}",
            capture(&session)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&["send-keys", "-t", &session, "q"]);
    let s = wait_for(&session, "EXIT=", 10);
    assert!(s.contains("EXIT=0"), "{s}");
    assert!(
        std::fs::read(&file).unwrap() == original,
        "the resumed session changed:\n{}",
        String::from_utf8_lossy(&std::fs::read(&file).unwrap())
            .lines()
            .skip(original.iter().filter(|b| **b == b'\n').count())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Ctrl-Z suspends to the shell (the terminal restored, the process stopped) and `fg` brings
/// the TUI back, drawn whole and answering keys; `kill -TSTP` does the same.
#[test]
fn ctrl_z_suspends_and_fg_resumes_in_tmux() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if has_gpu() {
        eprintln!("SKIPPED: this machine has a GPU (the walk is the no-GPU one)");
        return;
    }
    if !tmux_present() {
        return;
    }
    let dir = scratch("suspend", "");
    let session = format!("atrex-suspend-{}", std::process::id());
    let _kill = Kill(session.clone());
    // An interactive shell: job control, as a terminal user has it.
    assert!(new_session(
        &session,
        "100",
        "30",
        "PS1='shell$ ' exec bash --norc --noprofile -i"
    ));
    wait_for(&session, "shell$", 10);
    tmux(&["send-keys", "-t", &session, "-l", &tui_command(&dir, "")]);
    tmux(&["send-keys", "-t", &session, "Enter"]);
    wait_for(&session, "operators · all", 20);
    dismiss_picker(&session);
    let pid = tui_pid(&dir);
    tmux(&["send-keys", "-t", &session, "C-z"]);
    wait_stopped(pid, &session);
    let s = wait_for(&session, "Stopped", 10);
    assert!(
        !s.contains("operators · all"),
        "the alternate screen was left:\n{s}"
    );
    tmux(&["send-keys", "-t", &session, "-l", "fg"]);
    tmux(&["send-keys", "-t", &session, "Enter"]);
    let s = wait_for(&session, "operators · all", 10);
    assert!(s.contains("continued after a suspend"), "{s}");
    tmux(&["send-keys", "-t", &session, "j"]);
    wait_for(&session, "revisions · rms_norm", 5);
    // SIGTSTP from elsewhere suspends the same way.
    // SAFETY: kill(2) passes no pointers; `pid` is the TUI this test started (its pid file).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTSTP) }, 0);
    wait_stopped(pid, &session);
    let t0 = Instant::now();
    while capture(&session).matches("Stopped").count() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{}",
            capture(&session)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&["send-keys", "-t", &session, "-l", "fg"]);
    tmux(&["send-keys", "-t", &session, "Enter"]);
    wait_for(&session, "revisions · rms_norm", 10);
    tmux(&["send-keys", "-t", &session, "q"]);
    let t0 = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the TUI did not quit:\n{}",
            capture(&session)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux(&["send-keys", "-t", &session, "-l", "echo \"EXIT=$?\""]);
    tmux(&["send-keys", "-t", &session, "Enter"]);
    let s = wait_for(&session, "EXIT=", 10);
    assert!(s.contains("EXIT=0"), "{s}");
}

/// The keys of a lazygit / vim user, on the real binary: `q` in a replay opened from the
/// session picker goes back to the picker (not out of the program); `/` searches the operators
/// as you type (the prompt in the bottom line), `Enter` keeps the search and then opens the
/// selection pane by pane; in the code `/`, `n`, `L` and `0` find and scroll sideways; `Esc`
/// clears the search; `q` at the top level quits.
#[test]
fn search_enter_sideways_and_back_to_the_picker_in_tmux() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if has_gpu() {
        eprintln!("SKIPPED: this machine has a GPU (the walk starts at the no-GPU picker)");
        return;
    }
    if !tmux_present() {
        return;
    }
    let dir = scratch("search", "");
    let session = format!("atrex-search-{}", std::process::id());
    let _kill = Kill(session.clone());
    let script = format!("{}; echo \"EXIT=$?\"; sleep 60", tui_command(&dir, ""));
    assert!(new_session(&session, "120", "40", &script));
    let keys = |k: &[&str]| {
        let mut args = vec!["send-keys", "-t", session.as_str()];
        args.extend_from_slice(k);
        tmux(&args);
    };
    let gone = |what: &str| {
        let t0 = Instant::now();
        while capture(&session).contains(what) {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "`{what}` stayed:\n{}",
                capture(&session)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The picker: Enter replays the first session; q comes back to the picker.
    wait_for(&session, "open a recorded session?", 30);
    keys(&["Enter"]);
    wait_for(&session, "q sessions", 10);
    let s = wait_for(&session, "replay demo-hand-edits.jsonl", 10);
    assert!(!s.contains("open a recorded session?"), "{s}");
    keys(&["q"]);
    let s = wait_for(&session, "open a recorded session?", 10);
    assert!(!s.contains("EXIT="), "q left the program:\n{s}");
    keys(&["Escape"]);
    gone("open a recorded session?");
    // `/` in the operators: the prompt in the bottom line, the selection follows the typing.
    keys(&["/silu"]);
    let s = wait_for(&session, "/silu 1/1", 5);
    let bottom = s.lines().rfind(|l| !l.trim().is_empty()).unwrap();
    assert!(
        bottom.starts_with(" /silu") && bottom.contains("Enter keep  Esc cancel"),
        "{s}"
    );
    assert!(s.contains("revisions · silu_and_mul"), "{s}");
    // Enter keeps the search; Enter again: the revisions, then the code
    keys(&["Enter"]);
    gone("Enter keep");
    keys(&["Enter"]);
    wait_for(&session, "y accept", 5);
    keys(&["Enter"]);
    wait_for(&session, "H/L/0 sideways", 5);
    // in the code: /, n, L, 0, Esc
    keys(&["/bfloat16", "Enter"]);
    wait_for(&session, "/bfloat16 1/", 5);
    keys(&["n"]);
    wait_for(&session, "/bfloat16 2/", 5);
    keys(&["L"]);
    let s = wait_for(&session, "col ", 5);
    assert!(s.contains('‹'), "{s}");
    keys(&["0"]);
    gone("col ");
    keys(&["Escape"]);
    gone("/bfloat16");
    // q at the top level quits
    keys(&["q"]);
    let s = wait_for(&session, "EXIT=", 10);
    assert!(s.contains("EXIT=0"), "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}
