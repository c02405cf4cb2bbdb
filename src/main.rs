//! `edgegate`: the command line of the edgegate gateway.
//!
//! One subcommand per file in `commands/`. Errors print their whole cause chain to stderr and
//! exit 1; usage errors exit 2; `edgegate build` exits 3 for a module over its size budget.

mod commands;

use std::process::ExitCode;

use clap::Parser;

/// An edge API gateway that runs Rust workers compiled to WebAssembly.
#[derive(Debug, Parser)]
#[command(name = "edgegate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match cli.command.execute() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            for cause in error.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            if error.is::<commands::OverBudget>() {
                ExitCode::from(commands::OVER_BUDGET)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Logs go to stderr, filtered by `EDGEGATE_LOG` (`tracing_subscriber::EnvFilter` syntax, e.g.
/// `info,edgegate::access=warn`); `info` by default.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("EDGEGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
