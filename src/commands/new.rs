//! `edgegate new`: a worker crate that builds and serves as generated.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Scaffold a worker crate: Cargo.toml with the size-first profile and a budget, src/lib.rs
/// using the SDK, a README. Then `edgegate build NAME`.
#[derive(Debug, clap::Args)]
pub struct NewCommand {
    /// The crate's directory; its last component is the crate's name.
    path: PathBuf,
    /// What the worker starts as.
    #[arg(long, value_enum, default_value_t = Template::Echo)]
    template: Template,
    /// The edgegate SDK crate to depend on (by path). Default: the SDK in the source tree this
    /// edgegate was built from, if it is still there.
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

/// The starting points.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Template {
    /// GET says hello, POST echoes the body.
    Echo,
    /// Verifies a bearer JWT with the gateway's keys.
    Auth,
    /// Reads and writes a KV namespace.
    Kv,
    /// A standard `wasi:http/proxy` component (the `wasip2` bindings): GET says hello, POST
    /// echoes. Runs on any wasi:http host.
    HttpComponent,
}

impl Template {
    fn source(self) -> &'static str {
        match self {
            Self::Echo => include_str!("../templates/echo.rs.tmpl"),
            Self::Auth => include_str!("../templates/auth.rs.tmpl"),
            Self::Kv => include_str!("../templates/kv.rs.tmpl"),
            Self::HttpComponent => include_str!("../templates/http-component.rs.tmpl"),
        }
    }

    /// The crate's dependencies: the SDK at `sdk`, or a component's bindings.
    fn dependencies(self, sdk: Option<&Path>) -> String {
        match sdk {
            Some(sdk) => format!("edgegate-sdk = {{ path = {:?} }}", sdk.display().to_string()),
            None => "wasip2 = \"2.0.1\"".to_owned(),
        }
    }

    /// The size budget: what the template comes to after `wasm-opt`, with room to grow.
    fn budget(self) -> &'static str {
        match self {
            Self::Echo | Self::Kv => "16KB",
            Self::Auth | Self::HttpComponent => "64KB",
        }
    }

    /// The gateway configuration that serves it.
    fn config(self, name: &str, module: &str) -> String {
        let extra = match self {
            Self::Echo | Self::HttpComponent => String::new(),
            Self::Auth => format!(
                "\n[workers.{name}.jwt]\nissuer = \"me\"\nrequired_claims = [\"exp\", \"sub\"]\n\n[[workers.{name}.jwt.keys]]\nkid = \"k1\"\nalg = \"HS256\"\nsecret_env = \"MY_JWT_SECRET\"\n"
            ),
            Self::Kv => "kv = [\"default\"]\n\n[kv.default]\nbackend = \"memory\"\n".into(),
        };
        format!(
            "[workers.{name}]\nmodule = \"{module}\"\n{extra}\n[[routes]]\nprefix = \"/\"\nworker = \"{name}\"\n"
        )
    }
}

impl NewCommand {
    /// Writes the crate.
    pub fn execute(self) -> anyhow::Result<()> {
        let name = self
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .context("the path must end in the crate's name")?
            .to_owned();
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            bail!(
                "`{name}` is not a crate name: use letters, digits, `-` and `_`, starting with a letter"
            );
        }
        if self.path.exists() {
            bail!("{} already exists", self.path.display());
        }
        let sdk = match self.template {
            // A component depends on its bindings from crates.io, not on the SDK.
            Template::HttpComponent => None,
            _ => Some(sdk_dir(self.sdk)?),
        };
        let lib = name.replace('-', "_");
        let module = format!("target/wasm32-unknown-unknown/release/{lib}.opt.wasm");
        let fill = |text: &str| {
            text.replace("{{name}}", &name)
                .replace("{{dependencies}}", &self.template.dependencies(sdk.as_deref()))
                .replace("{{budget}}", self.template.budget())
        };
        let files = [
            ("Cargo.toml", fill(include_str!("../templates/Cargo.toml.tmpl"))),
            (".cargo/config.toml", include_str!("../templates/cargo-config.toml.tmpl").into()),
            ("src/lib.rs", fill(self.template.source())),
            (".gitignore", "target/\n".into()),
            ("edgegate.toml", self.template.config(&name, &module)),
            ("README.md", readme(&name, &module)),
        ];
        for (file, text) in files {
            let path = self.path.join(file);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        println!(
            "created {} ({:?} template). Next:\n  edgegate build {0}\n  edgegate serve --config {0}/edgegate.toml",
            self.path.display(),
            self.template
        );
        Ok(())
    }
}

/// The SDK crate to depend on: `given`, else the one in the source tree this edgegate was
/// built from.
fn sdk_dir(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let sdk = given.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/sdk"));
    sdk.canonicalize().with_context(|| {
        format!(
            "the edgegate SDK is not at {}: pass --sdk DIR (the `crates/sdk` of an edgegate checkout)",
            sdk.display()
        )
    })
}

fn readme(name: &str, module: &str) -> String {
    format!(
        "# {name}\n\nAn edgegate worker.\n\n```sh\nedgegate build            # cargo for wasm32, wasm-opt, the size report; exit 3 over budget\nedgegate serve --config edgegate.toml\ncurl localhost:8080/\ncargo test                # the handler's tests, natively\n```\n\n- `src/lib.rs`: the handler, one fresh instance per request.\n- `Cargo.toml`: the size-first release profile, and the budget `edgegate build` checks\n  (`[package.metadata.edgegate] budget`).\n- `edgegate.toml`: a gateway configuration that serves `{module}` on `/`.\n"
    )
}
