//! Finding the CUDA installation: libraries for the worker's loader path, headers for NVRTC,
//! and tools such as ncu.

use std::path::{Path, PathBuf};

/// Candidate CUDA installation roots, most specific first.
pub fn cuda_roots() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            out.push(PathBuf::from(v));
        }
    }
    out.push(PathBuf::from("/usr/local/cuda"));
    if let Ok(rd) = std::fs::read_dir("/usr/local") {
        let mut versioned: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .map(|n| n.starts_with("cuda-"))
                    .unwrap_or(false)
            })
            .collect();
        versioned.sort();
        versioned.reverse();
        out.extend(versioned);
    }
    out.push(PathBuf::from("/opt/cuda"));
    // After the toolkits: NVIDIA's Python wheels (`pip install nvidia-cuda-nvrtc
    // nvidia-cuda-runtime`, and for --sass nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm), laid
    // out as small toolkit roots (lib/, include/, bin/) in a virtual environment, conda, the
    // user's site or the system's.
    out.extend(wheel_roots(&python_lib_dirs()));
    out.retain(|p| p.is_dir());
    out.dedup();
    out
}

/// Where Python keeps packages: `lib/` folders whose `python3*/site-packages` (or
/// `dist-packages`) may hold NVIDIA's wheels.
fn python_lib_dirs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
            v.push(PathBuf::from(p).join("lib"));
        }
    }
    if let Some(h) = std::env::var_os("HOME").filter(|p| !p.is_empty()) {
        v.push(PathBuf::from(h).join(".local/lib"));
    }
    v.push(PathBuf::from("/usr/local/lib"));
    v.push(PathBuf::from("/usr/lib"));
    v
}

/// The roots that NVIDIA's wheels make under these `lib/` folders: `nvidia/cu13` (CUDA 13's
/// wheels share one tree), `nvidia/cuda_nvrtc` and `nvidia/cuda_runtime` (CUDA 12's, one
/// package each: NVRTC's library in one, the headers in the other).
pub fn wheel_roots(lib_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for base in lib_dirs {
        let Ok(rd) = std::fs::read_dir(base) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        // The newest Python first.
        pythons.sort();
        pythons.reverse();
        for py in pythons {
            for site in ["site-packages", "dist-packages"] {
                for pkg in ["nvidia/cu13", "nvidia/cuda_nvrtc", "nvidia/cuda_runtime"] {
                    let d = py.join(site).join(pkg);
                    if d.is_dir() {
                        out.push(d);
                    }
                }
            }
        }
    }
    out
}

/// Folders holding libnvrtc / libcuda that are not necessarily on the loader path.
pub fn library_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in cuda_roots() {
        for sub in [
            "lib64",
            "lib",
            "targets/x86_64-linux/lib",
            "targets/sbsa-linux/lib",
        ] {
            let d = root.join(sub);
            if has_lib(&d, "libnvrtc") {
                out.push(d);
            }
        }
    }
    out.dedup();
    out
}

fn has_lib(dir: &Path, prefix: &str) -> bool {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()).any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{prefix}.so"))
            })
        })
        .unwrap_or(false)
}

/// The include folders kernels compile with: the toolkit's (cuda_bf16.h, cuda_fp16.h,
/// cuda_fp8.h …) and, where the toolkit keeps them apart (CUDA 13: include/cccl), the CCCL
/// headers (`cuda/barrier`, `cuda/ptx`, `cuda/pipeline`, `cuda/std/…`).
pub fn include_dirs() -> Vec<PathBuf> {
    let Some(inc) = include_dir() else {
        return Vec::new();
    };
    let cccl = inc.join("cccl");
    let mut v = vec![inc];
    if cccl.join("cuda").is_dir() {
        v.push(cccl);
    }
    v
}

/// The CUDA include folder with cuda_bf16.h, cuda_fp16.h, cuda_fp8.h.
pub fn include_dir() -> Option<PathBuf> {
    for root in cuda_roots() {
        for sub in [
            "include",
            "targets/x86_64-linux/include",
            "targets/sbsa-linux/include",
        ] {
            let d = root.join(sub);
            if d.join("cuda_bf16.h").is_file() {
                return Some(d);
            }
        }
    }
    None
}

/// A tool on PATH, else in a CUDA installation's bin/.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let p = d.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    for root in cuda_roots() {
        let p = root.join("bin").join(name);
        if p.is_file() {
            return Some(p);
        }
        // Nsight Compute installs beside the toolkit.
        if let Ok(rd) = std::fs::read_dir(root.join("..")) {
            for e in rd.filter_map(|e| e.ok()) {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with("nsight-compute")
                {
                    let p = e.path().join(name);
                    if p.is_file() {
                        return Some(p);
                    }
                }
            }
        }
    }
    None
}

/// The NVRTC version (`13.0`) when the library loads in this process; None otherwise.
pub fn nvrtc_version() -> Option<String> {
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return None;
    }
    let (mut a, mut b) = (0, 0);
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
    Some(format!("{a}.{b}"))
}

/// LD_LIBRARY_PATH for the worker: the current value plus the CUDA library folders.
pub fn worker_ld_library_path() -> String {
    let mut parts: Vec<String> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|s| !s.is_empty())
        .map(|s| s.to_string())
        .collect();
    for d in library_dirs() {
        let s = d.display().to_string();
        if !parts.contains(&s) {
            parts.push(s);
        }
    }
    parts.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVIDIA's wheels are found in every Python of a `lib/` folder, newest first, in both
    /// layouts (CUDA 13's one tree, CUDA 12's package per library); other packages are not.
    #[test]
    fn wheel_roots_are_found_in_both_layouts() {
        let d = crate::testing::tempdir("wheels");
        let lib = d.join("venv/lib");
        for p in [
            "python3.12/site-packages/nvidia/cu13/lib",
            "python3.11/site-packages/nvidia/cuda_nvrtc/lib",
            "python3.11/site-packages/nvidia/cuda_runtime/include",
            "python3.11/site-packages/nvidia/cublas/lib",
            "python2.7/site-packages/nvidia/cu13/lib",
        ] {
            std::fs::create_dir_all(lib.join(p)).unwrap();
        }
        let roots = wheel_roots(&[lib.clone(), d.join("absent")]);
        let rel: Vec<String> = roots
            .iter()
            .map(|r| r.strip_prefix(&lib).unwrap().display().to_string())
            .collect();
        assert_eq!(
            rel,
            [
                "python3.12/site-packages/nvidia/cu13",
                "python3.11/site-packages/nvidia/cuda_nvrtc",
                "python3.11/site-packages/nvidia/cuda_runtime",
            ]
        );
        std::fs::remove_dir_all(&d).ok();
    }
}
