//! NVRTC compilation (cached), the include rule applied before it, launch-plan parsing and
//! diagnostics on the candidate's own lines; also the compile-only path without a GPU.

use super::*;

/// NVRTC with the options the harness uses; works without a GPU (offline compile checks).
pub struct Compiler {
    pub arch: String,
    /// Include folders: the toolkit's and its CCCL headers' (see `locate::include_dirs`).
    pub include: Vec<PathBuf>,
    pub nvrtc_version: String,
    pub cache_dir: Option<PathBuf>,
}

impl Compiler {
    pub fn new(arch: &str) -> GResult<Compiler> {
        let Some(nvrtc_version) = crate::engine::locate::nvrtc_version() else {
            return Err(gerr(
                "libnvrtc not found: install the CUDA toolkit (or set CUDA_HOME to it), or NVIDIA's Python wheels: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime",
            ));
        };
        Ok(Compiler {
            arch: arch.to_string(),
            include: crate::engine::locate::include_dirs(),
            nvrtc_version,
            cache_dir: dirs::cache_dir().map(|d| d.join("atrex-tui").join("cubin")),
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

    /// NVRTC straight to CUBIN, cached on disk by hash of (source, options, architecture, NVRTC).
    pub(super) fn compile_cubin(
        &self,
        src: &str,
        file: &str,
        defines: &[String],
    ) -> GResult<Compiled> {
        let allowed = crate::engine::includes::Allowed::new(self.include.iter().cloned());
        if let Err(r) = crate::engine::includes::check(src, &allowed) {
            return Ok(Compiled {
                cubin: Vec::new(),
                log: format!("{file}({}): error: {}\n", r.line, r.msg),
                ok: false,
                cached: false,
            });
        }
        let opts = self.options(defines);
        let key = sha(&[src, &opts.join(" "), &self.arch, &self.nvrtc_version]);
        if let Some(dir) = &self.cache_dir
            && let Ok(cubin) = std::fs::read(dir.join(format!("{key}.cubin")))
        {
            let log = std::fs::read_to_string(dir.join(format!("{key}.log"))).unwrap_or_default();
            return Ok(Compiled {
                cubin,
                log,
                ok: true,
                cached: true,
            });
        }
        use cudarc::nvrtc::{result as nr, sys as ns};
        let csrc = CString::new(src).map_err(|_| gerr("source contains a NUL byte"))?;
        let cname = CString::new(file).map_err(|_| gerr("bad file name"))?;
        let prog = nr::create_program(&csrc, Some(&cname))
            .map_err(|e| gerr(format!("nvrtcCreateProgram: {e:?}")))?;
        let compiled = unsafe { nr::compile_program(prog, &opts) };
        let log = unsafe { nr::get_program_log(prog) }
            .map(|v| {
                let bytes: Vec<u8> = v.iter().map(|c| *c as u8).take_while(|c| *c != 0).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default();
        let mut out = Compiled {
            cubin: Vec::new(),
            log,
            ok: compiled.is_ok(),
            cached: false,
        };
        if out.ok {
            let mut size = 0usize;
            unsafe {
                ns::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| gerr(format!("nvrtcGetCUBINSize: {e:?}")))?;
                out.cubin = vec![0u8; size];
                ns::nvrtcGetCUBIN(prog, out.cubin.as_mut_ptr() as *mut _)
                    .result()
                    .map_err(|e| gerr(format!("nvrtcGetCUBIN: {e:?}")))?;
            }
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
        unsafe {
            let _ = nr::destroy_program(prog);
        }
        Ok(out)
    }
}

pub(super) fn sha(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses NVRTC's log into diagnostics on the candidate's own lines, plus ptxas's warnings and
/// performance notes on the whole kernel (line 0): registers spilled to local memory, wgmma
/// serialised (C7518) — what a Hopper kernel's author needs to know before timing it.
pub fn parse_nvrtc_log(log: &str, file: &str) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for l in log.lines() {
        if let Some(note) = ptxas_note(l) {
            out.push(Diagnostic {
                line: 0,
                severity: "warning".to_string(),
                msg: format!("ptxas: {note}"),
            });
            continue;
        }
        let Some(rest) = l.strip_prefix(file) else {
            continue;
        };
        let Some(rest) = rest.strip_prefix('(') else {
            continue;
        };
        let Some((num, rest)) = rest.split_once("): ") else {
            continue;
        };
        let Ok(line) = num.parse::<usize>() else {
            continue;
        };
        let (sev, msg) = rest.split_once(": ").unwrap_or(("error", rest));
        let severity = if sev.contains("warning") {
            "warning"
        } else if sev.contains("error") {
            "error"
        } else {
            sev
        };
        out.push(Diagnostic {
            line,
            severity: severity.to_string(),
            msg: msg.trim().to_string(),
        });
    }
    out
}

/// A ptxas line worth a diagnostic: its warnings, and its notes on lost performance.
fn ptxas_note(l: &str) -> Option<&str> {
    let rest = l.strip_prefix("ptxas")?.trim_start();
    let (kind, msg) = rest.split_once(':')?;
    let msg = msg.trim();
    match kind.trim() {
        "warning" => Some(msg),
        "info" if msg.contains("Potential Performance Loss") => Some(msg),
        _ => None,
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
        Err(e) => return (Verdict::Error, Some(format!("no GPU, and {}", e.msg))),
    };
    let c = match with_heartbeat(out, id, COMPILE_HEARTBEAT, || {
        compiler.compile_cubin(&src.code, "candidate.cu", &plan::define_options(&defines))
    }) {
        Ok(c) => c,
        Err(e) => return (Verdict::Error, Some(e.msg)),
    };
    out.send(&Event::Compiled {
        id,
        which: "candidate".into(),
        ok: c.ok,
        cached: c.cached,
        ms: t0.elapsed().as_secs_f64() * 1e3,
        diagnostics: parse_nvrtc_log(&c.log, "candidate.cu"),
        log: c.log.clone(),
        resources: BTreeMap::new(),
    });
    if c.ok {
        if job.sass {
            // The cubin in hand: disassembled without a second compile.
            super::sass::send(out, id, super::sass::disassemble(&c.cubin));
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
            Some(format!("{}: compile error", src.name)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness (generators, checksum, copy and tensor-core calibration kernels) compiles for
    /// Hopper and, with the tensor-core kernel reduced to a no-op, for an older architecture.
    /// Needs NVRTC on the loader path (e.g. LD_LIBRARY_PATH=$CUDA_HOME/lib64), not a GPU.
    #[test]
    #[ignore = "needs NVRTC"]
    fn the_harness_compiles_for_each_architecture() {
        for arch in ["sm_90a", "sm_75"] {
            let c = Compiler::new(arch).map_err(|e| e.msg).unwrap();
            let out = c
                .compile_cubin(HARNESS_SRC, "harness.cu", &[])
                .map_err(|e| e.msg)
                .unwrap();
            assert!(out.ok && !out.cubin.is_empty(), "{arch}: {}", out.log);
        }
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

    #[test]
    fn nvrtc_log_maps_to_candidate_lines() {
        let log = "candidate.cu(12): error: identifier \"foo\" is undefined\n\
                   candidate.cu(30): warning #177-D: variable \"x\" was declared but never referenced\n\
                   1 error detected in the compilation of \"candidate.cu\".\n";
        let d = parse_nvrtc_log(log, "candidate.cu");
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[0],
            Diagnostic {
                line: 12,
                severity: "error".into(),
                msg: "identifier \"foo\" is undefined".into()
            }
        );
        assert_eq!(d[1].line, 30);
        assert_eq!(d[1].severity, "warning");
    }

    /// ptxas's lines as NVRTC 13.0 wrote them for a pipelined attention kernel on the H200.
    #[test]
    fn ptxas_spills_and_wgmma_serialisation_become_kernel_warnings() {
        let log = "ptxas info    : (C7518) Potential Performance Loss: wgmma.mma_async instructions are serialized due to program dependence on compiler-inserted WG.DP in divergent path in the function 'k'\n\
                   ptxas warning : Registers are spilled to local memory in function 'k', 84 bytes spill stores, 104 bytes spill loads\n\
                   ptxas info    : Used 168 registers, used 1 barriers, 40 bytes cumulative stack size\n";
        let d = parse_nvrtc_log(log, "candidate.cu");
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d.iter().all(|d| d.line == 0 && d.severity == "warning"));
        assert!(
            d[0].msg
                .starts_with("ptxas: (C7518) Potential Performance Loss: wgmma")
        );
        assert!(d[1].msg.contains("84 bytes spill stores"));
        assert_eq!(d[1].place(), "kernel");
    }
}
