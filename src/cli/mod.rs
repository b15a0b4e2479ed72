//! Command-line interface: the TUI by default, and a headless form of every capability. One
//! file per command; they print and choose exit codes, the work lives in the domain modules.

mod agent;
mod args;
pub mod bench;
pub mod calibrate;
pub mod compile;
pub mod doctor;
pub mod import;
pub mod measure;
pub mod profile;
pub mod replay;
pub mod suite;

pub use args::{Cli, Command};

use crate::suite::{Suite, Workspace};
use clap::Parser;

/// Exit code when no GPU is available.
pub const EXIT_NO_GPU: i32 = 2;

pub(crate) use crate::engine::runtime;

fn load_suite(ws: &Workspace) -> Result<Suite, String> {
    Ok(Suite::load(ws.suite_source())?)
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    if let Some(c) = &cli.config
        && !c.is_file()
    {
        eprintln!(
            "atrex-tui: {}: {} (given with --config)",
            c.display(),
            if c.exists() {
                "not a file"
            } else {
                "no such settings file"
            }
        );
        return 2;
    }
    let ws = Workspace::resolve(cli.workspace.as_deref());
    let result = match cli.command {
        None => crate::tui::run(
            &ws,
            crate::tui::Options {
                resume: cli.resume.clone(),
                replay: None,
                config: cli.config.clone(),
            },
        ),
        Some(Command::Replay { file, json, timing }) => {
            if json {
                replay::run(&ws, &file, timing)
            } else {
                crate::tui::run(
                    &ws,
                    crate::tui::Options {
                        resume: None,
                        replay: Some(file),
                        config: cli.config.clone(),
                    },
                )
            }
        }
        Some(Command::Suite {
            hardware,
            phase,
            shapes,
            json,
        }) => load_suite(&ws).and_then(|s| suite::run(&s, &hardware, phase, shapes, json)),
        Some(Command::ImportAtrexBench { dir, write, json }) => {
            load_suite(&ws).and_then(|s| import::run(&s, &ws, &dir, write, json))
        }
        Some(Command::Doctor { json }) => doctor::run(&ws, cli.config.as_deref(), json),
        Some(Command::Bench {
            op,
            kernel,
            shapes,
            quick,
            full: _,
            hardware,
            device,
            json,
        }) => load_suite(&ws).and_then(|s| {
            bench::run(
                &s,
                &op,
                kernel.as_deref(),
                &shapes,
                quick,
                hardware.as_deref(),
                device,
                json,
            )
        }),
        Some(Command::Agent {
            op,
            backend,
            max_iters,
            auto,
            hardware,
            device,
            seed,
            session,
            json,
        }) => load_suite(&ws).and_then(|s| {
            agent::run(
                &ws,
                &s,
                agent::Args {
                    op: &op,
                    backend,
                    max_iters,
                    auto,
                    json,
                    device,
                    hardware: hardware.as_deref(),
                    config: cli.config.as_deref(),
                    seed,
                    session: session.as_deref(),
                },
            )
        }),
        Some(Command::Calibrate { device, json }) => calibrate::run(device, json),
        Some(Command::Measure {
            op,
            kernel,
            session,
            rationale,
            decide,
            quick,
            device,
            json,
        }) => load_suite(&ws).and_then(|s| {
            measure::run(
                &s,
                &ws,
                &op,
                &kernel,
                session.as_deref(),
                &rationale,
                decide,
                quick,
                device,
                json,
            )
        }),
        Some(Command::Profile {
            op,
            kernel,
            shape,
            clock_control,
            device,
            json,
        }) => load_suite(&ws).and_then(|s| {
            profile::run(
                &s,
                &op,
                kernel.as_deref(),
                shape,
                &clock_control,
                device,
                json,
            )
        }),
        Some(Command::ProfileTarget { device, job }) => {
            return crate::engine::worker::profile_target(device, &job);
        }
        Some(Command::Compile {
            op,
            kernel,
            arch,
            json,
        }) => load_suite(&ws).and_then(|s| compile::run(&s, &op, kernel.as_deref(), &arch, json)),
        Some(Command::Worker { device, simulate }) => {
            return if simulate {
                crate::engine::simulate::main()
            } else {
                crate::engine::worker::main(device)
            };
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("atrex-tui: {e}");
            1
        }
    }
}
