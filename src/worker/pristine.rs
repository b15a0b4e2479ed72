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
            // SAFETY: both buffers are live (borrowed) and hold `src.bytes` (their sizes were
            // checked equal above), so the copy stays inside both; it is enqueued on the live
            // stream, after the work that filled `src`.
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
        // SAFETY: `scratch` is a live DevBuf, allocated at least 256 bytes, and the memset covers
        // 16; it is enqueued on the Gpu's live stream.
        unsafe { cu::memset_d8_async(scratch.ptr, 0, 16, self.stream) }?;
        let mut storage = [buf.ptr, pristine.ptr, buf.bytes as u64, scratch.ptr];
        self.launch_harness("differ", (buf.bytes / 8).max(1) as u64, &mut storage)?;
        self.sync()?;
        let mut h = [0u64; 2];
        // SAFETY: the copy fills exactly `h` (16 bytes) from `scratch` (at least 256 bytes); the
        // kernel that wrote it has finished (`sync` above).
        unsafe { cu::memcpy_dtoh_sync(&mut h, scratch.ptr) }?;
        Ok((h[0] > 0).then(|| Difference {
            words: h[0],
            first_byte: (!h[1]).saturating_mul(8),
        }))
    }
}
