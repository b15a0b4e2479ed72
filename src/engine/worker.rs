//! `atrex-tui worker`: owns one GPU's CUDA context and answers JSON-line requests on stdio.
//! A kernel that faults poisons the context: the worker reports it and exits; the client
//! restarts it.

use super::compare::{self, Mode as CmpMode, TensorCheck};
use super::plan::{self, Plan, ResolvedArg};
use super::protocol::*;
use super::stats::{self, StopRule};
use crate::expr::{Env, Value};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString, c_void};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

const HARNESS_SRC: &str = include_str!("harness.cu");

/// An error from the GPU. `sticky` errors leave the context unusable.
#[derive(Debug)]
pub struct GpuError {
    pub msg: String,
    pub sticky: bool,
}

impl From<cu::DriverError> for GpuError {
    fn from(e: cu::DriverError) -> Self {
        use sys::CUresult::*;
        let sticky = matches!(
            e.0,
            CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUDA_ERROR_INVALID_PC
                | CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUDA_ERROR_ASSERT
                | CUDA_ERROR_LAUNCH_TIMEOUT
                | CUDA_ERROR_ECC_UNCORRECTABLE
                | CUDA_ERROR_CONTEXT_IS_DESTROYED
        );
        let name = e
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", e.0));
        let text = e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        GpuError {
            msg: format!("{name}: {text}"),
            sticky,
        }
    }
}

fn gerr(msg: impl Into<String>) -> GpuError {
    GpuError {
        msg: msg.into(),
        sticky: false,
    }
}

type GResult<T> = Result<T, GpuError>;

/// Writes events as JSON lines (on the worker's private protocol descriptor; see `stdio`).
#[derive(Clone)]
struct Out(Arc<Mutex<Box<dyn Write + Send>>>);

impl Out {
    fn new(w: impl Write + Send + 'static) -> Out {
        Out(Arc::new(Mutex::new(Box::new(w))))
    }

    fn send(&self, e: &Event) {
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
struct Printed<'a>(Option<&'a mut super::stdio::Capture>);

impl Printed<'_> {
    fn send(&mut self, out: &Out, id: u64, shape: Option<u32>) {
        let Some(c) = self.0.as_mut() else { return };
        let p = c.take();
        if p.is_empty() {
            return;
        }
        let mut text = p.text;
        if p.dropped > 0 {
            text.push_str(&format!(
                "\n[{} more bytes not kept: a job keeps at most {} KiB of kernel output]",
                p.dropped,
                super::stdio::JOB_OUTPUT_LIMIT / 1024
            ));
        }
        out.send(&Event::Output {
            id,
            shape,
            text,
            dropped: p.dropped,
        });
    }
}

/// Device memory, freed on drop.
struct DevBuf {
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DevBuf {
    fn new(bytes: usize) -> GResult<DevBuf> {
        let ptr = unsafe { cu::malloc_sync(bytes.max(256)) }.map_err(|e| {
            let mut g = GpuError::from(e);
            g.msg = format!("allocating {bytes} bytes: {}", g.msg);
            g
        })?;
        Ok(DevBuf { ptr, bytes })
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        unsafe {
            let _ = cu::free_sync(self.ptr);
        }
    }
}

struct Module {
    module: sys::CUmodule,
    functions: HashMap<String, sys::CUfunction>,
}

impl Module {
    fn function(&mut self, name: &str) -> GResult<sys::CUfunction> {
        if let Some(f) = self.functions.get(name) {
            return Ok(*f);
        }
        let c = CString::new(name).map_err(|_| gerr("bad kernel name"))?;
        let f = unsafe { cu::module::get_function(self.module, c) }.map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_NOT_FOUND {
                gerr(format!(
                    "kernel `{name}` not found in the module: declare it `extern \"C\" __global__`"
                ))
            } else {
                GpuError::from(e)
            }
        })?;
        self.functions.insert(name.to_string(), f);
        Ok(f)
    }
}

/// A compiled candidate ready to launch.
struct Loaded {
    key: String,
    plan: Plan,
    defines: BTreeMap<String, Value>,
}

struct Nvml {
    _lib: libloading::Library,
    clock: unsafe extern "C" fn(*mut c_void, u32, *mut u32) -> i32,
    device: *mut c_void,
}

impl Nvml {
    /// NVML for the current SM clock; optional (None when the library is missing).
    fn open(pci_bus_id: &str) -> Option<Nvml> {
        unsafe {
            let lib = libloading::Library::new("libnvidia-ml.so.1").ok()?;
            let init: libloading::Symbol<unsafe extern "C" fn() -> i32> =
                lib.get(b"nvmlInit_v2").ok()?;
            if init() != 0 {
                return None;
            }
            let by_pci: libloading::Symbol<
                unsafe extern "C" fn(*const i8, *mut *mut c_void) -> i32,
            > = lib.get(b"nvmlDeviceGetHandleByPciBusId_v2").ok()?;
            let clock: libloading::Symbol<unsafe extern "C" fn(*mut c_void, u32, *mut u32) -> i32> =
                lib.get(b"nvmlDeviceGetClockInfo").ok()?;
            let clock = *clock;
            let bus = CString::new(pci_bus_id).ok()?;
            let mut dev = std::ptr::null_mut();
            if by_pci(bus.as_ptr(), &mut dev) != 0 {
                return None;
            }
            Some(Nvml {
                _lib: lib,
                clock,
                device: dev,
            })
        }
    }

    fn sm_clock(&self) -> Option<u32> {
        let mut mhz = 0u32;
        // NVML_CLOCK_SM = 1
        let rc = unsafe { (self.clock)(self.device, 1, &mut mhz) };
        (rc == 0).then_some(mhz)
    }
}

/// NVRTC with the options the harness uses; works without a GPU (offline compile checks).
pub struct Compiler {
    pub arch: String,
    pub include: Option<PathBuf>,
    pub nvrtc_version: String,
    pub cache_dir: Option<PathBuf>,
}

impl Compiler {
    pub fn new(arch: &str) -> GResult<Compiler> {
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(gerr(
                "libnvrtc not found: install the CUDA toolkit, or set CUDA_HOME to it",
            ));
        }
        let (mut a, mut b) = (0, 0);
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
        Ok(Compiler {
            arch: arch.to_string(),
            include: super::locate::include_dir(),
            nvrtc_version: format!("{a}.{b}"),
            cache_dir: dirs::cache_dir().map(|d| d.join("atrex-tui").join("cubin")),
        })
    }

    fn options(&self, defines: &[String]) -> Vec<String> {
        let mut o = vec![
            format!("--gpu-architecture={}", self.arch),
            "-std=c++17".to_string(),
            "-lineinfo".to_string(),
            "--device-as-default-execution-space".to_string(),
            // Quoted includes are never looked up beside the worker (see `includes`).
            "--no-source-include".to_string(),
        ];
        if let Some(inc) = &self.include {
            o.push(format!("-I{}", inc.display()));
        }
        o.extend(defines.iter().cloned());
        o
    }

    /// NVRTC straight to CUBIN, cached on disk by hash of (source, options, architecture, NVRTC).
    fn compile_cubin(&self, src: &str, file: &str, defines: &[String]) -> GResult<Compiled> {
        let allowed = super::includes::Allowed::new(self.include.iter().cloned());
        if let Err(r) = super::includes::check(src, &allowed) {
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

struct Gpu {
    info: DeviceInfo,
    stream: sys::CUstream,
    compiler: Compiler,
    harness: Module,
    modules: HashMap<String, Module>,
    flush: DevBuf,
    nvml: Option<Nvml>,
}

/// The driver and NVRTC, probed without panicking when a library is missing.
pub fn probe(device: Option<u32>) -> Result<(ProbeInfo, Option<DeviceInfo>), String> {
    if !unsafe { sys::is_culib_present() } {
        return Err("libcuda not found (no NVIDIA driver on this machine)".into());
    }
    cu::init().map_err(|e| format!("cuInit failed: {}", GpuError::from(e).msg))?;
    let mut v = 0;
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| GpuError::from(e).msg)?;
    let driver_version = format!("{}.{}", v / 1000, (v % 1000) / 10);
    let nvrtc_version = if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        let (mut a, mut b) = (0, 0);
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
        Some(format!("{a}.{b}"))
    } else {
        None
    };
    let n = cu::device::get_count().map_err(|e| GpuError::from(e).msg)?;
    let mut devices = Vec::new();
    for i in 0..n {
        devices.push(device_info(i as u32).map_err(|e| e.msg)?);
    }
    let chosen = device.and_then(|d| devices.iter().find(|x| x.index == d).cloned());
    Ok((
        ProbeInfo {
            driver_version,
            nvrtc_version,
            devices,
        },
        chosen,
    ))
}

