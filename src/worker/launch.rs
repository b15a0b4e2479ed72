//! Launching a candidate's plan on one set of buffers: arguments (buffers, scalars, TMA tensor
//! maps passed by value), dynamic shared memory above 48 KiB (the function attribute, checked
//! against the device's limit), thread-block clusters and cooperative launches (`cuLaunchKernelEx`).

use super::device::Loaded;
use super::*;
use plan::{Interleave, L2Promotion, OobFill, ResolvedLaunch, ResolvedTensorMap, Swizzle};

/// One kernel parameter's storage: scalars and pointers in 8 bytes, tensor maps in 128.
enum Param {
    Word(u64),
    Map(Box<sys::CUtensorMap>),
}

impl Param {
    fn ptr(&mut self) -> *mut c_void {
        match self {
            Param::Word(w) => w as *mut u64 as *mut c_void,
            Param::Map(m) => &mut **m as *mut sys::CUtensorMap as *mut c_void,
        }
    }
}

fn tma_dtype(dtype: &str) -> sys::CUtensorMapDataType {
    use sys::CUtensorMapDataType::*;
    match dtype {
        "u16" | "i16" => CU_TENSOR_MAP_DATA_TYPE_UINT16,
        "fp16" => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        "bf16" => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        "u32" => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        "i32" => CU_TENSOR_MAP_DATA_TYPE_INT32,
        "fp32" => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        "u64" => CU_TENSOR_MAP_DATA_TYPE_UINT64,
        "i64" => CU_TENSOR_MAP_DATA_TYPE_INT64,
        "fp64" => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        // bytes: u8, i8 and the fp8 formats
        _ => CU_TENSOR_MAP_DATA_TYPE_UINT8,
    }
}

/// Encodes a tensor map for a buffer (`cuTensorMapEncodeTiled`).
fn encode(t: &ResolvedTensorMap, base: sys::CUdeviceptr) -> GResult<sys::CUtensorMap> {
    use sys::CUtensorMapFloatOOBfill::*;
    use sys::CUtensorMapInterleave::*;
    use sys::CUtensorMapL2promotion::*;
    use sys::CUtensorMapSwizzle::*;
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let swizzle = match t.swizzle {
        Swizzle::None => CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => CU_TENSOR_MAP_SWIZZLE_128B,
    };
    let interleave = match t.interleave {
        Interleave::None => CU_TENSOR_MAP_INTERLEAVE_NONE,
        Interleave::B16 => CU_TENSOR_MAP_INTERLEAVE_16B,
        Interleave::B32 => CU_TENSOR_MAP_INTERLEAVE_32B,
    };
    let l2 = match t.l2_promotion {
        L2Promotion::None => CU_TENSOR_MAP_L2_PROMOTION_NONE,
        L2Promotion::B64 => CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
        L2Promotion::B128 => CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        L2Promotion::B256 => CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    };
    let oob = match t.oob_fill {
        OobFill::Zero => CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        OobFill::Nan => CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
    };
    // SAFETY: the driver writes the 128-byte `map`, a live local, and reads `rank` entries of
    // dims, box and element strides and `rank - 1` of strides: a resolved map has exactly those
    // counts, with rank 1 to 5 (`TensorMap::resolve` refuses any other). `base` is only encoded
    // into the map, not dereferenced; the map was checked to lie inside its buffer (`check_fits`).
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            tma_dtype(&t.dtype),
            t.dims.len() as u32,
            base as *mut c_void,
            t.dims.as_ptr(),
            t.strides.as_ptr(),
            t.boxes.as_ptr(),
            t.element_strides.as_ptr(),
            interleave,
            swizzle,
            l2,
            oob,
        )
        .result()
    }
    .map_err(|e| PlanError {
        line: t.line,
        msg: format!(
            "tensor map {}: the driver refused it ({}): dims {:?}, strides {:?}, box {:?}",
            t.name,
            GpuError::from(e),
            t.dims,
            t.strides,
            t.boxes
        ),
    })?;
    Ok(map)
}

/// The bytes a buffer holds: as the harness sized it, else (not a buffer of the harness) what
/// is left of its allocation.
fn buffer_bytes(ptr: sys::CUdeviceptr) -> GResult<u64> {
    if let Some(n) = super::device::DevBuf::size_at(ptr) {
        return Ok(n as u64);
    }
    let (mut base, mut size) = (0, 0usize);
    // SAFETY: the driver writes one address into `base` and one size into `size`, both live
    // locals; an address in no allocation is an error, not UB.
    unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) }.result()?;
    Ok(size as u64 - (ptr - base))
}

impl Gpu {
    /// Enqueues the launches of a loaded kernel on one set of buffers (does not synchronize).
    pub(super) fn enqueue(
        &mut self,
        l: &Loaded,
        env: &Env,
        bufs: &HashMap<String, sys::CUdeviceptr>,
    ) -> GResult<()> {
        let penv = l.plan.env(env, &l.defines);
        let launches = l.plan.resolve(&penv, &|n| bufs.contains_key(n))?;
        for rl in &launches {
            let mut params = self.params(rl, bufs)?;
            let f = self
                .modules
                .get_mut(&l.key)
                .ok_or_else(|| gerr("module not loaded"))?
                .function(&rl.kernel)?;
            self.launch(f, rl, &mut params).map_err(|g| {
                g.during(format!(
                    "launching {} grid {:?} block {:?} smem {}{}",
                    rl.kernel,
                    rl.grid,
                    rl.block,
                    rl.smem,
                    rl.cluster
                        .map(|c| format!(" cluster {c:?}"))
                        .unwrap_or(if rl.cooperative {
                            " cooperative".into()
                        } else {
                            String::new()
                        }),
                ))
            })?;
        }
        Ok(())
    }

