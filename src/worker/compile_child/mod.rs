//! The confined compile: NVRTC runs in `atrex-tui compile-child`, a child of the worker, never in
//! the worker itself. The worker writes one JSON `Request` on the child's stdin and closes it;
//! the child (started ahead: `Children` keeps one spare) loads NVRTC, confines itself (`confine`: Landlock reads beneath the toolkit's include
//! folders and NVRTC's library folders only, nothing writable; `RLIMIT_AS`), compiles, and writes
//! one JSON `Response` on stdout. The worker kills it at the time limit (`run`).
//!
//! Invariants: the candidate's source reaches NVRTC only inside a child that has applied its
//! memory limit and, where the kernel has Landlock, its rules (a kernel with Landlock that
//! refuses them fails the compile); the confinement is applied on the thread that compiles,
//! before that thread starts any other; a child past a limit is killed and reaped, and the
//! compile fails with a message naming the limit; the cache and every write stay in the worker.

pub mod confine;
pub mod limits;
pub mod run;

use base64::Engine;
use confine::Confinement;
use limits::Limits;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;

/// What the worker asks of the child.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The source and the file name NVRTC gives it in diagnostics.
    pub src: String,
    pub file: String,
    /// NVRTC's options (architecture, include folders, defines).
    pub options: Vec<String>,
    /// Folders the child may read besides NVRTC's own: the toolkit's include folders.
    pub read_dirs: Vec<PathBuf>,
    /// The child's address-space limit.
    pub memory_bytes: u64,
    /// Only confine and report the confinement (`doctor`); nothing is compiled.
    #[serde(default)]
    pub probe: bool,
}

/// What the child answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Response {
    /// NVRTC compiled the source.
    pub ok: bool,
    /// NVRTC's log, as NVRTC wrote it.
    pub log: String,
    /// The CUBIN, base64.
    pub cubin: String,
    /// NVRTC said it ran out of memory.
    #[serde(default)]
    pub out_of_memory: bool,
    /// The child could not compile at all (NVRTC missing, confinement refused): why.
    #[serde(default)]
    pub error: Option<String>,
    pub confinement: Option<Confinement>,
    /// How long NVRTC took inside the child (the rest of a compile's time is the child's).
    #[serde(default)]
    pub nvrtc_ms: f64,
}

impl Response {
    pub fn cubin_bytes(&self) -> Result<Vec<u8>, ChildError> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.cubin)
            .map_err(ChildError::MalformedCubin)
    }
}

/// Why a compile child gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// Past a limit, dead, or not started.
    #[error(transparent)]
    Ended(#[from] run::Ended),
    #[error("the request could not be written: {0}")]
    Encode(serde_json::Error),
    #[error("the compiler process sent a malformed answer: {0}")]
    Malformed(serde_json::Error),
    #[error("the compiler process sent a malformed CUBIN: {0}")]
    MalformedCubin(base64::DecodeError),
    /// The child could not compile at all (NVRTC missing, confinement refused), as it said.
    #[error("{0}")]
    Refused(String),
    #[error("the compiler process did not say how it is confined")]
    NoConfinement,
}

crate::error::text_at_the_edge!(ChildError);

