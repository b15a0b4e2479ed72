//! The command line: every subcommand and flag (clap).

use crate::suite::PhaseFilter;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "atrex-tui",
    version,
    about = "A terminal workbench for GPU kernel engineering"
)]
pub struct Cli {
    /// The workspace directory (suite edits, accepted kernels, sessions). Default: the current
    /// directory when it has problems/, else the user's data directory. A folder named here must
    /// exist.
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Continue a recorded session (its incumbents and history are restored; new events are
    /// appended to it).
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,

    /// Settings file (default: config.toml in the user's config directory, atrex-tui/).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The workers to measure on: a TOML file of `[[workers]]` launch templates (ssh, srun,
    /// kubectl exec; docs/cluster.md) for bench, measure, agent, doctor and the TUI. Default:
    /// the settings' `[[workers]]`, else one local worker per GPU.
    #[arg(long, global = true, value_name = "FILE")]
    pub workers: Option<PathBuf>,

    /// Start the TUI (or `replay FILE`) without a terminal: draw its first frame on a 200×50 test
    /// backend, print the start's timings, the peak resident memory and the frame as one JSON
    /// line, and exit. No worker is started. For measuring start-up speed (docs/performance.md).
    #[arg(long, global = true, hide = true)]
    pub first_frame: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the operators in descending importance weight, optionally with every shape's W, Q
    /// and speed-of-light time.
    Suite {
        /// Hardware profile for SOL times (a key of problems/hardware/).
        #[arg(long, default_value = "H200")]
        hardware: String,
        /// Phase view: weights renormalized over the operators of that phase.
        #[arg(long, value_enum, default_value_t = PhaseFilter::All)]
        phase: PhaseFilter,
        /// Show each shape's parameters, W, Q, SOL time and bottleneck.
        #[arg(long)]
        shapes: bool,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compare problems/ with an Atrex-Bench checkout; with --write, update shapes, weights and
    /// production timings in the workspace's problems/. Exit 0 when they agree, 1 when anything
    /// differs (like diff), 2 on an error.
    ImportAtrexBench {
        /// The checkout (holds data/ and configs/).
        dir: PathBuf,
        /// Update the workspace's problems/ (shapes, weights, production timings) where they differ.
        #[arg(long)]
        write: bool,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What this machine offers: GPUs, NVRTC, ncu, LLM endpoint, terminal colours, and every
    /// configured worker (its command, hello, host, device, GPU and versions). Exit 1 when
    /// anything it reports is wrong (listed at the end), 0 otherwise, also without a GPU.
    Doctor {
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compile, check and time a kernel for an operator on the GPU (default: its baseline.cu),
    /// or with --all every operator's incumbent (the S_agg table).
    Bench {
        /// Operator name or id.
        #[arg(required_unless_present_any = ["all", "merge"], conflicts_with = "all")]
        op: Option<String>,
        /// Every operator's incumbent (the standing's kernel, else its baseline.cu) on every
        /// shape, spread over the GPUs the largest T_SOL first; prints the S_agg table.
        #[arg(long)]
        all: bool,
        /// Join the `--json` documents of runs of one kernel over disjoint shapes (a full run
        /// split with --shape across machines or leases) into one document; needs no GPU.
        #[arg(long, value_name = "FILE", num_args = 2.., conflicts_with_all = ["all", "record", "kernel", "defines", "sweep", "shapes", "quick", "full", "hardware", "device"])]
        merge: Vec<PathBuf>,
        /// With --all: record the measurements in the workspace's standing.
        #[arg(long)]
        record: bool,
        /// The candidate kernel file (default: problems/OP/baseline.cu).
        #[arg(long, value_name = "FILE", conflicts_with = "all")]
        kernel: Option<PathBuf>,
        /// Run with another value of a tunable parameter of the kernel's plan (`[tune]`), as if
        /// its `[defines]` said so; repeatable.
        #[arg(long = "define", value_name = "KEY=VALUE")]
        defines: Vec<String>,
        /// Run the kernel once per combination of values of its plan's tunable parameters
        /// (repeatable: every combination of every --sweep, at most 64) and print S per shape
        /// side by side, with each shape's best combination.
        #[arg(long = "sweep", value_name = "KEY=V1,V2,…", conflicts_with = "all")]
        sweep: Vec<String>,
        /// Shape ids to run (default: all).
        #[arg(long = "shape", value_name = "ID", conflicts_with = "all")]
        shapes: Vec<u32>,
        /// 1 seed and short timing (≥ 10 samples / 100 ms), labelled quick.
        #[arg(long, conflicts_with = "full")]
        quick: bool,
        /// 5 seeds and adaptive timing to 0.5 % noise (the default).
        #[arg(long)]
        full: bool,
        /// Hardware profile for T_SOL (default: the one matching the GPU).
        #[arg(long)]
        hardware: Option<String>,
        /// Only this GPU of this machine (default: every worker, shapes spread over them).
        #[arg(long)]
        device: Option<u32>,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write one self-contained HTML report of where the suite stands: the S_agg table, S over
    /// the shapes of every operator, the roofline of every measured shape and each incumbent's
    /// history from the sessions (docs/report.md). Needs no GPU.
    Report {
        /// The HTML file to write (default: report.html in the workspace).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Hardware profile of the standing, T_SOL and the roofline (a key of problems/hardware/).
        #[arg(long, default_value = "H200")]
        hardware: String,
        /// Print the path, S_agg, every operator's figure and the warnings as JSON instead of
        /// the path alone.
        #[arg(long)]
        json: bool,
    },
    /// Check that a kernel compiles (NVRTC, launch plan), on a GPU or, without one, for --arch.
    Compile {
        /// Operator name or id.
        op: String,
        /// The kernel file (default: problems/OP/baseline.cu).
        #[arg(long, value_name = "FILE")]
        kernel: Option<PathBuf>,
        /// Run with another value of a tunable parameter of the kernel's plan (`[tune]`), as if
        /// its `[defines]` said so; repeatable.
        #[arg(long = "define", value_name = "KEY=VALUE")]
        defines: Vec<String>,
        /// Target architecture when there is no GPU.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// Also disassemble the kernel (the CUDA toolkit's cuobjdump) into FILE (`-`: stdout)
        /// and summarise each function: instructions, HGMMA, uniform-datapath share, top opcodes.
        #[arg(long, value_name = "FILE")]
        sass: Option<PathBuf>,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write an operator's incumbent (the standing's kernel, else its baseline.cu) for another
    /// tool: an Atrex-Bench candidate (one Python file exposing `class Model`) or the kernel
    /// with a C++ launcher (docs/export.md). Needs no GPU.
    Export {
        /// Operator name or id.
        op: String,
        /// atrex-bench: OP.py, the benchmark's candidate interface; cuda: OP.cu, OP_launch.h and
        /// OP_launch.cu for a CUDA C++ code base.
        #[arg(long, value_enum, default_value_t = crate::export::Format::AtrexBench)]
        format: crate::export::Format,
        /// The folder to write into (created if missing).
        #[arg(long, value_name = "DIR", default_value = ".")]
        out: PathBuf,
        /// The hardware profile whose standing names the incumbent.
        #[arg(long, default_value = "H200")]
        hardware: String,
        /// Export this kernel file instead of the incumbent.
        #[arg(long, value_name = "FILE")]
        kernel: Option<PathBuf>,
        /// Export with another value of a tunable parameter of the kernel's plan (`[tune]`), as
        /// if its `[defines]` said so; repeatable.
        #[arg(long = "define", value_name = "KEY=VALUE")]
        defines: Vec<String>,
        /// Replace files that already exist in the folder (without it, export refuses and
        /// writes nothing).
        #[arg(long)]
        force: bool,
        /// Print what was written as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Record a kernel file as a human revision in a session, measure it (5 seeds, every shape)
    /// and decide: the headless form of a hand edit.
    Measure {
        /// Operator name or id.
        op: String,
        /// The edited kernel.
        #[arg(long, value_name = "FILE")]
        kernel: PathBuf,
        /// Run with another value of a tunable parameter of the kernel's plan (`[tune]`), as if
        /// its `[defines]` said so; repeatable.
        #[arg(long = "define", value_name = "KEY=VALUE")]
        defines: Vec<String>,
        /// The session to append to (created if missing; default: a new one in the workspace).
        #[arg(long, value_name = "FILE")]
        session: Option<PathBuf>,
        /// One line on what the edit changes and why.
        #[arg(long, default_value = "hand edit")]
        rationale: String,
        /// After measuring: leave the revision pending, accept, reject, or decide by the auto
        /// rule (5-seed strict pass and S_op more than 1 % above the incumbent's).
        #[arg(long, value_enum, default_value_t = crate::cli::measure::Decide::None)]
        decide: crate::cli::measure::Decide,
        /// 1 seed and short timing (cannot accept: accepting needs the 5-seed check).
        #[arg(long)]
        quick: bool,
        /// Only this GPU of this machine (default: every worker, shapes spread over them).
        #[arg(long)]
        device: Option<u32>,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the optimization agent on an operator (or one agent per operator, concurrently on
    /// the workers: OP1,OP2,...) without the TUI and record a session (docs/agent.md). Exit 2
    /// without a GPU.
    Agent {
        /// Operator name, or several separated by commas (one agent each, all at once).
        op: String,
        /// tuner (built in, no LLM), openai (OpenAI-compatible) or anthropic. Default: the
        /// `[agent] backend` setting, else tuner.
        #[arg(long, value_enum)]
        backend: Option<crate::agent::config::BackendKind>,
        /// Iteration budget (default: the setting, else 20).
        #[arg(long, value_name = "N")]
        max_iters: Option<usize>,
        /// Decide automatically: accept only on 5-seed strict correctness and an S_op gain above
        /// the measured noise (A B B A). Without it revisions are measured and left pending.
        #[arg(long)]
        auto: bool,
        /// One request and one reply per iteration: no tools for the model (compile, run,
        /// profile, lookup, read, propose), whatever the `[agent] tools` setting says.
        #[arg(long)]
        no_tools: bool,
        /// Hardware profile for T_SOL (default: the one matching the GPU).
        #[arg(long)]
        hardware: Option<String>,
        /// Only this GPU of this machine (default: every worker).
        #[arg(long)]
        device: Option<u32>,
        /// Seed of the tuner's restarts and of dropout masks (default: random).
        #[arg(long)]
        seed: Option<u64>,
        /// Continue this session (the agent's memory of the operator is restored from it and its
        /// revision numbers continue); default: a new session in the workspace's sessions/.
        #[arg(long, value_name = "FILE")]
        session: Option<PathBuf>,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Measure this GPU's copy bandwidth and cache it beside the datasheet peaks.
    Calibrate {
        /// GPU index.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Open a recorded session read-only with a timeline (or print its summary with --json).
    /// Nothing is measured unless asked (m).
    Replay {
        /// The session file (JSON lines).
        file: PathBuf,
        /// Print a summary (revisions, best S per operator, decisions) instead of the TUI.
        #[arg(long)]
        json: bool,
        /// With --json: add load and rebuild times.
        #[arg(long, requires = "json")]
        timing: bool,
    },
    /// Profile a kernel under Nsight Compute: throughput, occupancy, stalls and findings.
    Profile {
        /// Operator name or id.
        op: String,
        /// The kernel file (default: problems/OP/baseline.cu).
        #[arg(long, value_name = "FILE")]
        kernel: Option<PathBuf>,
        /// Run with another value of a tunable parameter of the kernel's plan (`[tune]`), as if
        /// its `[defines]` said so; repeatable.
        #[arg(long = "define", value_name = "KEY=VALUE")]
        defines: Vec<String>,
        /// The shape to profile (default: the operator's largest by bytes moved).
        #[arg(long, value_name = "ID")]
        shape: Option<u32>,
        /// ncu --clock-control (default none: the card's clocks as they are).
        #[arg(long, default_value = "none")]
        clock_control: String,
        /// Also say where the warps wait, per SASS instruction (ncu's source page: hot
        /// instructions, waits by barrier, stall reasons, executed opcodes).
        #[arg(long)]
        source: bool,
        /// Summarise a source page saved earlier (`ncu --import REPORT --csv --page source
        /// --print-source sass`) instead of profiling: no GPU needed.
        #[arg(long, value_name = "CSV", conflicts_with_all = ["kernel", "defines", "shape", "source"])]
        source_csv: Option<PathBuf>,
        /// GPU index.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Runs a job's candidate once, for a profiler (started by `profile`).
    #[command(hide = true)]
    ProfileTarget {
        #[arg(long, default_value_t = 0)]
        device: u32,
        job: PathBuf,
    },
    /// The worker's compiler process: one JSON request on stdin, one answer on stdout, NVRTC
    /// run confined (started by the worker itself).
    #[command(hide = true)]
    CompileChild,
    /// The GPU worker process (JSON lines over stdio; started by the app itself).
    #[command(hide = true)]
    Worker {
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Protocol simulator without a GPU, for tests of the client (`--simulate=NAME`: the
        /// behaviour of candidates whose name selects none).
        #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "")]
        simulate: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every flag of every subcommand says what it does in `--help`.
    #[test]
    fn every_flag_has_help_text() {
        let cmd = Cli::command();
        let mut missing = Vec::new();
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            for a in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{} --{}", sub.get_name(), a.get_id()));
                }
            }
        }
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }
}
