//! The worker process: `atrex-tui worker` owns one GPU's CUDA context and answers JSON-line
//! requests (`crate::contract::protocol`) on its standard streams. A kernel that faults poisons
//! the context: the worker reports it and exits; the client (`crate::pool`) restarts it.
//!
//! Files: `device` (memory, modules, context), `launch` (launch plans onto the stream: tensor
//! maps, clusters, large shared memory), `compile` (the cached compile, the include rule,
//! launch plans, compile-only without a GPU), `compile_child` (NVRTC in a confined child
//! process), `nvrtc_log` (the log kept to the candidate's lines), `disassemble` (`compile
//! --sass`: the candidate's SASS from `cuobjdump`), `shape_plan` (a plan resolved and checked on
//! one shape, without the GPU), `inputs` (generators), `structure` (structured draws),
//! `pristine` (the input-unchanged test), `check` (correctness over seeds and draws, dumps),
//! `device_check` (the check's comparison on the device), `timed_check` (the check of timed
//! outputs on the device), `timing` (cold-L2 timing), `calibrate`, `job` (one job end to end),
//! `stdio` (the protocol kept apart from what kernels print), `env_scrub` (what a worker and its
//! children inherit of the environment), `locate` (the CUDA installation), `simulate` (a worker
//! without a GPU, for tests), `error` (`GpuError`: what failed, sticky or not, and whose fault
//! it is); this file holds the main loop, the event writer (on the private protocol
//! descriptor, see `stdio`) and `profile-target`.
//!
//! Invariants: every CUDA call's error is checked and a sticky one ends the worker; candidate
//! code only ever runs through `Gpu::enqueue` on buffers the harness made and poisoned; nothing
//! but `Out` writes to the protocol. The worker depends on the contract and the suite only,
//! never on the client side that starts it.

use crate::contract::compare::{self, Mode as CmpMode, TensorCheck};
use crate::contract::plan::{self, Plan, PlanError, ResolvedArg};
use crate::contract::protocol::*;
use crate::contract::stats::{self, StopRule};
use crate::suite::expr::{Env, Value};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString, c_void};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

const HARNESS_SRC: &str = include_str!("../contract/harness.cu");

mod calibrate;
mod check;
mod compile;
pub(crate) mod compile_child;
mod device;
mod device_check;
mod disassemble;
pub(crate) mod env_scrub;
pub mod error;
mod inputs;
mod job;
mod launch;
pub(crate) mod locate;
mod nvrtc_log;
mod pristine;
pub(crate) mod shape_plan;
pub(crate) mod simulate;
pub mod stdio;
mod structure;
mod timed_check;
mod timing;

/// This machine's name (for `hello`).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } == 0;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    match (ok, std::str::from_utf8(&buf[..end])) {
        (true, Ok(h)) if !h.is_empty() => h.to_string(),
        _ => "localhost".into(),
    }
}

pub use compile::Compiler;
use compile::*;
pub use device::probe;
use device::*;
pub use error::{GpuError, InputError};
use inputs::*;
use job::*;
pub use nvrtc_log::parse_nvrtc_log;
use timed_check::*;
use timing::*;

pub(super) fn gerr(msg: impl Into<String>) -> GpuError {
    GpuError::Harness(msg.into())
}

type GResult<T> = Result<T, GpuError>;

/// Writes events as JSON lines (on the worker's private protocol descriptor; see `stdio`).
#[derive(Clone)]
pub(super) struct Out(Arc<Mutex<Box<dyn Write + Send>>>);

impl Out {
    pub(super) fn new(w: impl Write + Send + 'static) -> Out {
        Out(Arc::new(Mutex::new(Box::new(w))))
    }

    pub(super) fn send(&self, e: &Event) {
        if let Ok(line) = serde_json::to_string(e)
            && let Ok(mut o) = self.0.lock()
        {
            let mut b = line.into_bytes();
            b.push(b'\n');
            let _ = o.write_all(&b);
            let _ = o.flush();
        }
    }
}