    /// The parameters of one launch; tensor maps are encoded once per buffer and checked to lie
    /// inside it.
    fn params(
        &mut self,
        rl: &ResolvedLaunch,
        bufs: &HashMap<String, sys::CUdeviceptr>,
    ) -> GResult<Vec<Param>> {
        let mut out = Vec::with_capacity(rl.args.len());
        for a in &rl.args {
            out.push(match a {
                ResolvedArg::Buffer(n) => Param::Word(
                    *bufs
                        .get(n)
                        .ok_or_else(|| gerr(format!("no buffer `{n}` for {}", rl.kernel)))?,
                ),
                ResolvedArg::TensorMap(t) => Param::Map(Box::new(self.tensor_map(t, bufs)?)),
                ResolvedArg::I32(v) => Param::Word(*v as u32 as u64),
                ResolvedArg::U32(v) => Param::Word(*v as u64),
                ResolvedArg::I64(v) => Param::Word(*v as u64),
                ResolvedArg::U64(v) => Param::Word(*v),
                ResolvedArg::F32(v) => Param::Word(v.to_bits() as u64),
                ResolvedArg::F64(v) => Param::Word(v.to_bits()),
            });
        }
        Ok(out)
    }

    fn tensor_map(
        &mut self,
        t: &ResolvedTensorMap,
        bufs: &HashMap<String, sys::CUdeviceptr>,
    ) -> GResult<sys::CUtensorMap> {
        let base = *bufs.get(&t.tensor).ok_or_else(|| PlanError {
            line: t.line,
            msg: format!("tensor map {}: no buffer `{}`", t.name, t.tensor),
        })?;
        let bytes = buffer_bytes(base)?;
        let key = (t.clone(), base, bytes);
        if let Some(m) = self.tensor_maps.get(&key) {
            return Ok(*m);
        }
        t.check_fits(bytes)?;
        let m = encode(t, base)?;
        if self.tensor_maps.len() > 4096 {
            self.tensor_maps.clear();
        }
        self.tensor_maps.insert(key, m);
        Ok(m)
    }

    fn launch(&self, f: sys::CUfunction, rl: &ResolvedLaunch, params: &mut [Param]) -> GResult<()> {
        if rl.smem > 48 * 1024 {
            if rl.smem > self.max_smem_optin {
                return Err(GpuError::SharedMemory {
                    asked: rl.smem,
                    allowed: self.max_smem_optin,
                });
            }
            // SAFETY: `f` is a function of a loaded module, and modules are never unloaded.
            unsafe {
                cu::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    rl.smem as i32,
                )
            }?;
        }
        let mut args: Vec<*mut c_void> = params.iter_mut().map(|p| p.ptr()).collect();
        if rl.cluster.is_none() && !rl.cooperative {
            // SAFETY: `f` is a function of a loaded module (never unloaded) and the stream is
            // live. Each of `args` points into `params`, borrowed for this call; the driver copies
            // the parameters before it returns. It reads as many bytes at each as the kernel
            // declares for that parameter: 8 are there for a buffer or scalar and 128 for a
            // tensor map, which is what a kernel declaring the plan's `args` takes (the plan's
            // args are not checked against the compiled kernel's parameter list).
            return unsafe {
                cu::launch_kernel(
                    f,
                    (rl.grid[0], rl.grid[1], rl.grid[2]),
                    (rl.block[0], rl.block[1], rl.block[2]),
                    rl.smem,
                    self.stream,
                    &mut args,
                )
            }
            .map_err(GpuError::from);
        }
        // SAFETY: all-zero bytes are a valid CUlaunchAttribute: its id 0 is
        // CU_LAUNCH_ATTRIBUTE_IGNORE, its padding is bytes and its value a C union; both id and
        // value are set below before the driver reads them.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        if let Some(cl) = rl.cluster {
            attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attr.value.clusterDim.x = cl[0];
            attr.value.clusterDim.y = cl[1];
            attr.value.clusterDim.z = cl[2];
        } else {
            // The driver refuses (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) a grid that cannot be
            // resident at once, instead of a grid barrier that never opens.
            attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attr.value.cooperative = 1;
        }
        let config = sys::CUlaunchConfig {
            gridDimX: rl.grid[0],
            gridDimY: rl.grid[1],
            gridDimZ: rl.grid[2],
            blockDimX: rl.block[0],
            blockDimY: rl.block[1],
            blockDimZ: rl.block[2],
            sharedMemBytes: rl.smem,
            hStream: self.stream,
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: as for the launch above; `config` and the one attribute it points at are live
        // locals, read during the call.
        unsafe {
            sys::cuLaunchKernelEx(&config, f, args.as_mut_ptr(), std::ptr::null_mut()).result()
        }
        .map_err(GpuError::from)
    }
}
