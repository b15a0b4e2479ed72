//! Calibration kernels: copy bandwidth and the mma.sync bf16 tensor-core rate.

use super::*;

impl Gpu {
    pub(super) fn calibrate(&mut self) -> GResult<(f64, u64, f64)> {
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
        let med = crate::suite::roofline::median(&samples);
        Ok((2.0 * bytes as f64 / (med * 1e-3), 2 * bytes as u64, med))
    }

    /// Tensor-core rate (FLOP/s) of mma.sync m16n8k16 bf16 → fp32 from registers, all SMs busy
    /// (4 blocks of 4 warps per SM, 8 independent accumulator chains per warp). None before sm_80.
    pub(super) fn calibrate_mma(&mut self) -> GResult<Option<f64>> {
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
        let med = crate::suite::roofline::median(&samples);
        Ok((med > 0.0).then(|| flops / (med * 1e-3)))
    }
}
