//! Pristine copies of inputs: the input-unchanged test compares every input, byte for byte,
//! with a copy the harness made right after generating it.
//!
//! Invariants: a pristine copy is a buffer no candidate is ever given (it never appears in a
//! launch's tensor map), so a kernel cannot keep the test quiet by fixing up a checksum: it
//! would have to restore the input exactly. The comparison runs on the harness's stream, after
//! the kernels it judges.

use super::*;

/// Where an input differs from its pristine copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Difference {
    /// Differing 8-byte words (tail bytes count one each).
    pub(super) words: u64,
    /// Byte offset of the first differing word.
    pub(super) first_byte: u64,
}

impl Gpu {
    /// A copy of `buf` in a buffer of its own (enqueued on the stream).
    pub(super) fn snapshot(&self, buf: &DevBuf) -> GResult<DevBuf> {
        let copy = DevBuf::new(buf.bytes)?;
        self.copy_into(&copy, buf)?;
        Ok(copy)
    }

    /// `dst` ← `src` (same size), enqueued on the stream.
    pub(super) fn copy_into(&self, dst: &DevBuf, src: &DevBuf) -> GResult<()> {
        if dst.bytes != src.bytes {
            return Err(gerr(format!(
                "copy of {} bytes into a buffer of {}",
                src.bytes, dst.bytes
            )));
        }
        if src.bytes > 0 {
            unsafe { cu::memcpy_dtod_async(dst.ptr, src.ptr, src.bytes, self.stream) }?;
        }
        Ok(())
    }

    /// Compares `buf` with its pristine copy (`scratch`: 16 bytes of harness memory); waits.
    pub(super) fn difference(
        &mut self,
        buf: &DevBuf,
        pristine: &DevBuf,
        scratch: &DevBuf,
    ) -> GResult<Option<Difference>> {
        if buf.bytes != pristine.bytes {
            return Err(gerr("an input and its pristine copy differ in size"));
        }
        unsafe { cu::memset_d8_async(scratch.ptr, 0, 16, self.stream) }?;
        let mut storage = [buf.ptr, pristine.ptr, buf.bytes as u64, scratch.ptr];
        self.launch_harness("differ", (buf.bytes / 8).max(1) as u64, &mut storage)?;
        self.sync()?;
        let mut h = [0u64; 2];
        unsafe { cu::memcpy_dtoh_sync(&mut h, scratch.ptr) }?;
        Ok((h[0] > 0).then(|| Difference {
            words: h[0],
            first_byte: (!h[1]).saturating_mul(8),
        }))
    }
}