/// What kernels print, taken per shape and sent as `output` events.
pub(super) struct Printed<'a>(Option<&'a mut stdio::Capture>);

impl Printed<'_> {
    pub(super) fn send(&mut self, out: &Out, id: u64, shape: Option<u32>) {
        let Some(c) = self.0.as_mut() else { return };
        let p = c.take();
        if p.is_empty() {
            return;
        }
        let mut text = p.text;
        if p.dropped > 0 {
            text.push_str(&stdio::not_kept_note(p.dropped));
        }
        out.send(&Event::Output {
            id,
            shape,
            text,
            dropped: p.dropped,
        });
    }
}

/// `atrex-tui profile-target JOB`: runs the candidate of a job once on its first shape (inputs
/// generated, outputs poisoned), for a profiler that launched this process. Exit 0 on success.
pub fn profile_target(device: u32, job_file: &std::path::Path) -> i32 {
    let out = Out::new(std::io::stdout());
    let job: Job = match std::fs::read(job_file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(j) => j,
        Err(e) => {
            eprintln!("atrex-tui profile-target: {}: {e}", job_file.display());
            return 1;
        }
    };
    if let Err(e) = probe(Some(device)) {
        eprintln!("atrex-tui profile-target: {e}");
        return 2;
    }
    // Its messages go to stderr, as the profiler shows them.
    let run = || -> Result<(), String> {
        let mut g = Gpu::new(device)?;
        let cand = g
            .prepare(&out, 0, "candidate", &job.candidate)?
            .map_err(|(_, m)| m)?;
        let custom = match &job.generator {
            Some(src) => Some(g.prepare(&out, 0, "generator", src)?.map_err(|(_, m)| m)?),
            None => None,
        };
        let shape = job.shapes.first().ok_or("the job has no shape")?;
        let env = env_from_json(&shape.env);
        let inputs: Vec<DevBuf> = shape
            .inputs
            .iter()
            .map(|t| DevBuf::new(t.bytes() as usize))
            .collect::<GResult<_>>()?;
        let outputs: Vec<DevBuf> = shape
            .outputs
            .iter()
            .map(|t| DevBuf::new(t.bytes() as usize))
            .collect::<GResult<_>>()?;
        let scratch = g.scratch_for(&cand, &env)?;
        let mut map: HashMap<String, sys::CUdeviceptr> = HashMap::new();
        for (t, b) in shape.inputs.iter().zip(&inputs) {
            map.insert(t.name.clone(), b.ptr);
        }
        for (t, b) in shape.outputs.iter().zip(&outputs) {
            map.insert(t.name.clone(), b.ptr);
            g.poison(b, &t.dtype, 0)?;
        }
        for (n, _, _, b) in &scratch {
            map.insert(n.clone(), b.ptr);
        }
        g.generate_all(
            &shape.inputs,
            &inputs,
            &env,
            job.seeds.first().copied().unwrap_or(1),
            custom.as_ref(),
        )?;
        g.reset_scratch(&scratch)?;
        g.enqueue(&cand, &env, &map)?;
        g.sync()?;
        Ok(())
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("atrex-tui profile-target: {e}");
            1
        }
    }
}

/// Reads requests from stdin on a thread of its own: a cancel is noted at once (the job polls
/// it), every other request goes to the main loop, a malformed one is answered with an error;
/// the end of stdin is a shutdown.
fn read_requests(tx: mpsc::Sender<Request>, cancel: Arc<AtomicU64>, out: Out) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Request>(&line) {
                Ok(Request::Cancel { id }) => cancel.store(id, Ordering::SeqCst),
                Ok(r) => {
                    if tx.send(r).is_err() {
                        break;
                    }
                }
                Err(e) => out.send(&Event::Error {
                    id: 0,
                    message: format!("malformed request: {e}"),
                }),
            }
        }
        // The main loop may have ended already (it stops on a fault); then it needs no word.
        if tx.send(Request::Shutdown).is_err() {}
    });
}

