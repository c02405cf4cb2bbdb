//! `edgegate`: the command line of the edgegate gateway.
//!
//! One subcommand per file in `commands/`. Errors print their whole cause chain to stderr and
//! exit 1; usage errors exit 2; `edgegate build` exits 3 for a module over its size budget.

mod commands;
mod telemetry;
mod trim;

use std::process::ExitCode;

use clap::Parser;

/// An edge API gateway that runs Rust workers compiled to WebAssembly.
#[derive(Debug, Parser)]
#[command(name = "edgegate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
    /// How log lines are written: `text` (for people) or `json` (one object per line).
    #[arg(long, global = true, env = "EDGEGATE_LOG_FORMAT", value_enum, default_value_t)]
    log_format: telemetry::LogFormat,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let telemetry = match telemetry::init(cli.log_format) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let result = cli.command.execute();
    // The queued log lines first, so that the error is the last line.
    drop(telemetry);
    match result {
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
