//! `edgegate serve`.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::Context;
use edgegate_host::config::Loaded;
use edgegate_host::{Gateway, Server, demo};

use super::ConfigArgs;

/// Serve the configured routes.
#[derive(Debug, clap::Args)]
pub struct ServeCommand {
    #[command(flatten)]
    config: ConfigArgs,
    /// Address of the HTTP listener; overrides `server.listen`. Port 0 picks a free port and
    /// prints it.
    #[arg(long, env = "EDGEGATE_LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Address of the admin listener (/healthz, /metrics); overrides `server.admin`.
    #[arg(long, env = "EDGEGATE_ADMIN", value_name = "ADDR")]
    admin: Option<SocketAddr>,
    /// Reload when the configuration file or a module file it names changes (as SIGHUP and
    /// `POST /reload` do).
    #[arg(long)]
    watch: bool,
}

impl ServeCommand {
    /// Loads the workers, binds, prints the bound addresses, serves until SIGINT or SIGTERM,
    /// drains, and returns.
    pub fn execute(self) -> anyhow::Result<()> {
        let loaded = self.config.load()?;
        if self.config.config.is_none() {
            tracing::info!("no --config given: serving the bundled demo (POST JSON to /echo)");
        }
        let listen = self.listen.unwrap_or(loaded.config.server.listen);
        let admin = self.admin.unwrap_or(loaded.config.server.admin);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("edgegate")
            .build()
            .context("starting the async runtime")?;
        runtime.block_on(async {
            // Before the addresses are printed: whoever reads them may signal at once.
            let shutdown =
                edgegate_host::shutdown_signal().context("installing signal handlers")?;
            // Before the gateway: its routes, workers and upstreams register their metrics.
            edgegate_host::metrics::install()?;
            let gateway = Gateway::build(&loaded, edgegate_guests::BUILTIN).await?;
            let server = Server::bind(gateway, listen, admin)
                .await
                .with_context(|| format!("binding {listen} and {admin}"))?;
            let _watch = if self.watch {
                Some(edgegate_host::watch::watch(server.gateway().clone())?)
            } else {
                None
            };
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "listening on http://{}", server.local_addr()?)?;
            writeln!(stdout, "admin on http://{}", server.admin_addr()?)?;
            if self.config.config.is_none() {
                print_demo_tokens(&mut stdout, &loaded)?;
            }
            stdout.flush()?;
            drop(stdout);
            server.run(shutdown).await;
            anyhow::Ok(())
        })
    }
}

/// The demo's auth route needs a token: print one per audience, valid for a day.
fn print_demo_tokens(out: &mut impl Write, loaded: &Loaded) -> anyhow::Result<()> {
    let secret = loaded.env_var(demo::SECRET_ENV).unwrap_or_default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("reading the clock")?
        .as_secs();
    for audience in ["service-a", "service-b"] {
        let token = demo::token(secret.as_bytes(), audience, "demo-user", now, 24 * 3600);
        writeln!(out, "demo token for {audience}: {token}")?;
    }
    Ok(())
}