/// The worker's main loop. Returns the process exit code.
pub fn main(device: u32) -> i32 {
    // The protocol moves off fd 1 before anything can print there (see `stdio`).
    let (proto, mut capture) = match stdio::isolate() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("atrex-tui worker: cannot set up its standard streams: {e}");
            return 1;
        }
    };
    let out = Out::new(proto);
    let cancel = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel::<Request>();
    read_requests(tx, cancel.clone(), out.clone());
    let mut gpu: Option<Gpu> = None;
    // Why the GPU could not be set up, kept as the protocol says it (every later request gets
    // the same answer).
    let mut init_error: Option<String> = None;
    let ensure = |gpu: &mut Option<Gpu>, init_error: &mut Option<String>| -> Result<(), String> {
        if gpu.is_some() {
            return Ok(());
        }
        if let Some(e) = init_error {
            return Err(e.clone());
        }
        match probe(Some(device)).and_then(|_| Gpu::new(device)) {
            Ok(g) => {
                *gpu = Some(g);
                Ok(())
            }
            Err(e) => {
                let e = e.to_string();
                *init_error = Some(e.clone());
                Err(e)
            }
        }
    };
    while let Ok(req) = rx.recv() {
        match req {
            Request::Shutdown => break,
            Request::Cancel { .. } => {}
            Request::Hello { id } => match probe(Some(device)) {
                Ok((p, d)) => {
                    // Set up the context now, so that the first job is fast.
                    let _ = ensure(&mut gpu, &mut init_error);
                    out.send(&Event::Hello {
                        id,
                        protocol: PROTOCOL_VERSION,
                        tool_version: Some(TOOL_VERSION.into()),
                        host: Some(hostname()),
                        probe: p,
                        device: d,
                    });
                }
                Err(e) => out.send(&Event::Error {
                    id,
                    message: e.to_string(),
                }),
            },
            Request::Calibrate { id } => {
                if let Err(e) = ensure(&mut gpu, &mut init_error) {
                    out.send(&Event::Error { id, message: e });
                    continue;
                }
                let Some(g) = gpu.as_mut() else { continue };
                match g.calibrate().and_then(|c| Ok((c, g.calibrate_mma()?))) {
                    Ok(((bw, bytes, med), mma)) => out.send(&Event::Calibration {
                        id,
                        copy_bytes_per_s: bw,
                        bytes,
                        median_ms: med,
                        mma_bf16_flops_per_s: mma,
                    }),
                    Err(e) => {
                        out.send(&Event::Error {
                            id,
                            message: e.to_string(),
                        });
                        if e.sticky() {
                            return 3;
                        }
                    }
                }
            }
            Request::Job { id, job } => {
                if let Err(e) = ensure(&mut gpu, &mut init_error) {
                    if job.kind == JobKind::Compile {
                        let (verdict, message) = compile_offline(&out, id, &job);
                        out.send(&Event::Done {
                            id,
                            verdict,
                            message,
                        });
                        continue;
                    }
                    out.send(&Event::Done {
                        id,
                        verdict: Verdict::Error,
                        message: Some(format!("no GPU: {e}")),
                    });
                    continue;
                }
                let Some(g) = gpu.as_mut() else { continue };
                capture.new_job();
                let mut printed = Printed(Some(&mut capture));
                let r = run_job(g, &out, id, &job, &cancel, &mut printed);
                printed.send(&out, id, None);
                match r {
                    Ok((v, m)) => out.send(&Event::Done {
                        id,
                        verdict: v,
                        message: m,
                    }),
                    Err(e) => {
                        let message = format!("{}: {e}", job.candidate.name);
                        if e.sticky() {
                            // The context is unusable: say why and exit without `done`; the
                            // client records the shape in progress as a fault and goes on with
                            // the others on a new worker.
                            out.send(&Event::Fault { id, message });
                            return 3;
                        }
                        out.send(&Event::Done {
                            id,
                            verdict: Verdict::Error,
                            message: Some(message),
                        });
                    }
                }
            }
        }
    }
    0
}

#[cfg(test)]
mod tests;
