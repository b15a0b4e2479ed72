//! Compilation (cached), the include rule applied before it, launch-plan parsing and
//! diagnostics on the candidate's own lines; also the compile-only path without a GPU.
//!
//! NVRTC itself runs in a confined child process under a time and a memory limit
//! (`worker::compile_child`); the cache, and every file this writes, stay in the worker. The log
//! kept and sent is NVRTC's with the lines about other files dropped (`nvrtc_log`).

use super::nvrtc_log;
use super::*;
use crate::worker::compile_child::{self, limits::Limits};

/// NVRTC with the options the harness uses; works without a GPU (offline compile checks).
pub struct Compiler {
    pub arch: String,
    /// Include folders: the toolkit's and its CCCL headers' (see `locate::include_dirs`).
    pub include: Vec<PathBuf>,
    pub nvrtc_version: String,
    pub cache_dir: Option<PathBuf>,
    /// The compile child's limits (from the environment: `compile_child::limits`).
    pub limits: Limits,
    /// The compile children (of `compile_child::child_exe`).
    pub child: compile_child::Children,
}

impl Compiler {
    pub fn new(arch: &str) -> GResult<Compiler> {
        let Some(nvrtc_version) = crate::worker::locate::nvrtc_version() else {
            return Err(GpuError::NoNvrtc);
        };
        Ok(Compiler {
            arch: arch.to_string(),
            include: crate::worker::locate::include_dirs(),
            nvrtc_version,
            cache_dir: dirs::cache_dir().map(|d| d.join("atrex-tui").join("cubin")),
            limits: Limits::from_env()?,
            child: compile_child::Children::new(compile_child::child_exe()),
        })
    }

    pub(super) fn options(&self, defines: &[String]) -> Vec<String> {
        let mut o = vec![
            format!("--gpu-architecture={}", self.arch),
            "-std=c++17".to_string(),
            "-lineinfo".to_string(),
            "--device-as-default-execution-space".to_string(),
            // ptxas says so when registers spill (its wgmma-serialisation note comes anyway).
            "--ptxas-options=--warn-on-spills".to_string(),
            // Quoted includes are never looked up beside the worker (see `includes`).
            "--no-source-include".to_string(),
        ];
        for inc in &self.include {
            o.push(format!("-I{}", inc.display()));
        }
        o.extend(defines.iter().cloned());
        o
    }

    /// NVRTC straight to CUBIN in the compile child, cached on disk by hash of (source,
    /// options, architecture, NVRTC). The log is filtered to the lines about `file`.
    pub(super) fn compile_cubin(
        &self,
        src: &str,
        file: &str,
        defines: &[String],
    ) -> GResult<Compiled> {
        let allowed = crate::contract::includes::Allowed::new(self.include.iter().cloned());
        if let Err(r) = crate::contract::includes::check(src, &allowed) {
            return Ok(Compiled {
                cubin: Vec::new(),
                log: format!("{file}({}): error: {r}\n", r.line),
                ok: false,
                cached: false,
                failure: None,
            });
        }
        let opts = self.options(defines);
        let key =
            crate::fingerprint::of_parts(&[src, &opts.join(" "), &self.arch, &self.nvrtc_version]);
        if let Some(dir) = &self.cache_dir
            && let Ok(cubin) = std::fs::read(dir.join(format!("{key}.cubin")))
        {
            let log = std::fs::read_to_string(dir.join(format!("{key}.log"))).unwrap_or_default();
            return Ok(Compiled {
                cubin,
                log: nvrtc_log::filter(&log, file).log,
                ok: true,
                cached: true,
                failure: None,
            });
        }
        let req = compile_child::Request {
            src: src.to_string(),
            file: file.to_string(),
            options: opts,
            read_dirs: self.include.clone(),
            memory_bytes: self.limits.memory_bytes,
            probe: false,
        };
        let r = match self.child.compile(&req, &self.limits) {
            Ok(r) => r,
            // Past a limit, or the compiler process died: the compile failed, and says why.
            Err(why) => {
                return Ok(Compiled {
                    cubin: Vec::new(),
                    log: format!("{why}\n"),
                    ok: false,
                    cached: false,
                    failure: Some(why.to_string()),
                });
            }
        };
        let log = nvrtc_log::filter(&r.log, file).log;
        let mut out = Compiled {
            cubin: Vec::new(),
            log,
            ok: r.ok,
            cached: false,
            failure: None,
        };
        if out.ok {
            out.cubin = r.cubin_bytes()?;
            if let Some(dir) = &self.cache_dir
                && std::fs::create_dir_all(dir).is_ok()
            {
                let tmp = dir.join(format!("{key}.tmp{}", std::process::id()));
                if std::fs::write(&tmp, &out.cubin).is_ok() {
                    let _ = std::fs::write(dir.join(format!("{key}.log")), &out.log);
                    let _ = std::fs::rename(&tmp, dir.join(format!("{key}.cubin")));
                }
            }
        }
        Ok(out)
    }
}

