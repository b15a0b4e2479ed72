//! Device memory, modules, the GPU context and launching: what every stage of a job runs on.
//!
//! Invariants (what the `// SAFETY:` comments of the worker rely on): `Gpu::new` makes the
//! device's primary context current on the worker's thread and never releases it, so it is
//! current for every later driver call; `Gpu` holds raw driver handles, so it is neither `Send`
//! nor `Sync` and every method runs on that thread. Buffers (`DevBuf`) are allocated at least
//! 256 bytes and freed once, on drop; modules are never unloaded, so a function handle from
//! one stays valid for the process; the stream is created once and never destroyed.

use super::*;

/// Device memory, freed on drop.
pub(super) struct DevBuf {
    pub(super) ptr: sys::CUdeviceptr,
    pub(super) bytes: usize,
}

/// The byte sizes of the live buffers by address: what a buffer holds as the harness sized it
/// (the allocation itself may be larger), for the checks of tensor maps.
static SIZES: Mutex<BTreeMap<sys::CUdeviceptr, usize>> = Mutex::new(BTreeMap::new());

impl DevBuf {
    pub(super) fn new(bytes: usize) -> GResult<DevBuf> {
        // SAFETY: cuMemAlloc writes only the returned address (cudarc's out-parameter). Its
        // memory is uninitialised, which is sound here: device memory never becomes a Rust
        // value; the harness fills or poisons it before anything reads it back.
        let ptr = unsafe { cu::malloc_sync(bytes.max(256)) }
            .map_err(|e| GpuError::from(e).during(format!("allocating {bytes} bytes")))?;
        SIZES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ptr, bytes);
        Ok(DevBuf { ptr, bytes })
    }

    /// The size of the live buffer at `ptr`, as the harness sized it.
    pub(super) fn size_at(ptr: sys::CUdeviceptr) -> Option<usize> {
        SIZES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&ptr)
            .copied()
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        SIZES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.ptr);
        // A free that fails leaves nothing to do: the context is going away with it.
        // SAFETY: `ptr` came from cuMemAlloc in `new` and is freed only here, once (a DevBuf is
        // neither Clone nor Copy); cuMemFree synchronises with the context's work in flight
        // before it frees, so no enqueued kernel or copy is cut off. The context is still current: it is
        // never released.
        if unsafe { cu::free_sync(self.ptr) }.is_err() {}
    }
}

pub(super) struct Module {
    pub(super) module: sys::CUmodule,
    pub(super) functions: HashMap<String, sys::CUfunction>,
}

impl Module {
    pub(super) fn function(&mut self, name: &str) -> GResult<sys::CUfunction> {
        if let Some(f) = self.functions.get(name) {
            return Ok(*f);
        }
        let c = CString::new(name).map_err(|_| gerr("bad kernel name"))?;
        // SAFETY: `self.module` was loaded by `Gpu::load_module` and is never unloaded; the name
        // is a NUL-terminated C string owned for the call. A missing name is an error, not UB.
        let f = unsafe { cu::module::get_function(self.module, c) }.map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_NOT_FOUND {
                GpuError::KernelNotFound(name.to_string())
            } else {
                GpuError::from(e)
            }
        })?;
        self.functions.insert(name.to_string(), f);
        Ok(f)
    }
}

/// A compiled candidate ready to launch.
pub(super) struct Loaded {
    pub(super) key: String,
    pub(super) plan: Plan,
    pub(super) defines: BTreeMap<String, Value>,
}

pub(super) struct Nvml {
    pub(super) _lib: libloading::Library,
    pub(super) clock: unsafe extern "C" fn(*mut c_void, u32, *mut u32) -> i32,
    pub(super) device: *mut c_void,
}

