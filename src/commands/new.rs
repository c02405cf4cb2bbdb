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
    /// echoes; KV through `wasi:keyvalue`, config through `wasi:config`, and the caller the
    /// gateway verified. Runs on any wasi:http host.
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
            None => "wasip2 = \"2.0.1\"\n\
                     wit-bindgen = { version = \"0.62\", default-features = false, features = [\"macros\", \"realloc\"] }"
                .to_owned(),
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
            Self::Echo => String::new(),
            Self::HttpComponent => return component_config(name, module),
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
        let mut files = vec![
            ("Cargo.toml", fill(include_str!("../templates/Cargo.toml.tmpl"))),
            (".cargo/config.toml", include_str!("../templates/cargo-config.toml.tmpl").into()),
            ("src/lib.rs", fill(self.template.source())),
            ("edgegate.toml", self.template.config(&name, &module)),
        ];
        if let Template::HttpComponent = self.template {
            files.extend(COMPONENT_WIT.iter().map(|(file, text)| (*file, (*text).to_owned())));
            files.push(("jwt-secret", dev_secret()?));
            files.push((".gitignore", "target/\njwt-secret\n".into()));
            files.push(("README.md", component_readme(&name, &module)));
        } else {
            files.push((".gitignore", "target/\n".into()));
            files.push(("README.md", readme(&name, &module)));
        }
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

/// The WIT a component template binds with wit-bindgen: its world, and the upstream
/// `wasi:keyvalue` and `wasi:config` packages, as the runtime implements them.
const COMPONENT_WIT: &[(&str, &str)] = &[
    (
        "wit/world.wit",
        "// The interfaces beyond wasi:http this component imports. The packages in deps/ are\n\
         // the upstream WIT, the versions edgegate (and Wasmtime 48 and 49) implement.\n\
         package edgegate:template;\n\n\
         world host {\n  \
         import wasi:keyvalue/store@0.2.0-draft;\n  \
         import wasi:keyvalue/atomics@0.2.0-draft;\n  \
         import wasi:config/store@0.2.0-rc.1;\n}\n",
    ),
    (
        "wit/deps/keyvalue/store.wit",
        include_str!("../../crates/runtime/wit/deps/keyvalue/store.wit"),
    ),
    (
        "wit/deps/keyvalue/atomic.wit",
        include_str!("../../crates/runtime/wit/deps/keyvalue/atomic.wit"),
    ),
    (
        "wit/deps/keyvalue/batch.wit",
        include_str!("../../crates/runtime/wit/deps/keyvalue/batch.wit"),
    ),
    (
        "wit/deps/keyvalue/watch.wit",
        include_str!("../../crates/runtime/wit/deps/keyvalue/watch.wit"),
    ),
    (
        "wit/deps/keyvalue/world.wit",
        include_str!("../../crates/runtime/wit/deps/keyvalue/world.wit"),
    ),
    ("wit/deps/config/store.wit", include_str!("../../crates/runtime/wit/deps/config/store.wit")),
    ("wit/deps/config/world.wit", include_str!("../../crates/runtime/wit/deps/config/world.wit")),
];

/// The component template's configuration: its KV namespace and config table, and `/me`
/// behind a route identity whose key is the crate's `jwt-secret` file.
fn component_config(name: &str, module: &str) -> String {
    format!(
        r#"[kv.default]

[workers.{name}]
module = "{module}"
kv = ["default"]
config = {{ greeting = "hello" }}

# /me only with a bearer token the gateway verifies; the component gets its `sub`.
[[routes]]
path = "/me"
worker = "{name}"
[routes.identity]
claims = {{ sub = "x-jwt-sub" }}
[routes.identity.jwt]
issuer = "me"
keys = [{{ kid = "k1", alg = "HS256", secret_file = "jwt-secret" }}]

[[routes]]
prefix = "/"
worker = "{name}"
"#
    )
}

/// A fresh HMAC secret for the template's tokens: 32 random bytes, as hex.
fn dev_secret() -> anyhow::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .context("reading /dev/urandom for the template's JWT secret")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n")
}

/// The component template's README: how to try each interface.
fn component_readme(name: &str, module: &str) -> String {
    let token = r#"node -e 'const c=require("crypto"),s=require("fs").readFileSync("jwt-secret","utf8").trim(),b=o=>Buffer.from(JSON.stringify(o)).toString("base64url"),h=b({alg:"HS256",kid:"k1"}),p=b({sub:"ada",iss:"me",exp:Math.floor(Date.now()/1000)+3600});console.log(h+"."+p+"."+c.createHmac("sha256",s).update(h+"."+p).digest("base64url"))'"#;
    format!(
        "{}\n## What it uses\n\n```sh\ncurl localhost:8080/                      # greeting from wasi:config (edgegate.toml's config)\ncurl -X PUT --data hi localhost:8080/kv/a # wasi:keyvalue: the gateway's KV namespace `default`\ncurl localhost:8080/kv/a\ncurl -X POST localhost:8080/visits        # an atomic counter\ncurl localhost:8080/me                    # 401: /me needs a verified token\nTOKEN=$({token})\ncurl -H \"authorization: Bearer $TOKEN\" localhost:8080/me   # hello, ada\n```\n\n`jwt-secret` is this crate's own HMAC key, made by `edgegate new`: keep it out of version\ncontrol for anything but a test.\n",
        readme(name, module)
    )
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