/// The program to start as the child: `ATREX_COMPILE_CHILD_EXE`, else this executable.
pub fn child_exe() -> PathBuf {
    std::env::var_os("ATREX_COMPILE_CHILD_EXE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("atrex-tui"))
}

/// Starts compile children of one program, one request each. After a compile it starts the
/// next child at once, so that it has loaded NVRTC (most of a child's start) by the next
/// compile; a spare that has died since is replaced.
pub struct Children {
    exe: PathBuf,
    spare: Mutex<Option<Child>>,
}

impl Children {
    pub fn new(exe: PathBuf) -> Children {
        Children {
            exe,
            spare: Mutex::new(None),
        }
    }

    fn start(&self) -> Result<Child, run::Ended> {
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.arg("compile-child");
        run::spawn(cmd)
    }

    /// Runs one request in a child under `limits`. Err: the child ended without an answer (past
    /// a limit, dead) or answered that it could not compile; the message says which.
    pub fn compile(&self, req: &Request, limits: &Limits) -> Result<Response, ChildError> {
        let input = serde_json::to_vec(req).map_err(ChildError::Encode)?;
        let spare = self.spare.lock().ok().and_then(|mut s| s.take());
        let child = match spare {
            Some(mut c) => match c.try_wait() {
                Ok(None) => c,
                _ => {
                    let _ = c.wait();
                    self.start()?
                }
            },
            None => self.start()?,
        };
        let out = run::run(child, input, limits);
        if let (Ok(next), Ok(mut s)) = (self.start(), self.spare.lock()) {
            *s = Some(next);
        }
        let r: Response = serde_json::from_slice(&out?).map_err(ChildError::Malformed)?;
        if r.out_of_memory {
            return Err(run::Ended::Memory(run::memory_message(limits)).into());
        }
        if let Some(e) = &r.error {
            return Err(ChildError::Refused(e.clone()));
        }
        Ok(r)
    }
}

impl Drop for Children {
    /// The spare is ended and reaped (it would end by itself on its closed stdin).
    fn drop(&mut self) {
        if let Ok(mut s) = self.spare.lock()
            && let Some(mut c) = s.take()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The confinement a compile on this machine gets (for `doctor`): a child started to confine
/// itself as for a compile, and report.
pub fn probe(exe: &Path) -> Result<Confinement, ChildError> {
    let req = Request {
        src: String::new(),
        file: String::new(),
        options: Vec::new(),
        read_dirs: crate::worker::locate::include_dirs(),
        memory_bytes: Limits::default().memory_bytes,
        probe: true,
    };
    let r = Children::new(exe.to_path_buf()).compile(
        &req,
        &Limits {
            time: std::time::Duration::from_secs(20),
            ..Limits::default()
        },
    )?;
    r.confinement.ok_or(ChildError::NoConfinement)
}

/// `atrex-tui compile-child`: loads NVRTC, then takes one request from stdin and writes one
/// answer on stdout. Exit 0 when an answer was written.
pub fn child_main() -> i32 {
    // Ends with the worker, whatever happens to it.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes the signal number by value; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    // NVRTC first, before the request comes: its libraries are opened before the rules close
    // the file system, and a spare child has loaded it by the time it is needed.
    let nvrtc = nvrtc::load();
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("atrex-tui compile-child: reading the request: {e}");
        return 1;
    }
    if input.is_empty() {
        // Its worker ended, or no longer needs it.
        return 0;
    }
    let req: Request = match serde_json::from_slice(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("atrex-tui compile-child: malformed request: {e}");
            return 1;
        }
    };
    let resp = answer(&req, nvrtc);
    let Ok(text) = serde_json::to_vec(&resp) else {
        return 1;
    };
    let mut o = std::io::stdout().lock();
    if o.write_all(&text).and_then(|_| o.flush()).is_err() {
        return 1;
    }
    0
}

/// The child's answer; what keeps it from compiling goes back as its message.
fn answer(req: &Request, nvrtc: Result<Vec<PathBuf>, nvrtc::NvrtcError>) -> Response {
    let fail = |e: &dyn std::fmt::Display, confinement: Option<Confinement>| Response {
        error: Some(e.to_string()),
        confinement,
        ..Response::default()
    };
    let mut read = req.read_dirs.clone();
    if let Ok(dirs) = &nvrtc {
        read.extend(dirs.iter().cloned());
    }
    if let Err(e) = confine::limit_memory(req.memory_bytes) {
        return fail(&e, None);
    }
    let confinement = match confine::landlock(&read) {
        Ok(c) => c,
        Err(e) => return fail(&e, None),
    };
    if req.probe {
        return Response {
            ok: true,
            confinement: Some(confinement),
            ..Response::default()
        };
    }
    if let Err(e) = nvrtc {
        return fail(&e, Some(confinement));
    }
    let t0 = std::time::Instant::now();
    match nvrtc::compile(&req.src, &req.file, &req.options) {
        Ok(c) => Response {
            nvrtc_ms: t0.elapsed().as_secs_f64() * 1e3,
            ok: c.ok,
            log: c.log,
            cubin: base64::engine::general_purpose::STANDARD.encode(&c.cubin),
            out_of_memory: c.out_of_memory,
            error: None,
            confinement: Some(confinement),
        },
        Err(e) => fail(&e, Some(confinement)),
    }
}

mod nvrtc;
