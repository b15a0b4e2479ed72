//! The kernel contract: what a kernel and a job are, on both sides of the worker protocol
//! (docs/kernel-contract.md, docs/worker-protocol.md).
//!
//! Files: `protocol` (requests and events, JSON lines), `job` (a job built from a problem:
//! shapes, tensors, seeds, tolerance, draws), `draws` (which input draws a check runs), `kernels`
//! (an operator's reference, baseline and candidate sources), `plan` (the launch plan inside a
//! kernel's leading comment, and `plan::rewrite`: its `[defines]` and `[tune]` rewritten, for the
//! tuner and `--define`), `includes` (the include rule), `compare` (correctness: outputs against
//! the reference's), `stats` (timing statistics), `outcome` (a job's events collected, S_op),
//! `runner` (what runs a job: a worker, a pool, a lease), and `harness.cu` (the worker's CUDA
//! harness: generators, poisoning, on-device checks).
//!
//! Invariants: nothing here starts a process or touches a GPU; the worker (`crate::worker`) and
//! the client side (`crate::pool`, commands, the TUI, the agent) read the same definitions, so a
//! rule of the contract (a plan's limits, a tolerance, a statistic) is written once. This module
//! depends only on `suite` and the lowest layer (docs/architecture.md, "Layers").

pub mod compare;
pub mod draws;
pub mod includes;
pub mod job;
pub mod kernels;
pub mod outcome;
pub mod plan;
pub mod protocol;
pub mod runner;
pub mod stats;