/// How often a compiling worker says it is alive.
pub(super) const COMPILE_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `f` (an NVRTC compile: a large unrolled kernel, or a busy machine, can take longer than
/// the client's watchdog allows between events) while a thread sends a `progress` event with
/// stage `compile` and no shape every `every`, so a long compile is not taken for a hung kernel.
/// The thread stops as soon as `f` returns; nothing is sent after that.
pub(super) fn with_heartbeat<T>(
    out: &Out,
    id: u64,
    every: std::time::Duration,
    f: impl FnOnce() -> T,
) -> T {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every)
            {
                out.send(&Event::Progress {
                    id,
                    stage: "compile".into(),
                    shape: None,
                    done: 0,
                    total: 1,
                });
            }
        });
        let r = f();
        drop(stop);
        r
    })
}

/// The plan of a source and the defines in use (the plan's own, overridden by the source's).
pub(super) fn plan_and_defines(
    src: &Source,
) -> Result<(Plan, BTreeMap<String, Value>), plan::PlanError> {
    let plan = plan::parse(&src.code)?;
    let mut defines = plan.defines.clone();
    for (k, v) in &src.defines {
        if let Some(val) = Value::from_json(v) {
            defines.insert(k.clone(), val);
        }
    }
    Ok((plan, defines))
}

/// Reports a launch-plan error as a failed compile with the plan's line.
pub(super) fn send_plan_error(
    out: &Out,
    id: u64,
    which: &str,
    src: &Source,
    e: &plan::PlanError,
) -> (Verdict, String) {
    out.send(&Event::Compiled {
        id,
        which: which.into(),
        ok: false,
        cached: false,
        ms: 0.0,
        diagnostics: vec![Diagnostic {
            line: e.line,
            severity: "error".into(),
            msg: e.msg.clone(),
        }],
        log: String::new(),
        resources: BTreeMap::new(),
    });
    (
        Verdict::PlanError,
        format!("{}: launch plan, {e}", src.name),
    )
}

pub(super) struct Compiled {
    pub(super) cubin: Vec<u8>,
    pub(super) log: String,
    pub(super) ok: bool,
    pub(super) cached: bool,
    /// Why no compiler answered (a limit, the compiler process's death); None: NVRTC did.
    pub(super) failure: Option<String>,
}

impl Compiled {
    /// The diagnostics of `file`, with the reason no compiler answered as an error on the whole
    /// kernel.
    pub(super) fn diagnostics(&self, file: &str) -> Vec<Diagnostic> {
        match &self.failure {
            Some(why) => vec![Diagnostic {
                line: 0,
                severity: "error".into(),
                msg: why.clone(),
            }],
            None => nvrtc_log::parse_nvrtc_log(&self.log, file),
        }
    }