impl Nvml {
    /// NVML for the current SM clock; optional (None when the library is missing).
    pub(super) fn open(pci_bus_id: &str) -> Option<Nvml> {
        // SAFETY: the three symbols are declared with the signatures of NVML's header
        // (`nvmlInit_v2(void)`, `nvmlDeviceGetHandleByPciBusId_v2(const char *, nvmlDevice_t *)`,
        // `nvmlDeviceGetClockInfo(nvmlDevice_t, nvmlClockType_t, unsigned int *)`, each returning
        // nvmlReturn_t as i32); `bus` is a NUL-terminated string and `dev` a local, both live for
        // the call. The copied `clock` pointer stays valid because the returned Nvml keeps
        // `lib` loaded beside it.
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

    pub(super) fn sm_clock(&self) -> Option<u32> {
        let mut mhz = 0u32;
        // NVML_CLOCK_SM = 1
        // SAFETY: `clock` is nvmlDeviceGetClockInfo from `_lib`, which this struct keeps loaded;
        // `device` is the handle NVML returned in `open`; `mhz` is a live local u32.
        let rc = unsafe { (self.clock)(self.device, 1, &mut mhz) };
        (rc == 0).then_some(mhz)
    }
}

pub(super) struct Gpu {
    pub(super) info: DeviceInfo,
    pub(super) stream: sys::CUstream,
    pub(super) compiler: Compiler,
    pub(super) harness: Module,
    pub(super) modules: HashMap<String, Module>,
    pub(super) flush: DevBuf,
    pub(super) nvml: Option<Nvml>,
    /// Encoded TMA tensor maps by map, buffer address and size (encoding is a host call: it
    /// must not sit between a timed run's events).
    pub(super) tensor_maps: HashMap<(plan::ResolvedTensorMap, u64, u64), sys::CUtensorMap>,
    /// The most dynamic shared memory a block may ask for (bytes).
    pub(super) max_smem_optin: u32,
}

/// The driver and NVRTC, probed without panicking when a library is missing.
pub fn probe(device: Option<u32>) -> Result<(ProbeInfo, Option<DeviceInfo>), GpuError> {
    // SAFETY: only tries to open libcuda by its names (running the library's initialisers, as
    // any loading of the driver does); no symbol of it is called.
    if !unsafe { sys::is_culib_present() } {
        return Err(GpuError::NoDriver);
    }
    cu::init().map_err(|e| GpuError::from(e).during("cuInit failed"))?;
    let mut v = 0;
    // SAFETY: the library is present and initialised (above); cuDriverGetVersion writes one
    // c_int into `v`, a live local.
    unsafe { sys::cuDriverGetVersion(&mut v) }.result()?;
    let driver_version = format!("{}.{}", v / 1000, (v % 1000) / 10);
    let nvrtc_version = crate::worker::locate::nvrtc_version();
    let n = cu::device::get_count()?;
    let mut devices = Vec::new();
    for i in 0..n {
        devices.push(device_info(i as u32)?);
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

pub(super) fn device_info(index: u32) -> GResult<DeviceInfo> {
    use sys::CUdevice_attribute::*;
    let dev = cu::device::get(index as i32)?;
    // SAFETY: `dev` was returned by cuDeviceGet just above (cudarc's condition); the attribute
    // is written into cudarc's own out-parameter.
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
        // SAFETY: `dev` was returned by cuDeviceGet above; cudarc owns the out-parameter.
        memory_bytes: unsafe { cu::device::total_mem(dev)? } as u64,
        sm_clock_mhz: (attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000) as u32,
        mem_clock_mhz: (attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? / 1000) as u32,
        arch: format!("sm_{cc_major}{cc_minor}{suffix}"),
    })
}

impl Gpu {
    pub(super) fn new(index: u32) -> GResult<Gpu> {
        cu::init()?;
        let info = device_info(index)?;
        let dev = cu::device::get(index as i32)?;
        // SAFETY: `dev` was returned by cuDeviceGet just above; the context is the device's
        // primary context, retained here and never released, so it stays valid and current on
        // this thread for every later call (see the module's invariants).
        unsafe {
            let ctx = cu::primary_ctx::retain(dev)?;
            cu::ctx::set_current(ctx)?;
        }
        let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)?;
        let compiler = Compiler::new(&info.arch)?;
        let mut pci = [0i8; 32];
        // SAFETY: the driver writes at most 32 bytes (the length passed, that of `pci`),
        // NUL-terminated, and `CStr::from_ptr` runs only when it succeeded (`?` returns before).
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
            tensor_maps: HashMap::new(),
            // SAFETY: `dev` was returned by cuDeviceGet above; cudarc owns the out-parameter.
            max_smem_optin: unsafe {
                cu::device::get_attribute(
                    dev,
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                )
            }? as u32,
        };
        let c = g.compiler.compile_cubin(HARNESS_SRC, "harness.cu", &[])?;
        if !c.ok {
            return Err(GpuError::HarnessCompile(c.log));
        }
        g.harness = g.load_module(&c.cubin)?;
        Ok(g)
    }

    pub(super) fn load_module(&self, cubin: &[u8]) -> GResult<Module> {
        // SAFETY: `cubin` is a whole image NVRTC wrote (from the compile child, or from the cache,
        // which stores images whole by write-then-rename); it is borrowed for the call, during
        // which the driver copies it, and an image it cannot parse is refused with an error. The
        // context is current (module invariants).
        let module = unsafe { cu::module::load_data(cubin.as_ptr() as *const c_void) }?;
        Ok(Module {
            module,
            functions: HashMap::new(),
        })
    }

    /// Parses the plan, compiles and loads a source. Sends the `Compiled` event.
    pub(super) fn prepare(
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
        let c = with_heartbeat(out, id, COMPILE_HEARTBEAT, || {
            self.compiler.compile_cubin(&src.code, file, &dopts)
        })?;
        let diagnostics = c.diagnostics(file);
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
            return Ok(Err((
                Verdict::CompileError,
                format!("{}: {}", src.name, c.failure_text()),
            )));
        }
        let key = crate::fingerprint::of_parts(&[&src.code, &dopts.join(" ")]);
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
                        // SAFETY: `f` is a function of a loaded module, and modules are never
                        // unloaded; the value lands in cudarc's own out-parameter.
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
                    Err(e) => missing = Some((l.line, e.to_string())),
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

    pub(super) fn sync(&self) -> GResult<()> {
        // SAFETY: `self.stream` was created in `Gpu::new` and is never destroyed.
        unsafe { cu::stream::synchronize(self.stream) }?;
        Ok(())
    }

    pub(super) fn launch_raw(
        &self,
        f: sys::CUfunction,
        grid: u32,
        block: u32,
        args: &mut [*mut c_void],
    ) -> GResult<()> {
        // SAFETY: `f` comes from a loaded module (never unloaded) and `self.stream` is live. Each
        // of `args` points at one parameter's storage, which the caller keeps alive across this
        // call: cuLaunchKernel copies the parameters before it returns, so the launch may run
        // after they are gone. Those parameters are harness words (buffer addresses, sizes) of
        // the types the harness's kernels declare.
        unsafe { cu::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, self.stream, args) }?;
        Ok(())
    }

    /// Launches the harness's kernel `name` over `n` elements (256 threads a block, `grid_for`),
    /// every argument one 64-bit word.
    pub(super) fn launch_harness(&mut self, name: &str, n: u64, words: &mut [u64]) -> GResult<()> {
        let f = self.harness.function(name)?;
        let mut args: Vec<*mut c_void> = words
            .iter_mut()
            .map(|x| x as *mut u64 as *mut c_void)
            .collect();
        let grid = self.grid_for(n);
        self.launch_raw(f, grid, 256, &mut args)
    }

    /// Buffers sized for `tensors`, one each, in order.
    pub(super) fn buffers_for(tensors: &[TensorDesc]) -> GResult<Vec<DevBuf>> {
        tensors
            .iter()
            .map(|t| DevBuf::new(t.bytes() as usize))
            .collect()
    }

    /// The bytes of element `idx` of `buf` (elements of `dtype`).
    pub(super) fn element_bytes(&self, buf: &DevBuf, dtype: &str, idx: u64) -> GResult<Vec<u8>> {
        let es = crate::suite::dtype_size(dtype).unwrap_or(1);
        let mut v = vec![0u8; es];
        // SAFETY: the copy writes exactly `v.len()` = `es` bytes into `v`, so the host side is
        // never written past it; `buf` is live (borrowed), and callers pass an `idx` below its
        // element count (the first failing element, or 0 of a non-empty tensor).
        unsafe { cu::memcpy_dtoh_sync(&mut v, buf.ptr + idx * es as u64) }?;
        Ok(v)
    }

    /// The element `idx` of `buf` (elements of `dtype`), decoded.
    pub(super) fn element_at(&self, buf: &DevBuf, dtype: &str, idx: u64) -> GResult<f64> {
        Ok(crate::suite::dtype::decode(
            dtype,
            &self.element_bytes(buf, dtype, idx)?,
        ))
    }

    pub(super) fn grid_for(&self, n: u64) -> u32 {
        let max = (self.info.sm_count.max(1) as u64) * 8;
        n.div_ceil(256).clamp(1, max) as u32
    }

    pub(super) fn poison(&self, buf: &DevBuf, dtype: &str, which: u8) -> GResult<()> {
        let p = compare::poison(dtype, which);
        // SAFETY: `buf` is live (borrowed) and its allocation holds at least `buf.bytes`; each
        // memset covers at most that many bytes (`bytes / 2` 16-bit or `bytes / 4` 32-bit
        // words) and is enqueued on the live stream.
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

    pub(super) fn download(&self, buf: &DevBuf) -> GResult<Vec<u8>> {
        let mut v = vec![0u8; buf.bytes];
        // SAFETY: `v` has exactly `buf.bytes` bytes, the size `buf`'s allocation holds at least;
        // `buf` is live (borrowed). The copy is synchronous.
        unsafe { cu::memcpy_dtoh_sync(&mut v, buf.ptr) }?;
        Ok(v)
    }

    pub(super) fn scratch_for(
        &self,
        l: &Loaded,
        env: &Env,
    ) -> GResult<Vec<(String, String, bool, DevBuf)>> {
        let penv = l.plan.env(env, &l.defines);
        let sizes = l.plan.scratch_bytes(&penv)?;
        sizes
            .into_iter()
            .map(|(s, bytes)| {
                let bytes = usize::try_from(bytes).map_err(|_| PlanError {
                    line: s.size.line,
                    msg: format!(
                        "scratch {} of {bytes} bytes does not fit this machine's addresses",
                        s.name
                    ),
                })?;
                Ok((s.name, s.dtype, s.zero, DevBuf::new(bytes)?))
            })
            .collect()
    }

    pub(super) fn reset_scratch(&self, scratch: &[(String, String, bool, DevBuf)]) -> GResult<()> {
        for (_, dtype, zero, b) in scratch {
            if *zero {
                // SAFETY: `b` is live (borrowed) and its allocation holds at least `b.bytes`;
                // the memset is enqueued on the live stream.
                unsafe { cu::memset_d8_async(b.ptr, 0, b.bytes, self.stream) }?;
            } else {
                self.poison(b, dtype, 0)?;
            }
        }
        Ok(())
    }
}
