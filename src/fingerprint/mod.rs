//! Fingerprints: sha256 (hex) of what the tool must recognise again later, one function per
//! kind.
//!
//! - `of_source`: a kernel source, its text byte for byte. Bench and measure documents write it
//!   as `source_sha256`, an export's manifest as `sha256`, the standing as `fingerprint.source`
//!   (a record whose kernel no longer has it is stale), and an incumbent's file in the workspace
//!   is named by it. It is Python's `hashlib.sha256(src.encode()).hexdigest()`.
//! - `of_code` (`code`): a kernel's code, comments and the whitespace around lines aside
//!   (`code_sha256` of bench and measure documents): a rewritten header comment leaves it.
//! - `of_parts`: texts that must not run into each other, each followed by a NUL: an operator's
//!   reference and shapes (the standing's `fingerprint.reference` and `.shapes`), the worker's
//!   compile-cache keys.
//!
//! Invariants: a stored fingerprint is compared only with the same function's value of the text
//! it names; this module uses no other module of the crate (it is of the lowest layer).

mod code;

pub use code::of_code;
use sha2::{Digest, Sha256};

/// The fingerprint of a kernel source (see the module).
pub fn of_source(source: &str) -> String {
    hex(&Sha256::digest(source.as_bytes()))
}

/// The fingerprint of several texts, each followed by a NUL so that parts cannot run into each
/// other.
pub fn of_parts(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_fingerprint_is_the_plain_sha256_of_its_text() {
        // `printf 'abc' | sha256sum`, as Python's hashlib writes it.
        assert_eq!(
            of_source("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            of_source(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn parts_cannot_run_into_each_other() {
        assert_ne!(of_parts(&["ab", "c"]), of_parts(&["a", "bc"]));
        assert_ne!(of_parts(&["abc"]), of_source("abc"));
        // Each part ends with a NUL: the fingerprint of "abc\0".
        assert_eq!(of_parts(&["abc"]), of_source("abc\0"));
    }
}
