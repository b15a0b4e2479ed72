//! NVRTC inside the child: loaded (with its builtins library, which NVRTC would otherwise open
//! lazily) before confinement, then one compile straight to CUBIN.

use cudarc::nvrtc::result::NvrtcError as Status;
use std::ffi::CString;
use std::path::PathBuf;

/// Why NVRTC could not compile at all (a compile error is a log, not this).
#[derive(Debug, thiserror::Error)]
pub enum NvrtcError {
    #[error(
        "libnvrtc not found: install the CUDA toolkit (or set CUDA_HOME to it), or NVIDIA's Python wheels: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime"
    )]
    Missing,
    #[error("the source contains a NUL byte")]
    NulByte,
    #[error("bad file name {0:?}")]
    FileName(String),
    /// The NVRTC call that failed, and its status.
    #[error("{call}: {status:?}")]
    Call { call: &'static str, status: Status },
}

/// Loads NVRTC and its builtins; the folders their files live in (which the confinement keeps
/// readable). Err: NVRTC is not on the loader path.
pub fn load() -> Result<Vec<PathBuf>, NvrtcError> {
    // SAFETY: only tries to open libnvrtc by its names (running the library's initialisers, as
    // any loading of NVRTC does); no symbol of it is called.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(NvrtcError::Missing);
    }
    // Keeps the library loaded for the compile (cudarc holds it once first used).
    let (mut a, mut b) = (0, 0);
    // SAFETY: the library is present (checked above), so cudarc's loader finds it; nvrtcVersion
    // writes one c_int through each pointer, and both point at locals that outlive the call.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
    let mut dirs = nvrtc_dirs();
    for d in dirs.clone() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("libnvrtc-builtins") && name.contains(".so") {
                // Loaded for good: NVRTC finds it by its name among the loaded libraries.
                // SAFETY: the file is NVIDIA's builtins library from the folder libnvrtc was
                // loaded from; opening it runs only its own initialisers, and no symbol is
                // called through the handle, which is never closed (forgotten below).
                if let Ok(lib) = unsafe { libloading::Library::new(e.path()) } {
                    std::mem::forget(lib);
                }
            }
        }
    }
    dirs.extend(nvrtc_dirs());
    dirs.sort();
    dirs.dedup();
    Ok(dirs)
}

/// The folders of the NVRTC libraries mapped into this process.
fn nvrtc_dirs() -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut v: Vec<PathBuf> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains("libnvrtc"))
        .filter_map(|p| PathBuf::from(p).parent().map(|d| d.to_path_buf()))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// One compile's result.
pub struct Compiled {
    pub ok: bool,
    pub log: String,
    pub cubin: Vec<u8>,
    pub out_of_memory: bool,
}

/// NVRTC straight to CUBIN.
pub fn compile(src: &str, file: &str, opts: &[String]) -> Result<Compiled, NvrtcError> {
    use cudarc::nvrtc::{result as nr, sys as ns};
    let call = |call| move |status| NvrtcError::Call { call, status };
    let csrc = CString::new(src).map_err(|_| NvrtcError::NulByte)?;
    let cname = CString::new(file).map_err(|_| NvrtcError::FileName(file.to_string()))?;
    let prog = nr::create_program(&csrc, Some(&cname)).map_err(call("nvrtcCreateProgram"))?;
    // SAFETY: `prog` was created just above and is destroyed only at the end of this function;
    // `csrc` and `cname`, which it may point into, live until then. The options are turned into
    // C strings by cudarc for the call.
    let compiled = unsafe { nr::compile_program(prog, opts) };
    // SAFETY: `prog` is live (as above); cudarc sizes the log buffer from NVRTC's own size.
    let log = unsafe { nr::get_program_log(prog) }
        .map(|v| {
            let bytes: Vec<u8> = v.iter().map(|c| *c as u8).take_while(|c| *c != 0).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    // NVRTC says so in its result, or (its front end out of memory) in a catastrophic error.
    let out_of_memory = matches!(
        &compiled,
        Err(e) if e.0 == ns::nvrtcResult::NVRTC_ERROR_OUT_OF_MEMORY
    ) || log
        .lines()
        .any(|l| l.ends_with("): catastrophic error: out of memory"));
    let mut out = Compiled {
        ok: compiled.is_ok(),
        log,
        cubin: Vec::new(),
        out_of_memory,
    };
    if out.ok {
        let mut size = 0usize;
        // SAFETY: `prog` is live and compiled; nvrtcGetCUBINSize writes one usize into `size`,
        // and nvrtcGetCUBIN writes exactly that many bytes into `out.cubin`, allocated to that
        // size in between.
        unsafe {
            ns::nvrtcGetCUBINSize(prog, &mut size)
                .result()
                .map_err(call("nvrtcGetCUBINSize"))?;
            out.cubin = vec![0u8; size];
            ns::nvrtcGetCUBIN(prog, out.cubin.as_mut_ptr() as *mut _)
                .result()
                .map_err(call("nvrtcGetCUBIN"))?;
        }
    }
    // SAFETY: `prog` is live and destroyed once, here; nothing uses it afterwards (`out` holds
    // copies of the log and the CUBIN).
    unsafe {
        let _ = nr::destroy_program(prog);
    }
    Ok(out)
}
