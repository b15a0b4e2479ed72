//! The child's confinement, applied to itself after NVRTC is loaded and before it compiles:
//! Landlock (reads only beneath the given folders, no writes anywhere, no TCP, no signals or
//! abstract sockets out of the sandbox; best effort: a kernel without Landlock leaves it
//! unconfined, and the status says so) and `RLIMIT_AS` (the memory limit).

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The newest Landlock ABI whose rights are asked for; older kernels enforce what they have.
const TARGET: ABI = ABI::V6;

/// What confinement a compile ran under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Confinement {
    /// Landlock is enforced; `partial` when the kernel lacks some of the rights asked for.
    Landlock { abi: i32, partial: bool },
    /// No Landlock: why (the kernel lacks it, or it is disabled at boot).
    Unavailable { why: String },
}

impl Confinement {
    /// One line for `doctor` and the logs.
    pub fn describe(&self) -> String {
        match self {
            Confinement::Landlock { abi, partial } => format!(
                "Landlock ABI v{abi} active{}: reads beneath the toolkit's headers and NVRTC's \
                 libraries only, no writes",
                if *partial {
                    " (partly: this kernel lacks some rights)"
                } else {
                    ""
                }
            ),
            Confinement::Unavailable { why } => format!(
                "not available on this kernel ({why}): compiles run with time and memory limits \
                 only"
            ),
        }
    }

    pub fn active(&self) -> bool {
        matches!(self, Confinement::Landlock { .. })
    }
}

/// Why the kernel has no Landlock.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum NoLandlock {
    #[error("Landlock is disabled at boot")]
    DisabledAtBoot,
    #[error("Landlock is not built into this kernel")]
    NotBuiltIn,
    #[error("Landlock unavailable (errno {0:?})")]
    Errno(Option<i32>),
}

/// A compile child that could not be confined as asked.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("cannot set the compiler's memory limit: {0}")]
    Memory(std::io::Error),
    #[error("Landlock refused the compiler's rules: {0}")]
    Refused(#[from] landlock::RulesetError),
}

/// The kernel's Landlock ABI version, or why there is none.
fn kernel_abi() -> Result<i32, NoLandlock> {
    const VERSION: libc::c_uint = 1; // LANDLOCK_CREATE_RULESET_VERSION
    // SAFETY: with LANDLOCK_CREATE_RULESET_VERSION the attribute pointer must be null and its
    // size 0 (as passed): the kernel reads no memory and only returns the ABI version or -1.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            VERSION,
        )
    };
    if v > 0 {
        return Ok(v as i32);
    }
    Err(match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EOPNOTSUPP) => NoLandlock::DisabledAtBoot,
        Some(libc::ENOSYS) => NoLandlock::NotBuiltIn,
        e => NoLandlock::Errno(e),
    })
}

/// Limits the address space to `memory_bytes`.
pub fn limit_memory(memory_bytes: u64) -> Result<(), ConfineError> {
    let r = libc::rlimit {
        rlim_cur: memory_bytes as libc::rlim_t,
        rlim_max: memory_bytes as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the one rlimit `r` points at, a local that outlives the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &r) } != 0 {
        return Err(ConfineError::Memory(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Confines this process (every thread it will start; call it before starting any) to reading
/// beneath `read` (paths that do not exist are left out). Err: Landlock is there but refused
/// the rules (the compile must not go on unconfined by surprise).
pub fn landlock(read: &[PathBuf]) -> Result<Confinement, ConfineError> {
    let abi = match kernel_abi() {
        Ok(v) => v,
        Err(why) => {
            return Ok(Confinement::Unavailable {
                why: why.to_string(),
            });
        }
    };
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))?
        .handle_access(AccessNet::from_all(TARGET))?
        .scope(Scope::from_all(TARGET))?
        .create()?
        .add_rules(path_beneath_rules(read, AccessFs::from_read(TARGET)))?
        .restrict_self()?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => Confinement::Landlock {
            abi,
            partial: false,
        },
        RulesetStatus::PartiallyEnforced => Confinement::Landlock { abi, partial: true },
        _ => Confinement::Unavailable {
            why: "Landlock did not enforce the rules".into(),
        },
    })
}
