//! `condense`: keeps an LLM agent's conversation inside its context window.
//!
//! Reads a conversation in the format the agent already uses, runs it through a pipeline of
//! compression stages loaded as plugins, and writes it back in the same format, smaller, with a
//! report of what each stage did. `condense --help` lists the commands; every failure is one
//! line on stderr and a non-zero exit (2 for usage and config errors, 1 for anything else).

mod bundle;
mod cli;
mod commands;
mod compare;
mod concurrent;
mod docs;
mod eval;
mod expand;
mod folder;
mod input;
mod known;
mod memory;
mod output;
mod review;
mod scaffold;
mod serve;
mod stats;
mod term;
mod write_texts;

use clap::Parser;
use std::process::ExitCode;

/// An error with the exit code it deserves.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
    /// Extra lines shown only with --verbose.
    pub detail: Option<String>,
}

impl Failure {
    /// A usage or configuration error (exit 2).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
            detail: None,
        }
    }
    /// Standard output was closed by its reader (`| head`): stop, quietly, with exit 0.
    pub fn closed_stdout() -> Failure {
        Failure {
            code: 0,
            message: String::new(),
            detail: None,
        }
    }
    /// Anything else (exit 1).
    pub fn run(message: impl Into<String>) -> Failure {
        Failure {
            code: 1,
            message: message.into(),
            detail: None,
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::run(format!("{e:#}"))
    }
}

impl From<condense_host::HostError> for Failure {
    fn from(e: condense_host::HostError) -> Self {
        Failure {
            code: if e.is_config_error() { 2 } else { 1 },
            message: e.to_string(),
            detail: e.detail().map(str::to_string),
        }
    }
}

/// glibc's malloc, with huge pages for the input buffer ([`memory::Allocator`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: memory::Allocator = memory::Allocator;

fn main() -> ExitCode {
    memory::tune_malloc();
    // Whatever happens, the user sees one line, never a panic trace.
    std::panic::set_hook(Box::new(|info| {
        if condense_abi::in_host_service() {
            // Caught by the plugin boundary and reported as the stage's failure, in one line.
            return;
        }
        let (msg, location) = condense_abi::describe_panic(info);
        if term::is_broken_pipe_panic(&msg) {
            // The reader of stdout left (`| head`): it has what it wanted. Exit quietly with 0,
            // as ripgrep does.
            std::process::exit(0);
        }
        let at = location.map(|l| format!(" ({l})")).unwrap_or_default();
        eprintln!(
            "{}",
            term::error_line(&format!("internal error: {msg}{at}; please report this"))
        );
    }));

    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // --help and --version are not errors.
            if !e.use_stderr() {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            eprintln!(
                "{}",
                term::error_line(&term::clap_error_line(
                    &e,
                    cli::subcommand_named().as_deref()
                ))
            );
            return ExitCode::from(2);
        }
    };
    let verbose = args.verbose;
    bundle::activate();
    match std::panic::catch_unwind(|| commands::run(args)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(failure)) if failure.code == 0 => ExitCode::SUCCESS,
        Ok(Err(failure)) => {
            eprintln!("{}", term::error_line(&failure.message));
            if verbose {
                if let Some(detail) = failure.detail {
                    eprintln!("{detail}");
                }
            }
            ExitCode::from(failure.code)
        }
        Err(_) => ExitCode::from(1),
    }
}