fn device_info(index: u32) -> GResult<DeviceInfo> {
    use sys::CUdevice_attribute::*;
    let dev = cu::device::get(index as i32)?;
    let attr = |a| unsafe { cu::device::get_attribute(dev, a) };
    let cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    // Architecture-specific features (wgmma, setmaxnreg) need the `a` targets on 9.0 and 10.x.
    let suffix = if cc_major >= 9 { "a" } else { "" };
    Ok(DeviceInfo {
        index,
        name: cu::device::get_name(dev)?,
        cc_major,
        cc_minor,
        sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        l2_bytes: attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
        memory_bytes: unsafe { cu::device::total_mem(dev)? } as u64,
        sm_clock_mhz: (attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000) as u32,
        mem_clock_mhz: (attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? / 1000) as u32,
        arch: format!("sm_{cc_major}{cc_minor}{suffix}"),
    })
}

fn sha(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses NVRTC's log into diagnostics on the candidate's own lines.
pub fn parse_nvrtc_log(log: &str, file: &str) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for l in log.lines() {
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

/// The plan of a source and the defines in use (the plan's own, overridden by the source's).
fn plan_and_defines(src: &Source) -> Result<(Plan, BTreeMap<String, Value>), plan::PlanError> {
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
fn send_plan_error(
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

/// The outcome of timing one shape.
#[derive(Default)]
struct Timed {
    /// None when cancelled.
    stats: Option<stats::TimingStats>,
    /// Why the timed runs cannot be trusted (inputs modified, outputs differ from the check).
    broken: Option<String>,
    cancelled: bool,
}

struct Compiled {
    cubin: Vec<u8>,
    log: String,
    ok: bool,
    cached: bool,
}

impl Gpu {
    fn new(index: u32) -> GResult<Gpu> {
        cu::init()?;
        let info = device_info(index)?;
        let dev = cu::device::get(index as i32)?;
        unsafe {
            let ctx = cu::primary_ctx::retain(dev)?;
            cu::ctx::set_current(ctx)?;
        }
        let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)?;
        let compiler = Compiler::new(&info.arch)?;
        let mut pci = [0i8; 32];
        let pci_id = unsafe {
            sys::cuDeviceGetPCIBusId(pci.as_mut_ptr(), 32, dev).result()?;
            CStr::from_ptr(pci.as_ptr()).to_string_lossy().into_owned()
        };
        // The L2 flush buffer: at least twice the L2 size.
        let flush = DevBuf::new((2 * info.l2_bytes as usize).max(8 << 20))?;
        let mut g = Gpu {
            info,
            stream,
            compiler,
            harness: Module {
                module: std::ptr::null_mut(),
                functions: HashMap::new(),
            },
            modules: HashMap::new(),
            flush,
            nvml: Nvml::open(&pci_id),
        };
        let c = g.compiler.compile_cubin(HARNESS_SRC, "harness.cu", &[])?;
        if !c.ok {
            return Err(gerr(format!("the harness failed to compile:\n{}", c.log)));
        }
        g.harness = g.load_module(&c.cubin)?;
        Ok(g)
    }

    fn load_module(&self, cubin: &[u8]) -> GResult<Module> {
        let module = unsafe { cu::module::load_data(cubin.as_ptr() as *const c_void) }?;
        Ok(Module {
            module,
            functions: HashMap::new(),
        })
    }

    /// Parses the plan, compiles and loads a source. Sends the `Compiled` event.
    fn prepare(
        &mut self,
        out: &Out,
        id: u64,
        which: &str,
        src: &Source,
    ) -> GResult<Result<Loaded, (Verdict, String)>> {
        let t0 = Instant::now();
        let (plan, defines) = match plan_and_defines(src) {
            Ok(x) => x,
            Err(e) => return Ok(Err(send_plan_error(out, id, which, src, &e))),
        };
        let dopts = plan::define_options(&defines);
        let file = "candidate.cu";
        let c = self.compiler.compile_cubin(&src.code, file, &dopts)?;
        let diagnostics = parse_nvrtc_log(&c.log, file);
        if !c.ok {
            out.send(&Event::Compiled {
                id,
                which: which.into(),
                ok: false,
                cached: false,
                ms: t0.elapsed().as_secs_f64() * 1e3,
                diagnostics,
                log: c.log.clone(),
                resources: BTreeMap::new(),
            });
            let first = c
                .log
                .lines()
                .find(|l| l.contains("error"))
                .unwrap_or("")
                .to_string();
            return Ok(Err((
                Verdict::CompileError,
                format!("{}: compile error {first}", src.name),
            )));
        }
        let key = sha(&[&src.code, &dopts.join(" ")]);
        if !self.modules.contains_key(&key) {
            let m = self.load_module(&c.cubin)?;
            self.modules.insert(key.clone(), m);
        }
        let mut resources = BTreeMap::new();
        let mut missing = None;
        if let Some(m) = self.modules.get_mut(&key) {
            for l in &plan.launches {
                match m.function(&l.kernel) {
                    Ok(f) => {
                        use sys::CUfunction_attribute::*;
                        let get =
                            |a| unsafe { cu::function::get_function_attribute(f, a) }.unwrap_or(-1);
                        resources.insert(
                            l.kernel.clone(),
                            KernelResources {
                                registers: get(CU_FUNC_ATTRIBUTE_NUM_REGS),
                                static_smem: get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                                local_bytes: get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
                                max_threads: get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                            },
                        );
                    }
                    Err(e) => missing = Some((l.line, e.msg)),
                }
            }
        }
        let mut diagnostics = diagnostics;
        if let Some((line, msg)) = &missing {
            diagnostics.push(Diagnostic {
                line: *line,
                severity: "error".into(),
                msg: msg.clone(),
            });
        }
        out.send(&Event::Compiled {
            id,
            which: which.into(),
            ok: missing.is_none(),
            cached: c.cached,
            ms: t0.elapsed().as_secs_f64() * 1e3,
            diagnostics,
            log: c.log,
            resources,
        });
        if let Some((_, msg)) = missing {
            return Ok(Err((Verdict::PlanError, format!("{}: {msg}", src.name))));
        }
        Ok(Ok(Loaded { key, plan, defines }))
    }

    fn sync(&self) -> GResult<()> {
        unsafe { cu::stream::synchronize(self.stream) }?;
        Ok(())
    }

    fn launch_raw(
        &self,
        f: sys::CUfunction,
        grid: u32,
        block: u32,
        args: &mut [*mut c_void],
    ) -> GResult<()> {
        unsafe { cu::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, self.stream, args) }?;
        Ok(())
    }

    fn grid_for(&self, n: u64) -> u32 {
        let max = (self.info.sm_count.max(1) as u64) * 8;
        n.div_ceil(256).clamp(1, max) as u32
    }

    /// Fills a tensor per its generator.
    fn generate(&mut self, buf: &DevBuf, t: &TensorDesc, seed: u64, stream_id: u64) -> GResult<()> {
        let Some(g) = &t.generator else {
            return Err(gerr(format!("input `{}` has no generator", t.name)));
        };
        let n = t.elements();
        if n == 0 {
            return Ok(());
        }
        if g.kind == "zeros" {
            unsafe { cu::memset_d8_async(buf.ptr, 0, buf.bytes, self.stream) }?;
            return Ok(());
        }
        let dt = match t.dtype.as_str() {
            "bf16" | "fp16" | "fp32" | "int32" | "int64" => t.dtype.as_str(),
            other => {
                return Err(gerr(format!(
                    "input `{}`: no generator for dtype {other} yet",
                    t.name
                )));
            }
        };
        let is_int = dt.starts_with("int");
        let kind = match (g.kind.as_str(), is_int) {
            ("normal" | "one_plus_normal" | "uniform", false) => g.kind.as_str(),
            ("const", _) => {
                if is_int {
                    "arange_const"
                } else {
                    "const"
                }
            }
            ("randint" | "arange", true) => g.kind.as_str(),
            ("custom", _) => {
                return Err(gerr(format!(
                    "input `{}` is generated by the operator's inputs.cu",
                    t.name
                )));
            }
            (k, _) => {
                return Err(gerr(format!(
                    "input `{}`: generator `{k}` does not apply to {dt}",
                    t.name
                )));
            }
        };
        let a = g.args.first().copied().unwrap_or(0.0);
        let b = g.args.get(1).copied().unwrap_or(0.0);
        let (fname, mut storage): (String, [u64; 6]) = if is_int {
            // const for integers: arange with a span of 0 is not possible; use randint over [a, a+1).
            let (k, lo, hi) = match kind {
                "arange_const" => ("randint", a as i64, a as i64 + 1),
                "arange" => ("arange", 0i64, 0i64),
                _ => ("randint", a as i64, b as i64),
            };
            if k == "randint" && hi <= lo {
                return Err(gerr(format!(
                    "input `{}`: randint({lo}, {hi}) is an empty range",
                    t.name
                )));
            }
            (
                format!("gen_{k}_{dt}"),
                [buf.ptr, n, seed, stream_id, lo as u64, hi as u64],
            )
        } else {
            let (fa, fb) = match kind {
                "normal" | "one_plus_normal" => {
                    (if g.args.is_empty() { 1.0 } else { a as f32 }, 0.0f32)
                }
                _ => (a as f32, b as f32),
            };
            (
                format!("gen_{kind}_{dt}"),
                [
                    buf.ptr,
                    n,
                    seed,
                    stream_id,
                    fa.to_bits() as u64,
                    fb.to_bits() as u64,
                ],
            )
        };
        let f = self.harness.function(&fname)?;
        let mut args: Vec<*mut c_void> = storage
            .iter_mut()
            .map(|x| x as *mut u64 as *mut c_void)
            .collect();
        let grid = self.grid_for(n);
        self.launch_raw(f, grid, 256, &mut args)
    }

    /// Generates every input of a shape: built-in generators, then the operator's own generator
    /// kernel (with `seed` in its environment) for `custom` inputs.
    fn generate_all(
        &mut self,
        tensors: &[TensorDesc],
        bufs: &[DevBuf],
        env: &Env,
        seed: u64,
        custom: Option<&Loaded>,
    ) -> GResult<()> {
        let mut any_custom = false;
        for (i, (t, b)) in tensors.iter().zip(bufs).enumerate() {
            if t.generator
                .as_ref()
                .map(|g| g.kind == "custom")
                .unwrap_or(false)
            {
                any_custom = true;
            } else {
                self.generate(b, t, seed, i as u64)?;
            }
        }
        if any_custom {
            let Some(l) = custom else {
                return Err(gerr(
                    "an input is `custom` but the operator has no inputs.cu generator",
                ));
            };
            let mut map = HashMap::new();
            for (t, b) in tensors.iter().zip(bufs) {
                map.insert(t.name.clone(), b.ptr);
            }
            let mut env = env.clone();
            env.insert("seed".into(), Value::Int(seed as i128));
            self.enqueue(l, &env, &map)?;
        }
        Ok(())
    }

    fn checksum(&mut self, buf: &DevBuf, scratch: &DevBuf) -> GResult<u64> {
        unsafe { cu::memset_d8_async(scratch.ptr, 0, 8, self.stream) }?;
        let f = self.harness.function("checksum")?;
        let mut storage = [buf.ptr, buf.bytes as u64, scratch.ptr];
        let mut args: Vec<*mut c_void> = storage
            .iter_mut()
            .map(|x| x as *mut u64 as *mut c_void)
            .collect();
        let grid = self.grid_for((buf.bytes / 8) as u64);
        self.launch_raw(f, grid, 256, &mut args)?;
        self.sync()?;
        let mut h = [0u64; 1];
        unsafe { cu::memcpy_dtoh_sync(&mut h, scratch.ptr) }?;
        Ok(h[0])
    }

    /// Elements of `cand` that fail both levels against `reference` (harness `timed_check`):
    /// (count, first index).
    fn timed_check(
        &mut self,
        t: &TensorDesc,
        reference: &DevBuf,
        cand: &DevBuf,
        tol: compare::Tol,
        scratch: &DevBuf,
    ) -> GResult<(u64, u64)> {
        let code: u64 = match t.dtype.as_str() {
            "bf16" => 0,
            "fp16" => 1,
            "fp32" | "tf32" => 2,
            "fp64" => 3,
            "fp8_e4m3" => 4,
            "fp8_e4m3fnuz" => 5,
            "int8" => 6,
            "uint8" | "bool" => 7,
            "int32" => 8,
            "int64" => 9,
            other => return Err(gerr(format!("no timed-run check for dtype {other}"))),
        };
        let es = crate::suite::dtype_size(&t.dtype).unwrap_or(1) as u64;
        let n = t.elements();
        // count = 0, first = u64::MAX, on the harness's stream (ordered with the kernels).
        unsafe {
            cu::memset_d8_async(scratch.ptr, 0, 8, self.stream)?;
            cu::memset_d8_async(scratch.ptr + 8, 0xFF, 8, self.stream)?;
        }
        let f = self.harness.function("timed_check")?;
        let mut storage = [
            reference.ptr,
            cand.ptr,
            n,
            code,
            es,
            u64::from(t.compare == "exact"),
            tol.atol.to_bits(),
            tol.rtol.to_bits(),
            scratch.ptr,
        ];
        let mut args: Vec<*mut c_void> = storage
            .iter_mut()
            .map(|x| x as *mut u64 as *mut c_void)
            .collect();
        let grid = self.grid_for(n);
        self.launch_raw(f, grid, 256, &mut args)?;
        self.sync()?;
        let mut h = [0u64; 2];
        unsafe { cu::memcpy_dtoh_sync(&mut h, scratch.ptr) }?;
        Ok((h[0], h[1]))
    }

    fn poison(&self, buf: &DevBuf, dtype: &str, which: u8) -> GResult<()> {
        let p = compare::poison(dtype, which);
        unsafe {
            match p.len() {
                1 => cu::memset_d8_async(buf.ptr, p[0], buf.bytes, self.stream)?,
                2 => sys::cuMemsetD16Async(
                    buf.ptr,
                    u16::from_le_bytes([p[0], p[1]]),
                    buf.bytes / 2,
                    self.stream,
                )
                .result()?,
                _ => sys::cuMemsetD32Async(
                    buf.ptr,
                    u32::from_le_bytes([p[0], p[1], p[2], p[3]]),
                    buf.bytes / 4,
                    self.stream,
                )
                .result()?,
            }
        }
        Ok(())
    }

    fn download(&self, buf: &DevBuf) -> GResult<Vec<u8>> {
        let mut v = vec![0u8; buf.bytes];
        unsafe { cu::memcpy_dtoh_sync(&mut v, buf.ptr) }?;
        Ok(v)
    }

    /// Enqueues the launches of a loaded kernel on one set of buffers (does not synchronize).
    fn enqueue(
        &mut self,
        l: &Loaded,
        env: &Env,
        bufs: &HashMap<String, sys::CUdeviceptr>,
    ) -> GResult<()> {
        let penv = l.plan.env(env, &l.defines);
        let launches = l
            .plan
            .resolve(&penv, &|n| bufs.contains_key(n))
            .map_err(|e| gerr(format!("launch plan line {}: {}", e.line, e.msg)))?;
        let module = self
            .modules
            .get_mut(&l.key)
            .ok_or_else(|| gerr("module not loaded"))?;
        for rl in &launches {
            let f = module.function(&rl.kernel)?;
            let mut storage: Vec<u64> = rl
                .args
                .iter()
                .map(|a| match a {
                    ResolvedArg::Buffer(n) => bufs[n],
                    ResolvedArg::I32(v) => *v as u32 as u64,
                    ResolvedArg::U32(v) => *v as u64,
                    ResolvedArg::I64(v) => *v as u64,
                    ResolvedArg::U64(v) => *v,
                    ResolvedArg::F32(v) => v.to_bits() as u64,
                    ResolvedArg::F64(v) => v.to_bits(),
                })
                .collect();
            let mut args: Vec<*mut c_void> = storage
                .iter_mut()
                .map(|x| x as *mut u64 as *mut c_void)
                .collect();
            if rl.smem > 48 * 1024 {
                unsafe {
                    let _ = cu::function::set_function_attribute(
                        f,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        rl.smem as i32,
                    );
                }
            }
            unsafe {
                cu::launch_kernel(
                    f,
                    (rl.grid[0], rl.grid[1], rl.grid[2]),
                    (rl.block[0], rl.block[1], rl.block[2]),
                    rl.smem,
                    self.stream,
                    &mut args,
                )
            }
            .map_err(|e| {
                let mut g = GpuError::from(e);
                g.msg = format!(
                    "launching {} grid {:?} block {:?} smem {}: {}",
                    rl.kernel, rl.grid, rl.block, rl.smem, g.msg
                );
                g
            })?;
        }
        Ok(())
    }

    fn scratch_for(&self, l: &Loaded, env: &Env) -> GResult<Vec<(String, String, bool, DevBuf)>> {
        let penv = l.plan.env(env, &l.defines);
        let sizes = l
            .plan
            .scratch_sizes(&penv)
            .map_err(|e| gerr(format!("launch plan line {}: {}", e.line, e.msg)))?;
        sizes
            .into_iter()
            .map(|(s, n)| {
                let bytes = n as usize * crate::suite::dtype_size(&s.dtype).unwrap_or(1);
                Ok((s.name, s.dtype, s.zero, DevBuf::new(bytes)?))
            })
            .collect()
    }

    fn reset_scratch(&self, scratch: &[(String, String, bool, DevBuf)]) -> GResult<()> {
        for (_, dtype, zero, b) in scratch {
            if *zero {
                unsafe { cu::memset_d8_async(b.ptr, 0, b.bytes, self.stream) }?;
            } else {
                self.poison(b, dtype, 0)?;
            }
        }
        Ok(())
    }

    /// Runs the candidate once on fresh inputs and returns every tensor (Event::Tensors, id 0).
    fn dump_shape(
        &mut self,
        job: &Job,
        shape: &ShapeJob,
        env: &Env,
        cand: &Loaded,
        custom: Option<&Loaded>,
    ) -> GResult<(u32, u64, Vec<TensorData>, Vec<TensorData>)> {
        use base64::Engine;
        let seed = job.seeds.first().copied().unwrap_or(1);
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
        let scratch = self.scratch_for(cand, env)?;
        let mut map: HashMap<String, sys::CUdeviceptr> = HashMap::new();
        for (t, b) in shape.inputs.iter().zip(&inputs) {
            map.insert(t.name.clone(), b.ptr);
        }
        for (t, b) in shape.outputs.iter().zip(&outputs) {
            map.insert(t.name.clone(), b.ptr);
            self.poison(b, &t.dtype, 0)?;
        }
        for (n, _, _, b) in &scratch {
            map.insert(n.clone(), b.ptr);
        }
        self.generate_all(&shape.inputs, &inputs, env, seed, custom)?;
        self.sync()?;
        let enc = |g: &Gpu, t: &TensorDesc, b: &DevBuf| -> GResult<TensorData> {
            Ok(TensorData {
                name: t.name.clone(),
                dtype: t.dtype.clone(),
                dims: t.dims.clone(),
                data_b64: base64::engine::general_purpose::STANDARD.encode(g.download(b)?),
            })
        };
        let ins: Vec<TensorData> = shape
            .inputs
            .iter()
            .zip(&inputs)
            .map(|(t, b)| enc(self, t, b))
            .collect::<GResult<_>>()?;
        self.reset_scratch(&scratch)?;
        self.enqueue(cand, env, &map)?;
        self.sync()?;
        let outs: Vec<TensorData> = shape
            .outputs
            .iter()
            .zip(&outputs)
            .map(|(t, b)| enc(self, t, b))
            .collect::<GResult<_>>()?;
        Ok((shape.id, seed, ins, outs))
    }

    /// Correctness of one shape over the job's seeds.
    fn check_shape(
        &mut self,
        job: &Job,
        shape: &ShapeJob,
        env: &Env,
        cand: &Loaded,
        reference: &Loaded,
        custom: Option<&Loaded>,
        heartbeat: &dyn Fn(usize),
    ) -> GResult<(bool, bool, Vec<TensorCheck>, Option<String>)> {
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
        let hash_scratch = DevBuf::new(256)?;
        let cand_scratch = self.scratch_for(cand, env)?;
        let ref_scratch = self.scratch_for(reference, env)?;
        let mut map: HashMap<String, sys::CUdeviceptr> = HashMap::new();
        for (t, b) in shape.inputs.iter().zip(&inputs) {
            map.insert(t.name.clone(), b.ptr);
        }
        for (t, b) in shape.outputs.iter().zip(&outputs) {
            map.insert(t.name.clone(), b.ptr);
        }
        let with = |map: &HashMap<String, sys::CUdeviceptr>,
                    s: &[(String, String, bool, DevBuf)]| {
            let mut m = map.clone();
            for (n, _, _, b) in s {
                m.insert(n.clone(), b.ptr);
            }
            m
        };
        let cand_map = with(&map, &cand_scratch);
        let ref_map = with(&map, &ref_scratch);
        let mut worst: Vec<Option<TensorCheck>> = vec![None; shape.outputs.len()];
        // Per output over every seed: both levels passed, and the most shared NaN.
        let mut all_ok: Vec<(bool, bool, u64)> = vec![(true, true, 0); shape.outputs.len()];
        let mut bench_ok = true;
        let mut strict_ok = true;
        let mut message = None;
        for (k, seed) in job.seeds.iter().enumerate() {
            heartbeat(k);
            let regen = |g: &mut Gpu| -> GResult<()> {
                g.generate_all(&shape.inputs, &inputs, env, *seed, custom)
            };
            // Reference.
            regen(self)?;
            for (t, b) in shape.outputs.iter().zip(&outputs) {
                self.poison(b, &t.dtype, 0)?;
            }
            self.reset_scratch(&ref_scratch)?;
            self.enqueue(reference, env, &ref_map)?;
            self.sync()?;
            heartbeat(k);
            let refs: Vec<Vec<u8>> = outputs
                .iter()
                .map(|b| self.download(b))
                .collect::<GResult<_>>()?;
            // Candidate, twice, with different poisons; inputs hashed around the first run.
            let mut runs: Vec<Vec<Vec<u8>>> = Vec::new();
            for which in 0..2u8 {
                regen(self)?;
                let mut before = Vec::new();
                if which == 0 {
                    for (t, b) in shape.inputs.iter().zip(&inputs) {
                        if !t.inplace {
                            before.push((t.name.clone(), self.checksum(b, &hash_scratch)?));
                        }
                    }
                }
                for (t, b) in shape.outputs.iter().zip(&outputs) {
                    self.poison(b, &t.dtype, which)?;
                }
                self.reset_scratch(&cand_scratch)?;
                self.enqueue(cand, env, &cand_map)?;
                self.sync()?;
                heartbeat(k);
                runs.push(
                    outputs
                        .iter()
                        .map(|b| self.download(b))
                        .collect::<GResult<_>>()?,
                );
                if which == 0 {
                    for (t, b) in shape.inputs.iter().zip(&inputs) {
                        if let Some((_, h0)) = before.iter().find(|(n, _)| *n == t.name) {
                            let h1 = self.checksum(b, &hash_scratch)?;
                            if h1 != *h0 {
                                strict_ok = false;
                                bench_ok = false;
                                message.get_or_insert(format!(
                                    "modified input `{}`, which is not declared in-place (seed {seed})",
                                    t.name
                                ));
                            }
                        }
                    }
                }
            }
            for (i, t) in shape.outputs.iter().enumerate() {
                let mode = if t.compare == "exact" {
                    CmpMode::Exact
                } else {
                    CmpMode::Float
                };
                let c = compare::check_tensor(
                    &t.name,
                    &t.dtype,
                    mode,
                    &refs[i],
                    &runs[0][i],
                    &runs[1][i],
                    &compare::poison(&t.dtype, 0),
                    &compare::poison(&t.dtype, 1),
                    job.tolerance,
                    cand.plan.nondeterministic,
                );
                bench_ok &= c.bench_ok;
                strict_ok &= c.strict_ok;
                all_ok[i].0 &= c.bench_ok;
                all_ok[i].1 &= c.strict_ok;
                all_ok[i].2 = all_ok[i].2.max(c.shared_nan);
                if !c.strict_ok && message.is_none() {
                    message = Some(format!(
                        "output `{}` (seed {seed}): {}",
                        t.name,
                        c.reason.clone().unwrap_or_default()
                    ));
                }
                let replace = match &worst[i] {
                    None => true,
                    Some(w) => {
                        (w.strict_ok && !c.strict_ok)
                            || (w.strict_ok == c.strict_ok && c.max_abs > w.max_abs)
                    }
                };
                if replace {
                    worst[i] = Some(c);
                }
            }
        }
        for (w, (b, st, nan)) in worst.iter_mut().zip(&all_ok) {
            if let Some(w) = w {
                w.bench_ok = *b;
                w.strict_ok = *st;
                w.shared_nan = *nan;
            }
        }
        Ok((
            bench_ok,
            strict_ok,
            worst.into_iter().flatten().collect(),
            message,
        ))
    }

    /// Times one shape: cold L2 (flush before every sample), rotating input sets, adaptive count.
    ///
    /// Every sample runs on poisoned outputs (poisoned before the L2 flush, outside the event
    /// pair), so a kernel that skips work whose output is already there is caught. After timing,
    /// inputs that are not in-place must be unchanged, and (when the job carries the reference)
    /// the outputs of each input set's last timed run must match the reference on that set at the
    /// benchmark-compatible level; otherwise the shape is `incorrect`.
    #[allow(clippy::too_many_arguments)]
    fn time_shape(
        &mut self,
        job: &Job,
        shape: &ShapeJob,
        env: &Env,
        cand: &Loaded,
        reference: Option<&Loaded>,
        custom: Option<&Loaded>,
        cancel: &AtomicU64,
        id: u64,
        heartbeat: &dyn Fn(usize),
    ) -> GResult<Timed> {
        let set_bytes: u64 = shape
            .inputs
            .iter()
            .chain(&shape.outputs)
            .map(|t| t.bytes())
            .sum::<u64>()
            .max(1);
        let (free, _) = cu::mem_get_info()?;
        let budget = (free as u64 / 2).min(16 << 30);
        let want = (2 * self.info.l2_bytes).div_ceil(set_bytes).clamp(2, 8);
        let sets = want.min((budget / set_bytes).max(1));
        // Timing inputs are fresh for every job too (derived from the job's fresh seeds).
        let seed0 = job.seeds.first().copied().unwrap_or(1) ^ 0x5EED_7153_0000_0000;
        let set_seed = |s: u64| seed0.wrapping_add((s + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let n_in = shape.inputs.len();
        let hash_scratch = DevBuf::new(256)?;
        let mut bufs: Vec<Vec<DevBuf>> = Vec::new();
        let mut maps = Vec::new();
        let mut hashes: Vec<Vec<(usize, u64)>> = Vec::new();
        let scratch = self.scratch_for(cand, env)?;
        for s in 0..sets {
            let mut m = HashMap::new();
            let ins: Vec<DevBuf> = shape
                .inputs
                .iter()
                .map(|t| DevBuf::new(t.bytes() as usize))
                .collect::<GResult<_>>()?;
            self.generate_all(&shape.inputs, &ins, env, set_seed(s), custom)?;
            let mut h = Vec::new();
            for (i, (t, b)) in shape.inputs.iter().zip(&ins).enumerate() {
                m.insert(t.name.clone(), b.ptr);
                if !t.inplace {
                    h.push((i, self.checksum(b, &hash_scratch)?));
                }
            }
            hashes.push(h);
            let mut owned = ins;
            for t in &shape.outputs {
                let b = DevBuf::new(t.bytes() as usize)?;
                m.insert(t.name.clone(), b.ptr);
                owned.push(b);
            }
            for (n, _, _, b) in &scratch {
                m.insert(n.clone(), b.ptr);
            }
            bufs.push(owned);
            maps.push(m);
        }
        let rule = if job.mode == Mode::Quick {
            StopRule::quick()
        } else {
            StopRule::full()
        };
        // Before each run: the set's outputs poisoned, the scratch reset.
        let prime = |g: &Gpu, set: usize| -> GResult<()> {
            for (t, b) in shape.outputs.iter().zip(&bufs[set][n_in..]) {
                g.poison(b, &t.dtype, 0)?;
            }
            g.reset_scratch(&scratch)
        };
        // Warm-up: at least 3 runs and 10 ms.
        let t0 = Instant::now();
        let mut k = 0usize;
        while k < 3 || (t0.elapsed().as_secs_f64() < 0.01 && k < 100) {
            prime(self, k % maps.len())?;
            self.enqueue(cand, env, &maps[k % maps.len()])?;
            self.sync()?;
            k += 1;
        }
        const BATCH: usize = 16;
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        for _ in 0..BATCH {
            starts.push(cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?);
            ends.push(cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?);
        }
        let mut samples: Vec<f64> = Vec::new();
        let wall = Instant::now();
        let mut cancelled = false;
        let has_inplace = shape.inputs.iter().any(|t| t.inplace);
        // One timed run, flush and all, of input set `set` (batch slot `i`).
        let sample = |g: &mut Gpu, set: usize, i: usize| -> GResult<()> {
            prime(g, set)?;
            unsafe {
                sys::cuMemsetD32Async(g.flush.ptr, i as u32, g.flush.bytes / 4, g.stream)
                    .result()?;
                cu::event::record(starts[i], g.stream)?;
            }
            g.enqueue(cand, env, &maps[set])?;
            unsafe { cu::event::record(ends[i], g.stream) }?;
            Ok(())
        };
        // Batches of about 50 ms of kernel time (1 to 16 samples), so that slow kernels still
        // report progress well inside the watchdog.
        let mut batch = BATCH;
        let result = (|| -> GResult<()> {
            loop {
                if let Some(last) = samples.last() {
                    batch = ((50.0 / last.max(1e-3)) as usize).clamp(1, BATCH);
                }
                for i in 0..batch {
                    sample(self, (samples.len() + i) % maps.len(), i)?;
                }
                self.sync()?;
                for i in 0..batch {
                    samples.push(unsafe { cu::event::elapsed(starts[i], ends[i]) }? as f64);
                }
                heartbeat(samples.len());
                if rule.done(&samples, wall.elapsed().as_secs_f64() * 1e3) {
                    break;
                }
                if cancel.load(Ordering::SeqCst) == id {
                    cancelled = true;
                    return Ok(());
                }
            }
            // In-place inputs drift over repeated runs: one more timed run per set on freshly
            // generated inputs, so that the run checked below is one on known inputs.
            if has_inplace && reference.is_some() {
                for set in 0..maps.len() {
                    self.generate_all(
                        &shape.inputs,
                        &bufs[set][..n_in],
                        env,
                        set_seed(set as u64),
                        custom,
                    )?;
                    sample(self, set, 0)?;
                    self.sync()?;
                    samples.push(unsafe { cu::event::elapsed(starts[0], ends[0]) }? as f64);
                }
            }
            Ok(())
        })();
        for e in starts.iter().chain(&ends) {
            unsafe {
                let _ = cu::event::destroy(*e);
            }
        }
        result?;
        if cancelled {
            return Ok(Timed {
                cancelled: true,
                ..Default::default()
            });
        }
        heartbeat(samples.len());
        let clock = self.nvml.as_ref().and_then(|n| n.sm_clock());
        let stats = stats::summarize(&samples, job.mode == Mode::Quick, clock);
        // Inputs that are not in-place are as generated.
        for (set, h) in hashes.iter().enumerate() {
            for (i, h0) in h {
                if self.checksum(&bufs[set][*i], &hash_scratch)? != *h0 {
                    return Ok(Timed {
                        stats,
                        broken: Some(format!(
                            "input `{}` was modified during timing, and it is not declared in-place",
                            shape.inputs[*i].name
                        )),
                        ..Default::default()
                    });
                }
            }
        }
        // The last timed run of each set against the reference on the same inputs.
        let Some(reference) = reference else {
            return Ok(Timed {
                stats,
                ..Default::default()
            });
        };
        let ref_scratch = self.scratch_for(reference, env)?;
        let ref_outs: Vec<DevBuf> = shape
            .outputs
            .iter()
            .map(|t| DevBuf::new(t.bytes() as usize))
            .collect::<GResult<_>>()?;
        for set in 0..maps.len() {
            if has_inplace {
                self.generate_all(
                    &shape.inputs,
                    &bufs[set][..n_in],
                    env,
                    set_seed(set as u64),
                    custom,
                )?;
            }
            let mut m = maps[set].clone();
            for (n, _, _, b) in &ref_scratch {
                m.insert(n.clone(), b.ptr);
            }
            for (t, b) in shape.outputs.iter().zip(&ref_outs) {
                self.poison(b, &t.dtype, 1)?;
                m.insert(t.name.clone(), b.ptr);
            }
            self.reset_scratch(&ref_scratch)?;
            self.enqueue(reference, env, &m)?;
            for (i, t) in shape.outputs.iter().enumerate() {
                let (bad, first) = self.timed_check(
                    t,
                    &ref_outs[i],
                    &bufs[set][n_in + i],
                    job.tolerance,
                    &hash_scratch,
                )?;
                if bad > 0 {
                    let es = crate::suite::dtype_size(&t.dtype).unwrap_or(1);
                    let at = |b: &DevBuf| -> GResult<f64> {
                        let mut v = vec![0u8; es];
                        unsafe { cu::memcpy_dtoh_sync(&mut v, b.ptr + first * es as u64) }?;
                        Ok(compare::decode(&t.dtype, &v))
                    };
                    let (r, x) = (at(&ref_outs[i])?, at(&bufs[set][n_in + i])?);
                    let poisoned = {
                        let mut v = vec![0u8; es];
                        unsafe {
                            cu::memcpy_dtoh_sync(
                                &mut v,
                                bufs[set][n_in + i].ptr + first * es as u64,
                            )
                        }?;
                        v == compare::poison(&t.dtype, 0)
                    };
                    return Ok(Timed {
                        stats,
                        broken: Some(format!(
                            "output of a timed run differs from the check: `{}` on timing input set {} of {}: {bad} of {} elements differ from the reference, the first at index {first} (reference {r}, timed run {x}{})",
                            t.name,
                            set + 1,
                            maps.len(),
                            t.elements(),
                            if poisoned {
                                ", the poison: never written"
                            } else {
                                ""
                            }
                        )),
                        ..Default::default()
                    });
                }
            }
            heartbeat(samples.len());
        }
        Ok(Timed {
            stats,
            ..Default::default()
        })
    }

    fn calibrate(&mut self) -> GResult<(f64, u64, f64)> {
        let bytes: usize = 1 << 30;
        let src = DevBuf::new(bytes)?;
        let dst = DevBuf::new(bytes)?;
        unsafe { cu::memset_d8_async(src.ptr, 0x5A, bytes, self.stream) }?;
        let f = self.harness.function("copy16")?;
        let n = (bytes / 16) as u64;
        let grid = (self.info.sm_count.max(1) as u32) * 16;
        let mut samples = Vec::new();
        let start = cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        let end = cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        for i in 0..23 {
            let mut storage = [src.ptr, dst.ptr, n];
            let mut args: Vec<*mut c_void> = storage
                .iter_mut()
                .map(|x| x as *mut u64 as *mut c_void)
                .collect();
            unsafe { cu::event::record(start, self.stream) }?;
            self.launch_raw(f, grid, 512, &mut args)?;
            unsafe { cu::event::record(end, self.stream) }?;
            self.sync()?;
            if i >= 3 {
                samples.push(unsafe { cu::event::elapsed(start, end) }? as f64);
            }
        }
        unsafe {
            let _ = cu::event::destroy(start);
            let _ = cu::event::destroy(end);
        }
        let med = crate::roofline::median(&samples);
        Ok((2.0 * bytes as f64 / (med * 1e-3), 2 * bytes as u64, med))
    }

    /// Tensor-core rate (FLOP/s) of mma.sync m16n8k16 bf16 → fp32 from registers, all SMs busy
    /// (4 blocks of 4 warps per SM, 8 independent accumulator chains per warp). None before sm_80.
    fn calibrate_mma(&mut self) -> GResult<Option<f64>> {
        if self.info.cc_major < 8 {
            return Ok(None);
        }
        let f = self.harness.function("mma_rate")?;
        let (grid, block) = ((self.info.sm_count.max(1) as u32) * 4, 128u32);
        let out = DevBuf::new(grid as usize * block as usize * 4)?;
        let iters: i32 = 8192;
        let flops = grid as f64 * (block / 32) as f64 * iters as f64 * 8.0 * 4096.0;
        let start = cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        let end = cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        let mut samples = Vec::new();
        let mut result = Ok(());
        for i in 0..23 {
            let mut ptr = out.ptr;
            let mut n = iters;
            let mut args: Vec<*mut c_void> = vec![
                &mut ptr as *mut u64 as *mut c_void,
                &mut n as *mut i32 as *mut c_void,
            ];
            let step = (|| -> GResult<f64> {
                unsafe { cu::event::record(start, self.stream) }?;
                self.launch_raw(f, grid, block, &mut args)?;
                unsafe { cu::event::record(end, self.stream) }?;
                self.sync()?;
                Ok(unsafe { cu::event::elapsed(start, end) }? as f64)
            })();
            match step {
                Ok(ms) if i >= 3 => samples.push(ms),
                Ok(_) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        unsafe {
            let _ = cu::event::destroy(start);
            let _ = cu::event::destroy(end);
        }
        result?;
        let med = crate::roofline::median(&samples);
        Ok((med > 0.0).then(|| flops / (med * 1e-3)))
    }
}

fn env_from_json(m: &BTreeMap<String, serde_json::Value>) -> Env {
    m.iter()
        .filter_map(|(k, v)| Value::from_json(v).map(|x| (k.clone(), x)))
        .collect()
}

/// Compile-only without a GPU: launch plan and NVRTC diagnostics for the job's target.
fn compile_offline(out: &Out, id: u64, job: &Job) -> (Verdict, Option<String>) {
    let arch = job.arch.clone().unwrap_or_else(|| "sm_90a".to_string());
    let compiler = match Compiler::new(&arch) {
        Ok(c) => c,
        Err(e) => return (Verdict::Error, Some(format!("no GPU, and {}", e.msg))),
    };
    let src = &job.candidate;
    let t0 = Instant::now();
    let defines = match plan_and_defines(src) {
        Ok((_, d)) => d,
        Err(e) => {
            let (v, m) = send_plan_error(out, id, "candidate", src, &e);
            return (v, Some(m));
        }
    };
    let c = match compiler.compile_cubin(&src.code, "candidate.cu", &plan::define_options(&defines))
    {
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

/// Runs one job. Returns Err only for GPU errors (sticky ones end the worker).
fn run_job(
    g: &mut Gpu,
    out: &Out,
    id: u64,
    job: &Job,
    cancel: &AtomicU64,
    printed: &mut Printed,
) -> GResult<(Verdict, Option<String>)> {
    let cand = match g.prepare(out, id, "candidate", &job.candidate)? {
        Ok(l) => l,
        Err((v, msg)) => return Ok((v, Some(msg))),
    };
    if job.kind == JobKind::Compile {
        return Ok((Verdict::Pass, None));
    }
    let custom = match &job.generator {
        Some(src) => match g.prepare(out, id, "generator", src)? {
            Ok(l) => Some(l),
            Err((v, msg)) => {
                return Ok((
                    Verdict::Error,
                    Some(format!(
                        "the input generator does not build ({}): {msg}",
                        v.name()
                    )),
                ));
            }
        },
        None => None,
    };
    if job.kind == JobKind::Dump {
        for (k, shape) in job.shapes.iter().enumerate() {
            out.send(&Event::Progress {
                id,
                stage: "dump".into(),
                shape: Some(shape.id),
                done: k,
                total: job.shapes.len(),
            });
            let env = env_from_json(&shape.env);
            let r = g.dump_shape(job, shape, &env, &cand, custom.as_ref());
            printed.send(out, id, Some(shape.id));
            match r {
                Ok((shape_id, seed, inputs, outputs)) => out.send(&Event::Tensors {
                    id,
                    shape: shape_id,
                    seed,
                    inputs,
                    outputs,
                }),
                Err(e) if e.sticky => return Err(e),
                Err(e) => {
                    return Ok((
                        Verdict::Error,
                        Some(format!("shape {}: {}", shape.id, e.msg)),
                    ));
                }
            }
        }
        return Ok((Verdict::Pass, None));
    }
    let needs_check = matches!(job.kind, JobKind::Check | JobKind::All);
    if needs_check && job.reference.is_none() {
        return Ok((
            Verdict::Error,
            Some("a check needs the reference kernel".into()),
        ));
    }
    // The reference also checks what timed runs wrote, in timing-only jobs too.
    let reference = match &job.reference {
        Some(r) => match g.prepare(out, id, "reference", r)? {
            Ok(l) => Some(l),
            Err((v, msg)) => {
                return Ok((
                    Verdict::Error,
                    Some(format!(
                        "the reference does not build ({}): {msg}",
                        v.name()
                    )),
                ));
            }
        },
        None => None,
    };
    let total = job.shapes.len();
    let mut overall = Verdict::Pass;
    let mut first_msg = None;
    for (k, shape) in job.shapes.iter().enumerate() {
        if cancel.load(Ordering::SeqCst) == id {
            return Ok((
                Verdict::Cancelled,
                Some(format!("cancelled after {k} of {total} shapes")),
            ));
        }
        let env = env_from_json(&shape.env);
        let mut res = ShapeResult {
            shape: shape.id,
            verdict: Verdict::Pass,
            checks: Vec::new(),
            bench_ok: false,
            strict_ok: false,
            seeds_checked: 0,
            timing: None,
            sol_ms: shape.sol_s * 1e3,
            s: None,
            message: None,
            device: Some(g.info.index),
        };
        let mut ok_to_time = true;
        if let (true, Some(r)) = (needs_check, &reference) {
            out.send(&Event::Progress {
                id,
                stage: "check".into(),
                shape: Some(shape.id),
                done: k,
                total,
            });
            let nseeds = job.seeds.len();
            let beat = |k: usize| {
                out.send(&Event::Progress {
                    id,
                    stage: format!("check seed {}/{nseeds}", k + 1),
                    shape: Some(shape.id),
                    done: k,
                    total,
                })
            };
            match g.check_shape(job, shape, &env, &cand, r, custom.as_ref(), &beat) {
                Ok((b, s, checks, msg)) => {
                    res.bench_ok = b;
                    res.strict_ok = s;
                    res.checks = checks;
                    res.seeds_checked = job.seeds.len();
                    if !s {
                        res.verdict = Verdict::Incorrect;
                        res.message = msg;
                        ok_to_time = false;
                    }
                }
                Err(e) if e.sticky => {
                    printed.send(out, id, Some(shape.id));
                    return Err(e);
                }
                Err(e) => {
                    res.verdict = Verdict::Error;
                    res.message = Some(e.msg);
                    ok_to_time = false;
                }
            }
            out.send(&Event::Checked {
                id,
                result: res.clone(),
            });
        } else {
            res.verdict = Verdict::Unchecked;
        }
        if ok_to_time && matches!(job.kind, JobKind::Time | JobKind::All) {
            out.send(&Event::Progress {
                id,
                stage: "time".into(),
                shape: Some(shape.id),
                done: k,
                total,
            });
            let beat = |n: usize| {
                out.send(&Event::Progress {
                    id,
                    stage: format!("time ({n} samples)"),
                    shape: Some(shape.id),
                    done: k,
                    total,
                })
            };
            let timed = g.time_shape(
                job,
                shape,
                &env,
                &cand,
                reference.as_ref(),
                custom.as_ref(),
                cancel,
                id,
                &beat,
            );
            match timed {
                Ok(t) if t.cancelled => {
                    res.verdict = Verdict::Cancelled;
                }
                Ok(Timed {
                    stats: Some(t),
                    broken: None,
                    ..
                }) => {
                    let t_s = t.median_ms * 1e-3;
                    let s = crate::roofline::speed_of_light_fraction(shape.sol_s, t_s);
                    if shape.sol_s > 0.0 && t_s < shape.sol_s {
                        res.verdict = Verdict::Impossible;
                        res.message = Some(format!(
                            "measured {:.4} ms is below the speed of light {:.4} ms: the kernel cannot have done the work",
                            t.median_ms,
                            shape.sol_s * 1e3
                        ));
                    } else {
                        res.s = Some(s);
                    }
                    res.timing = Some(t);
                }
                Ok(Timed {
                    stats,
                    broken: Some(why),
                    ..
                }) => {
                    res.verdict = Verdict::Incorrect;
                    res.bench_ok = false;
                    res.strict_ok = false;
                    res.message = Some(why);
                    res.timing = stats;
                }
                Ok(Timed { stats: None, .. }) => {
                    res.verdict = Verdict::Error;
                    res.message = Some("timing produced no samples".into());
                }
                Err(e) if e.sticky => {
                    printed.send(out, id, Some(shape.id));
                    return Err(e);
                }
                Err(e) => {
                    res.verdict = Verdict::Error;
                    res.message = Some(e.msg);
                }
            }
        }
        if res.verdict != Verdict::Pass
            && res.verdict != Verdict::Unchecked
            && overall == Verdict::Pass
        {
            overall = res.verdict.clone();
            first_msg = res
                .message
                .clone()
                .map(|m| format!("shape {}: {m}", shape.id));
        }
        printed.send(out, id, Some(shape.id));
        out.send(&Event::ShapeDone { id, result: res });
    }
    out.send(&Event::Progress {
        id,
        stage: "done".into(),
        shape: None,
        done: total,
        total,
    });
    Ok((overall, first_msg))
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
    let run = || -> Result<(), String> {
        let mut g = Gpu::new(device).map_err(|e| e.msg)?;
        let cand = g
            .prepare(&out, 0, "candidate", &job.candidate)
            .map_err(|e| e.msg)?
            .map_err(|(_, m)| m)?;
        let custom = match &job.generator {
            Some(src) => Some(
                g.prepare(&out, 0, "generator", src)
                    .map_err(|e| e.msg)?
                    .map_err(|(_, m)| m)?,
            ),
            None => None,
        };
        let shape = job.shapes.first().ok_or("the job has no shape")?;
        let env = env_from_json(&shape.env);
        let inputs: Vec<DevBuf> = shape
            .inputs
            .iter()
            .map(|t| DevBuf::new(t.bytes() as usize))
            .collect::<GResult<_>>()
            .map_err(|e| e.msg)?;
        let outputs: Vec<DevBuf> = shape
            .outputs
            .iter()
            .map(|t| DevBuf::new(t.bytes() as usize))
            .collect::<GResult<_>>()
            .map_err(|e| e.msg)?;
        let scratch = g.scratch_for(&cand, &env).map_err(|e| e.msg)?;
        let mut map: HashMap<String, sys::CUdeviceptr> = HashMap::new();
        for (t, b) in shape.inputs.iter().zip(&inputs) {
            map.insert(t.name.clone(), b.ptr);
        }
        for (t, b) in shape.outputs.iter().zip(&outputs) {
            map.insert(t.name.clone(), b.ptr);
            g.poison(b, &t.dtype, 0).map_err(|e| e.msg)?;
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
        )
        .map_err(|e| e.msg)?;
        g.reset_scratch(&scratch).map_err(|e| e.msg)?;
        g.enqueue(&cand, &env, &map).map_err(|e| e.msg)?;
        g.sync().map_err(|e| e.msg)?;
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

/// The worker's main loop. Returns the process exit code.
pub fn main(device: u32) -> i32 {
    // The protocol moves off fd 1 before anything can print there (see `stdio`).
    let (proto, mut capture) = match super::stdio::isolate() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("atrex-tui worker: cannot set up its standard streams: {e}");
            return 1;
        }
    };
    let out = Out::new(proto);
    let cancel = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel::<Request>();
    {
        let cancel = cancel.clone();
        let out = out.clone();
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
            let _ = tx.send(Request::Shutdown);
        });
    }
    let mut gpu: Option<Gpu> = None;
    let mut init_error: Option<String> = None;
    let ensure = |gpu: &mut Option<Gpu>, init_error: &mut Option<String>| -> Result<(), String> {
        if gpu.is_some() {
            return Ok(());
        }
        if let Some(e) = init_error {
            return Err(e.clone());
        }
        if let Err(e) = probe(Some(device)) {
            *init_error = Some(e.clone());
            return Err(e);
        }
        match Gpu::new(device) {
            Ok(g) => {
                *gpu = Some(g);
                Ok(())
            }
            Err(e) => {
                *init_error = Some(e.msg.clone());
                Err(e.msg)
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
                        probe: p,
                        device: d,
                    });
                }
                Err(e) => out.send(&Event::Error { id, message: e }),
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
                            message: e.msg.clone(),
                        });
                        if e.sticky {
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
                        let message = format!("{}: {}", job.candidate.name, e.msg);
                        if e.sticky {
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
}