    /// What a failed compile's verdict says after the kernel's name: the reason, else NVRTC's
    /// first error line.
    pub(super) fn failure_text(&self) -> String {
        match &self.failure {
            Some(why) => format!("compile error: {why}"),
            None => format!(
                "compile error {}",
                self.log.lines().find(|l| l.contains("error")).unwrap_or("")
            ),
        }
    }
}
/// Compile-only without a GPU: launch plan and NVRTC diagnostics for the job's target. The
/// plan is checked first, so its errors are reported where NVRTC is missing too.
pub(super) fn compile_offline(out: &Out, id: u64, job: &Job) -> (Verdict, Option<String>) {
    let arch = job.arch.clone().unwrap_or_else(|| "sm_90a".to_string());
    let src = &job.candidate;
    let t0 = Instant::now();
    let defines = match plan_and_defines(src) {
        Ok((_, d)) => d,
        Err(e) => {
            let (v, m) = send_plan_error(out, id, "candidate", src, &e);
            return (v, Some(m));
        }
    };
    let compiler = match Compiler::new(&arch) {
        Ok(c) => c,
        Err(e) => return (Verdict::Error, Some(format!("no GPU, and {e}"))),
    };
    let c = match with_heartbeat(out, id, COMPILE_HEARTBEAT, || {
        compiler.compile_cubin(&src.code, "candidate.cu", &plan::define_options(&defines))
    }) {
        Ok(c) => c,
        Err(e) => return (Verdict::Error, Some(e.to_string())),
    };
    out.send(&Event::Compiled {
        id,
        which: "candidate".into(),
        ok: c.ok,
        cached: c.cached,
        ms: t0.elapsed().as_secs_f64() * 1e3,
        diagnostics: c.diagnostics("candidate.cu"),
        log: c.log.clone(),
        resources: BTreeMap::new(),
    });
    if c.ok {
        if job.sass {
            // The cubin in hand: disassembled without a second compile.
            super::disassemble::send(out, id, super::disassemble::disassemble(&c.cubin));
        }
        (
            Verdict::Pass,
            Some(format!(
                "compiled for {arch} with NVRTC {} (no GPU: not run)",
                compiler.nvrtc_version
            )),
        )
    } else {
        (
            Verdict::CompileError,
            Some(format!(
                "{}: {}",
                src.name,
                match &c.failure {
                    Some(why) => format!("compile error: {why}"),
                    None => "compile error".to_string(),
                }
            )),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compiler whose child is the built `atrex-tui` beside the test binary, without the cache;
    /// None (said with a SKIPPED line) without NVRTC or that binary.
    fn test_compiler(arch: &str) -> Option<Compiler> {
        let exe = std::env::current_exe().ok()?;
        let child = exe.parent()?.parent()?.join("atrex-tui");
        let Ok(mut c) = Compiler::new(arch) else {
            eprintln!("SKIPPED: NVRTC is not on the loader path");
            return None;
        };
        if !child.is_file() {
            eprintln!("SKIPPED: {} is not built", child.display());
            return None;
        }
        c.child = compile_child::Children::new(child);
        c.cache_dir = None;
        Some(c)
    }

    /// The harness (generators, checksum, copy and tensor-core calibration kernels) compiles for
    /// Hopper and, with the tensor-core kernel reduced to a no-op, for an older architecture.
    /// Needs NVRTC on the loader path (e.g. LD_LIBRARY_PATH=$CUDA_HOME/lib64), not a GPU.
    #[test]
    fn the_harness_compiles_for_each_architecture() {
        for arch in ["sm_90a", "sm_75"] {
            let Some(c) = test_compiler(arch) else { return };
            let out = c
                .compile_cubin(HARNESS_SRC, "harness.cu", &[])
                .map_err(|e| e.to_string())
                .unwrap();
            assert!(out.ok && !out.cubin.is_empty(), "{arch}: {}", out.log);
        }
    }

    /// What the compile child adds to a compile (its start, NVRTC's loading, the confinement,
    /// the request and answer): measured cold, back to back, and with the spare given the time
    /// a GPU run leaves it; printed, and bounded well above what a loaded machine shows.
    #[test]
    fn the_compile_child_adds_little_to_a_compile() {
        let Some(c) = test_compiler("sm_90a") else {
            return;
        };
        let req = |i: usize| compile_child::Request {
            src: format!("extern \"C\" __global__ void k{i}(float* o) {{ o[0] = {i}.0f; }}\n"),
            file: "candidate.cu".into(),
            options: c.options(&[]),
            read_dirs: c.include.clone(),
            memory_bytes: c.limits.memory_bytes,
            probe: false,
        };
        let mut over = Vec::new();
        for i in 0..6 {
            if i >= 3 {
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            let t0 = Instant::now();
            let r = c.child.compile(&req(i), &c.limits).unwrap();
            assert!(r.ok, "{}", r.log);
            over.push(t0.elapsed().as_secs_f64() * 1e3 - r.nvrtc_ms);
        }
        eprintln!(
            "compile child overhead (ms): cold {:.1}, back to back {:.1} {:.1}, with a spare ready {:.1} {:.1} {:.1}",
            over[0], over[1], over[2], over[3], over[4], over[5]
        );
        assert!(over[3..].iter().all(|&o| o < 250.0), "{over:?}");
    }

    /// A compile past the time limit is stopped and fails with a message that names the limit.
    #[test]
    fn a_compile_past_the_time_limit_fails_with_the_limit_named() {
        let Some(mut c) = test_compiler("sm_90a") else {
            return;
        };
        c.limits.time = std::time::Duration::from_millis(50);
        let out = c
            .compile_cubin(HARNESS_SRC, "harness.cu", &[])
            .map_err(|e| e.to_string())
            .unwrap();
        assert!(!out.ok);
        let d = out.diagnostics("harness.cu");
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].msg,
            "compile exceeded the 0.05 s time limit: the compiler was stopped"
        );
        assert!(
            out.failure_text()
                .starts_with("compile error: compile exceeded")
        );
    }

    /// A compile longer than the heartbeat's period is announced while it runs, and the
    /// announcements stop when it returns.
    #[test]
    fn a_long_compile_sends_progress_until_it_returns() {
        #[derive(Clone, Default)]
        struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = Out::new(buf.clone());
        let every = std::time::Duration::from_millis(40);
        let r = with_heartbeat(&out, 9, every, || {
            std::thread::sleep(std::time::Duration::from_millis(210));
            7
        });
        assert_eq!(r, 7);
        let lines = |b: &Buf| String::from_utf8(b.0.lock().unwrap().clone()).unwrap();
        let sent = lines(&buf);
        let n = sent.lines().count();
        assert!(
            (3..=6).contains(&n),
            "{n} heartbeats in 210 ms every 40 ms: {sent}"
        );
        for l in sent.lines() {
            match serde_json::from_str::<Event>(l).unwrap() {
                Event::Progress {
                    id, stage, shape, ..
                } => assert_eq!((id, stage.as_str(), shape), (9, "compile", None)),
                e => panic!("{e:?}"),
            }
        }
        std::thread::sleep(every * 3);
        assert_eq!(
            lines(&buf).lines().count(),
            n,
            "a heartbeat after the compile"
        );
        // A quick compile sends nothing.
        let quiet = Buf::default();
        with_heartbeat(&Out::new(quiet.clone()), 1, every, || ());
        assert_eq!(lines(&quiet), "");
    }
}
