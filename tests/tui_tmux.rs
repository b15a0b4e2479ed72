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

/// `kill -INT` (and TERM, HUP) leave the terminal as they found it: canonical mode, echo, no
/// alternate screen.
#[test]
fn a_signal_restores_the_terminal() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!("SKIPPED: tmux is not installed (apt-get install tmux to run this test)");
        return;
    }
    if Command::new("pkill").arg("-V").output().is_err() {
        eprintln!("SKIPPED: pkill is not installed (procps)");
        return;
    }
    for sig in ["INT", "TERM", "HUP"] {
        let exe = common::exe();
        let dir = std::env::temp_dir().join(format!("atrex-sig{sig}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("cfg")).unwrap();
        std::fs::write(
            dir.join("cfg/config.toml"),
            format!("sessions_dir = '{}'\n", dir.join("sessions").display()),
        )
        .unwrap();
        let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui_ws");
        let session = format!("atrex-sig{sig}-{}", std::process::id());
        let _kill = Kill(session.clone());
        let script = format!(
            "ATREX_TUI_CONFIG_DIR='{cfg}' '{exe}' --workspace '{ws}' --config '{cfg}/config.toml'; echo \"EXIT=$?\"; stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo; sleep 60",
            cfg = dir.join("cfg").display(),
            exe = exe.display(),
            ws = ws.display(),
        );
        assert!(new_session(&session, "100", "30", &script));
        wait_for(&session, "operators · all", 20);
        // The TUI's own command line (the shell's has the path in quotes).
        let pattern = format!("--config {}", dir.join("cfg/config.toml").display());
        let k = Command::new("pkill")
            .args([&format!("-{sig}"), "-f", "--", &pattern])
            .status()
            .unwrap();
        assert!(k.success(), "pkill found no TUI");
        let modes = wait_for(&session, "icanon", 10);
        assert!(modes.contains("EXIT="), "{modes}");
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

/// The keys of a lazygit / vim user, on the real binary: `q` in a replay opened from the
/// session picker goes back to the picker (not out of the program); `/` searches the operators
/// as you type (the prompt in the bottom line), `Enter` keeps the search and then opens the
/// selection pane by pane; in the code `/`, `n`, `L` and `0` find and scroll sideways; `Esc`
/// clears the search; `q` at the top level quits.
#[test]
fn search_enter_sideways_and_back_to_the_picker_in_tmux() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let doctor = Command::new(common::exe())
        .args(["doctor", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok());
    if doctor.is_some_and(|d| d["gpu"].get("error").is_none()) {
        eprintln!("SKIPPED: this machine has a GPU (the walk starts at the no-GPU picker)");
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
    let dir = std::env::temp_dir().join(format!("atrex-tmux-search-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cfg")).unwrap();
    std::fs::write(
        dir.join("cfg/config.toml"),
        format!("sessions_dir = '{}'\n", dir.join("sessions").display()),
    )
    .unwrap();
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui_ws");
    let session = format!("atrex-search-{}", std::process::id());
    let _kill = Kill(session.clone());
    let script = format!(
        "ATREX_TUI_CONFIG_DIR='{cfg}' '{exe}' --workspace '{ws}' --config '{cfg}/config.toml'; echo \"EXIT=$?\"; sleep 60",
        cfg = dir.join("cfg").display(),
        exe = exe.display(),
        ws = ws.display(),
    );
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
