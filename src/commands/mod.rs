//! The subcommands, one per file.

mod bench;
mod build;
mod check;
mod compile;
mod module_report;
mod new;
mod push;
mod serve;
mod tools;

pub use build::{OVER_BUDGET, OverBudget};

use std::path::PathBuf;

use anyhow::Context;
use edgegate_host::config::Loaded;

/// The subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Serve the configured routes (or, without --config, the bundled demo).
    Serve(serve::ServeCommand),
    /// Check a configuration and its modules without serving; exits 0 if it is good, 1 if not.
    Check(check::CheckCommand),
    /// Scaffold a worker crate from a template.
    New(new::NewCommand),
    /// Build a worker crate for wasm32, optimize it and check it against its size budget
    /// (exit 3 when over).
    Build(build::BuildCommand),
    /// Install or locate the build tools `edgegate build` uses (wasm-opt).
    Tools(tools::ToolsCommand),
    /// Compile a module ahead of time for this host, with the engine settings `serve` uses.
    Compile(compile::CompileCommand),
    /// Publish a built worker to an OCI registry.
    Push(push::PushCommand),
    /// Run the benchmark lab: edgegate against Node.js, workerd and native Rust, reported in
    /// Markdown, JSON and SVG.
    Bench(bench::BenchCommand),
    /// The benchmark lab's native-Rust comparator (started by `edgegate bench`).
    #[command(hide = true)]
    BenchNative(bench::BenchNativeCommand),
    /// A fake server of known cost, for the lab's own tests.
    #[command(hide = true)]
    BenchFake(bench::BenchFakeCommand),
}

impl Command {
    /// Runs the subcommand.
    pub fn execute(self) -> anyhow::Result<()> {
        match self {
            Self::Serve(command) => command.execute(),
            Self::Check(command) => command.execute(),
            Self::New(command) => command.execute(),
            Self::Build(command) => command.execute(),
            Self::Tools(command) => command.execute(),
            Self::Compile(command) => command.execute(),
            Self::Push(command) => command.execute(),
            Self::Bench(command) => command.execute(),
            Self::BenchNative(command) => command.execute(),
            Self::BenchFake(command) => command.execute(),
        }
    }
}

/// Flags shared by every subcommand that reads a configuration.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// The configuration file. Without it, the bundled demo configuration is used.
    #[arg(long, short = 'c', env = "EDGEGATE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The demo: what `edgegate serve` runs without a configuration file.
const DEMO_CONFIG: &str = include_str!("../demo.toml");

impl ConfigArgs {
    /// Reads and checks the configuration, or the demo one.
    fn load(&self) -> anyhow::Result<Loaded> {
        self.load_with("")
    }

    /// Reads and checks the configuration, or the demo one with `demo_extra` (TOML tables)
    /// added at its end.
    fn load_with(&self, demo_extra: &str) -> anyhow::Result<Loaded> {
        match &self.config {
            Some(path) => Ok(Loaded::from_file(path)?),
            None => {
                let cwd = std::env::current_dir().context("reading the current directory")?;
                let text = format!("{DEMO_CONFIG}{demo_extra}");
                let mut loaded = Loaded::from_text(&text, "<built-in demo>", cwd)?;
                // The demo's secret has a published default, so the demo runs as it is.
                loaded.env_defaults.insert(
                    edgegate_host::demo::SECRET_ENV.into(),
                    edgegate_host::demo::DEFAULT_SECRET.into(),
                );
                Ok(loaded)
            }
        }
    }
}
