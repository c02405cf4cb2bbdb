//! `edgegate serve`.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::Context;
use edgegate_host::config::{Loaded, Scheduler};
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
    /// Address of the TLS listener; overrides `server.tls.listen` (with `[server.tls]`).
    #[arg(long, env = "EDGEGATE_TLS_LISTEN", value_name = "ADDR")]
    tls_listen: Option<SocketAddr>,
    /// Address of the admin listener (/healthz, /metrics); overrides `server.admin`.
    #[arg(long, env = "EDGEGATE_ADMIN", value_name = "ADDR")]
    admin: Option<SocketAddr>,
    /// Reload when the configuration file or a module file it names changes (as SIGHUP and
    /// `POST /reload` do).
    #[arg(long)]
    watch: bool,
    /// Serve the bundled demo over TLS too, on 127.0.0.1:8443, with a certificate for
    /// localhost made now by a certificate authority made now; the authority's certificate
    /// is written to the cache directory for `curl --cacert`. Only with the demo.
    #[arg(long, conflicts_with = "config")]
    demo_tls: bool,
}

impl ServeCommand {
    /// Loads the workers, binds, prints the bound addresses, serves until SIGINT or SIGTERM,
    /// drains, and returns.
    pub fn execute(self) -> anyhow::Result<()> {
        let demo_ca = if self.demo_tls { Some(demo_tls()?) } else { None };
        let loaded = match &demo_ca {
            Some(demo) => self.config.load_with(&demo.table)?,
            None => self.config.load()?,
        };
        anyhow::ensure!(
            self.tls_listen.is_none() || loaded.config.server.tls.is_some(),
            "--tls-listen needs a [server.tls] table in the configuration"
        );
        if self.config.config.is_none() {
            tracing::info!("no --config given: serving the bundled demo (POST JSON to /echo)");
        }
        let listen = self.listen.unwrap_or(loaded.config.server.listen);
        let admin = self.admin.unwrap_or(loaded.config.server.admin);
        let mut runtime = tokio::runtime::Builder::new_multi_thread();
        if loaded.config.server.scheduler == Scheduler::PerCore {
            // The first CPU's: the server starts a runtime of one thread for each other CPU.
            runtime.worker_threads(1);
        }
        let runtime = runtime
            .enable_all()
            .thread_name("edgegate")
            .build()
            .context("starting the async runtime")?;
        runtime.block_on(async {
            // Before the addresses are printed: whoever reads them may signal at once.
            let shutdown =
                edgegate_host::shutdown_signal().context("installing signal handlers")?;
            // Before the gateway: its routes, workers and upstreams register their metrics.
            edgegate_host::observe::metrics::install()?;
            edgegate_host::observe::log_writer::report_drops();
            crate::trim::start().context("starting the memory trim thread")?;
            let gateway = Gateway::build(&loaded, edgegate_guests::BUILTIN).await?;
            let server = Server::bind(gateway, listen, admin, self.tls_listen)
                .await
                .with_context(|| format!("binding {listen} and {admin}"))?;
            let _watch = if self.watch {
                Some(edgegate_host::server::watch::watch(server.gateway().clone())?)
            } else {
                None
            };
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "listening on http://{}", server.local_addr()?)?;
            if let Some(tls) = server.tls_addr() {
                writeln!(stdout, "tls on https://{}", tls?)?;
            }
            writeln!(stdout, "admin on http://{}", server.admin_addr()?)?;
            if let Some(demo) = &demo_ca {
                writeln!(stdout, "demo CA: {} (curl --cacert it)", demo.ca.display())?;
            }
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

/// The demo's TLS: where its authority's certificate was written, and the `[server.tls]`
/// table that serves its certificate.
struct DemoTls {
    ca: std::path::PathBuf,
    table: String,
}

/// Makes a certificate authority and a certificate for localhost (and 127.0.0.1, ::1), and
/// writes them under the cache directory (`~/.cache/edgegate/demo-tls`).
fn demo_tls() -> anyhow::Result<DemoTls> {
    let dir = edgegate_runtime::ModuleCache::default_dir()
        .and_then(|modules| Some(modules.parent()?.join("demo-tls")))
        .context("no cache directory: set HOME or XDG_CACHE_HOME")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let authority = edgegate_host::demo::tls::Authority::new("edgegate demo CA")?;
    let issued = authority.issue(&["localhost", "127.0.0.1", "::1"])?;
    let (cert, key) = issued
        .write(&dir, "localhost")
        .with_context(|| format!("writing into {}", dir.display()))?;
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, authority.pem()).with_context(|| format!("writing {}", ca.display()))?;
    let table = format!(
        "\n[server.tls]\ncertificates = [{{ cert = {:?}, key = {:?} }}]\n",
        cert.display().to_string(),
        key.display().to_string()
    );
    Ok(DemoTls { ca, table })
}
