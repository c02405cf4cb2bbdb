//! Workers in an OCI registry, against a real one: Debian's `docker-registry` on loopback.
//! `edgegate push` publishes a module and a component as the Wasm artifact layout has them
//! (an `application/wasm` layer, an `application/vnd.wasm.config.v0+json` config), and
//! refuses what is not WebAssembly or not a reference.

use std::process::{Command, Output};

use edgegate_testkit::registry::Registry;

use crate::support::{Gateway, metric_line, post, reload};

/// `edgegate ARGS` with no registry credentials but those in `env`: none in the environment,
/// and no docker `config.json`.
fn edgegate(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(args)
        .env_remove("EDGEGATE_REGISTRY_USERNAME")
        .env_remove("EDGEGATE_REGISTRY_PASSWORD")
        .env_remove("EDGEGATE_REGISTRY_HOST")
        .env("DOCKER_CONFIG", "/nonexistent")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn push(path: &std::path::Path, reference: &str) -> Output {
    edgegate(&["push", path.to_str().unwrap(), reference], &[])
}

fn sha256(path: &std::path::Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    format!("sha256:{}", text.split_whitespace().next().unwrap())
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

#[test]
fn push_publishes_modules_and_components_as_wasm_artifacts() {
    let Some(registry) = Registry::start("push_publishes_wasm_artifacts") else { return };
    let dir = tempfile::tempdir().unwrap();
    for (name, wasm, os) in [
        ("echo", edgegate_guests::ECHO_JSON, "wasip1"),
        ("echo-component", edgegate_guests::ECHO_JSON_COMPONENT, "wasip2"),
    ] {
        let file = dir.path().join(format!("{name}.wasm"));
        std::fs::write(&file, wasm).unwrap();
        let reference = format!("oci://{}/workers/{name}:v1", registry.host());
        let out = push(&file, &reference);
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
        let module = sha256(&file);
        assert!(said.contains(&format!("module {module}")), "{said}");
        // The manifest the tag resolves to: the artifact layout, and the digest push printed.
        let (status, body) =
            registry.get(&format!("/v2/workers/{name}/manifests/v1"), OCI_MANIFEST);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let manifest: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(manifest["config"]["mediaType"], "application/vnd.wasm.config.v0+json");
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(
            (&layers[0]["mediaType"], &layers[0]["digest"]),
            (&"application/wasm".into(), &module.clone().into())
        );
        let (_, blob) = registry.get(&format!("/v2/workers/{name}/blobs/{module}"), "*/*");
        assert_eq!(blob, wasm, "the layer is the file, byte for byte");
        let config_digest = manifest["config"]["digest"].as_str().unwrap();
        let (_, config) = registry.get(&format!("/v2/workers/{name}/blobs/{config_digest}"), "*/*");
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!((&config["architecture"], &config["os"]), (&"wasm".into(), &os.into()));
        assert_eq!(config["layerDigests"][0], module.as_str());
    }
}

#[test]
fn push_refuses_what_is_not_webassembly_or_not_a_reference() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a module").unwrap();
    let wasm = dir.path().join("echo.wasm");
    std::fs::write(&wasm, edgegate_guests::ECHO_JSON).unwrap();
    for (path, reference, says) in [
        (&text, "oci://127.0.0.1:9/workers/echo:v1", "not WebAssembly"),
        (&wasm, "oci://workers/echo:v1", "is not a reference"),
        (&wasm, "127.0.0.1:9/workers/echo:v1", "is not a reference"),
        (&wasm, "oci://127.0.0.1:9/workers/echo", "is not a reference"),
    ] {
        let out = push(path, reference);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{reference}: {stderr}");
        assert!(stderr.contains(says), "{reference}: {stderr}");
    }
}

/// Pushes `wasm` as `reference`; returns the manifest's digest `push` printed.
pub(crate) fn publish(dir: &std::path::Path, wasm: &[u8], reference: &str) -> String {
    let file = dir.join("publish.wasm");
    std::fs::write(&file, wasm).unwrap();
    let out = push(&file, reference);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    let manifest = said.split_whitespace().find(|w| w.starts_with("sha256:")).unwrap();
    manifest.trim_end_matches([',', ';', ')']).to_owned()
}

/// A configuration serving `module` as worker `w` on `/w`, its module cache (and the store
/// of pulled modules in it) in `cache`.
fn serving(module: &str, cache: &std::path::Path) -> String {
    format!(
        "[runtime]\ncache_dir = {cache:?}\n\n[workers.w]\nmodule = {module:?}\n\n\
         [[routes]]\nprefix = \"/w\"\nworker = \"w\"\n",
        cache = cache.display().to_string(),
    )
}

/// `edgegate check --config path`.
fn check(path: &std::path::Path) -> Output {
    edgegate(&["check", "--config", path.to_str().unwrap()], &[])
}

const TOKEN: &str = "registry-s3cret-0123456789abcdef01234567";
const BODY: &[u8] = br#"{ "a" : 1 }"#;

fn info(gw: &Gateway, wasm: &[u8]) -> Option<String> {
    let series = format!(
        "edgegate_worker_info{{worker=\"w\",digest=\"{}\"}} 1",
        edgegate_runtime::module_digest(wasm)
    );
    metric_line(gw, &series)
}

/// The whole life of a worker published to a registry: pushed, checked, served; a new
/// version pushed under the same tag and reloaded; the registry gone at a reload (refused,
/// the running version kept) and at a restart (served from the store, with a warning).
#[test]
fn a_pushed_worker_serves_and_follows_its_tag_through_reloads_and_registry_outages() {
    let Some(mut registry) = Registry::start("a_pushed_worker_serves") else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let reference = format!("oci://{}/workers/w:live", registry.host());
    let v1 = publish(dir.path(), edgegate_guests::ECHO_JSON, &reference);
    let config = dir.path().join("edgegate.toml");
    std::fs::write(&config, serving(&reference, &cache)).unwrap();

    // `check` resolves the tag and says to what.
    let checked = check(&config);
    let said = String::from_utf8_lossy(&checked.stdout).to_string();
    assert!(checked.status.success(), "{said}{}", String::from_utf8_lossy(&checked.stderr));
    let layer = edgegate_runtime::module_digest(edgegate_guests::ECHO_JSON);
    assert!(said.contains(&format!("{reference} = {v1}, module sha256:{layer}")), "{said}");

    let env = [("EDGEGATE_ADMIN_TOKEN", TOKEN), ("EDGEGATE_LOG", "info"), ("DOCKER_CONFIG", "/x")];
    let mut gw = Gateway::start_at(&config, &env);
    assert_eq!(post(gw.addr, "/w", BODY).text(), r#"{"a":1}"#);
    assert!(info(&gw, edgegate_guests::ECHO_JSON).is_some(), "worker_info names the pulled digest");

    // A new version under the same tag: a reload resolves the tag again and serves it.
    let v2 = publish(dir.path(), edgegate_guests::JSON_TRANSFORM, &reference);
    assert_ne!(v1, v2);
    let reloaded = reload(&gw, Some(TOKEN));
    assert_eq!(reloaded.status, 200, "{}", reloaded.text());
    assert_eq!(reloaded.json()["changed"], serde_json::json!(["w"]));
    let transformed = post(gw.addr, "/w", BODY).text();
    assert_ne!(transformed, r#"{"a":1}"#, "the new version answers");
    assert!(info(&gw, edgegate_guests::JSON_TRANSFORM).is_some(), "worker_info follows the tag");

    // The registry down: a reload cannot resolve the tag, is refused, and the running version
    // keeps serving.
    registry.stop();
    let refused = reload(&gw, Some(TOKEN));
    assert_eq!(refused.status, 422, "{}", refused.text());
    let message = refused.json()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("workers.w.module"), "{message}");
    assert_eq!(post(gw.addr, "/w", BODY).text(), transformed);
    let (_, log) = gw.stop();
    let short = &edgegate_runtime::module_digest(edgegate_guests::JSON_TRANSFORM)[..12];
    assert!(
        log.contains(&format!("digest=\"{short}\"")),
        "the access log names the digest:\n{log}"
    );
    assert!(log.contains("module pulled from the registry"), "{log}");

    // A restart with the registry still down serves what the tag last resolved to.
    let gw = Gateway::start_at(&config, &env);
    assert_eq!(post(gw.addr, "/w", BODY).text(), transformed);
    assert!(info(&gw, edgegate_guests::JSON_TRANSFORM).is_some());
    let (_, log) = {
        let mut gw = gw;
        gw.stop()
    };
    assert!(
        log.contains("registry out of reach: serving the digest this reference last resolved to"),
        "{log}"
    );

    // `check` has no such fallback (a reload would not either), nor has a start with nothing
    // stored.
    let checked = check(&config);
    let stderr = String::from_utf8_lossy(&checked.stderr).to_string();
    assert!(!checked.status.success() && stderr.contains("workers.w.module"), "{stderr}");
    std::fs::write(&config, serving(&reference, &dir.path().join("empty"))).unwrap();
    let serve = ["serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config"];
    let started = edgegate(&[&serve[..], &[config.to_str().unwrap()]].concat(), &[]);
    let stderr = String::from_utf8_lossy(&started.stderr).to_string();
    assert!(!started.status.success(), "{stderr}");
    assert!(stderr.contains("no earlier pull of it is stored"), "{stderr}");
}

/// A layer whose bytes are not the ones its digest names is refused before anything compiles
/// it: altered in the registry, and altered in the store of pulled modules.
#[test]
fn a_tampered_layer_is_refused_in_the_registry_and_in_the_store() {
    let Some(registry) = Registry::start("a_tampered_layer_is_refused") else { return };
    let dir = tempfile::tempdir().unwrap();
    let reference = format!("oci://{}/workers/w:v1", registry.host());
    publish(dir.path(), edgegate_guests::ECHO_JSON, &reference);
    let layer = format!("sha256:{}", edgegate_runtime::module_digest(edgegate_guests::ECHO_JSON));
    let mut altered = edgegate_guests::ECHO_JSON.to_vec();
    let last = altered.len() - 1;
    altered[last] ^= 0xff;

    // In the registry: the same size, another byte.
    let blob = registry.blob(&layer);
    std::fs::write(&blob, &altered).unwrap();
    let config = dir.path().join("edgegate.toml");
    std::fs::write(&config, serving(&reference, &dir.path().join("cache"))).unwrap();
    let checked = check(&config);
    let stderr = String::from_utf8_lossy(&checked.stderr).to_string();
    assert!(!checked.status.success(), "{stderr}");
    assert!(stderr.contains("workers.w.module") && stderr.contains("refused"), "{stderr}");
    let stored = dir.path().join("cache/oci/blobs/sha256").join(&layer[7..]);
    assert!(!stored.exists(), "nothing refused is stored");

    // In the store: pulled honestly, then altered on disk.
    std::fs::write(&blob, edgegate_guests::ECHO_JSON).unwrap();
    let checked = check(&config);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    // Even though the module cache has the honest module compiled and its check recorded,
    // the stored file is read and checked against its digest.
    std::fs::write(&stored, &altered).unwrap();
    let checked = check(&config);
    let stderr = String::from_utf8_lossy(&checked.stderr).to_string();
    assert!(!checked.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("is not the module pulled as {layer}")), "{stderr}");
}

/// A registry that wants credentials gets them from the environment or from a docker
/// `config.json`, for a push and for a pull; never from the configuration file.
#[test]
fn credentials_come_from_the_environment_or_a_docker_config_json() {
    let (user, password) = ("ada", "s3cret-pw");
    let Some(registry) = Registry::start_with_auth("credentials_come_from", user, password) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("echo.wasm");
    std::fs::write(&wasm, edgegate_guests::ECHO_JSON).unwrap();
    let reference = format!("oci://{}/workers/w:v1", registry.host());
    let push_args = ["push", wasm.to_str().unwrap(), &reference];

    let anonymous = edgegate(&push_args, &[]);
    assert!(!anonymous.status.success(), "a push without credentials is refused");
    let host = registry.host();
    let wrong = [
        ("EDGEGATE_REGISTRY_HOST", host.as_str()),
        ("EDGEGATE_REGISTRY_USERNAME", user),
        ("EDGEGATE_REGISTRY_PASSWORD", "wrong"),
    ];
    assert!(!edgegate(&push_args, &wrong).status.success(), "a wrong password is refused");
    let env = [
        ("EDGEGATE_REGISTRY_HOST", host.as_str()),
        ("EDGEGATE_REGISTRY_USERNAME", user),
        ("EDGEGATE_REGISTRY_PASSWORD", password),
    ];
    let unnamed = &env[1..];
    let refused = edgegate(&push_args, unnamed);
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(!refused.status.success(), "credentials that name no registry are not sent");
    assert!(stderr.contains("EDGEGATE_REGISTRY_HOST"), "{stderr}");
    let pushed = edgegate(&push_args, &env);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));

    let config = dir.path().join("edgegate.toml");
    std::fs::write(&config, serving(&reference, &dir.path().join("cache"))).unwrap();
    let check_args = ["check", "--config", config.to_str().unwrap()];
    let anonymous = edgegate(&check_args, &[]);
    let stderr = String::from_utf8_lossy(&anonymous.stderr).to_string();
    assert!(!anonymous.status.success() && stderr.contains("workers.w.module"), "{stderr}");
    let checked = edgegate(&check_args, &env);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));

    // A docker config.json's `auths` entry, as `docker login` or `podman login` writes it.
    let docker = dir.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    // Standard base64 with padding, as those tools write it (coreutils' `base64`).
    let mut base64 = Command::new("base64")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    base64.stdin.take().unwrap().write_all(format!("{user}:{password}").as_bytes()).unwrap();
    let auth = String::from_utf8(base64.wait_with_output().unwrap().stdout).unwrap();
    let auth = auth.trim();
    let json = serde_json::json!({ "auths": { registry.host(): { "auth": auth } } });
    std::fs::write(docker.join("config.json"), json.to_string()).unwrap();
    std::fs::remove_dir_all(dir.path().join("cache")).unwrap();
    let checked = edgegate(&check_args, &[("DOCKER_CONFIG", docker.to_str().unwrap())]);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));

    // A credential helper, as `credHelpers` names one (ECR's, GCR's, a desktop keychain's):
    // the program `docker-credential-NAME`, asked `get` with the registry on its input. It
    // is asked once per registry, though two workers come from it.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let asked = dir.path().join("asked");
    let helper = bin.join("docker-credential-edgegate-test");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 2\nread server\necho \"$server\" >> {asked:?}\n\
             if [ \"$server\" = {host:?} ]; then\n  \
             echo '{{\"ServerURL\":\"'$server'\",\"Username\":\"{user}\",\"Secret\":\"{password}\"}}'\n\
             else\n  echo 'credentials not found in native keychain'; exit 1\nfi\n",
            host = registry.host(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let json = serde_json::json!({ "credHelpers": { registry.host(): "edgegate-test" } });
    std::fs::write(docker.join("config.json"), json.to_string()).unwrap();
    let second = format!("oci://{}/workers/v:v1", registry.host());
    let pushed = edgegate(&["push", wasm.to_str().unwrap(), &second], &env);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
    let mut two = serving(&reference, &dir.path().join("cache"));
    two += &format!("\n[workers.v]\nmodule = {second:?}\n");
    let two_workers = dir.path().join("two.toml");
    std::fs::write(&two_workers, two).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let helped = [("DOCKER_CONFIG", docker.to_str().unwrap()), ("PATH", &path)];
    let checked = edgegate(&["check", "--config", two_workers.to_str().unwrap()], &helped);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    let asked_for = std::fs::read_to_string(&asked).unwrap();
    assert_eq!(asked_for, format!("{}\n", registry.host()), "asked once, for the registry");
    // A store of credentials (`credsStore`) that holds nothing for this registry: anonymous,
    // and refused by it.
    let json = serde_json::json!({ "credsStore": "edgegate-test" });
    std::fs::write(docker.join("config.json"), json.to_string()).unwrap();
    let port = registry.host().rsplit_once(':').unwrap().1.to_owned();
    let other = format!("oci://localhost:{port}/workers/w:v1");
    std::fs::write(&config, serving(&other, &dir.path().join("cache"))).unwrap();
    let refused = edgegate(&check_args, &helped);
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(!refused.status.success() && stderr.contains("workers.w.module"), "{stderr}");
    assert!(!stderr.contains("credentials:"), "not found is anonymous, not an error: {stderr}");
    let asked_for = std::fs::read_to_string(&asked).unwrap();
    assert!(asked_for.ends_with(&format!("\nlocalhost:{port}\n")), "{asked_for}");
    // A helper that cannot be run is an error that names it.
    let json = serde_json::json!({ "credHelpers": { registry.host(): "edgegate-missing" } });
    std::fs::write(docker.join("config.json"), json.to_string()).unwrap();
    std::fs::write(&config, serving(&reference, &dir.path().join("cache"))).unwrap();
    let failed = edgegate(&check_args, &helped);
    let stderr = String::from_utf8_lossy(&failed.stderr).to_string();
    assert!(!failed.status.success() && stderr.contains("credential helper"), "{stderr}");

    // The configuration has no place for them.
    let mut text = serving(&reference, &dir.path().join("cache"));
    text += "\n[registry]\npassword = \"s3cret-pw\"\n";
    std::fs::write(&config, text).unwrap();
    let refused = edgegate(&check_args, &env);
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(!refused.status.success() && stderr.contains("unknown field `password`"), "{stderr}");
}

/// A registry on loopback that only records the `Authorization` header of each request it
/// is sent, and answers every one 401 with a Basic challenge (which a client holding a user
/// name and password for it answers with them).
struct Recorder {
    host: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Recorder {
    fn start() -> Self {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = std::io::BufReader::new(stream);
                let mut authorization = String::from("-");
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    if line.to_ascii_lowercase().starts_with("authorization:") {
                        authorization = line.trim_end().to_owned();
                    }
                    line.clear();
                }
                record.lock().unwrap().push(authorization);
                let _ = reader.get_mut().write_all(
                    b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"recorder\"\r\n\
                      Docker-Distribution-Api-Version: registry/2.0\r\n\
                      Content-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Self { host, seen }
    }

    /// The `Authorization` header of each request so far (`-` for none).
    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Credentials go only to the registry they were given for: a reference to another registry
/// (here one that records what it is sent) is resolved anonymously, whether the credentials
/// come from the environment or a docker `config.json`.
#[test]
fn credentials_go_only_to_the_registry_they_name() {
    let recorder = Recorder::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edgegate.toml");
    let reference = format!("oci://{}/team/w:v1", recorder.host);
    std::fs::write(&config, serving(&reference, &dir.path().join("cache"))).unwrap();
    let args = ["check", "--config", config.to_str().unwrap()];
    let env = |host: &str| {
        [
            ("EDGEGATE_REGISTRY_HOST", host.to_owned()),
            ("EDGEGATE_REGISTRY_USERNAME", "ada".to_owned()),
            ("EDGEGATE_REGISTRY_PASSWORD", "s3cret-pw".to_owned()),
        ]
    };
    let check = |env: &[(&str, String)]| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = edgegate(&args, &env);
        assert!(!out.status.success(), "the recorder refuses everyone");
    };

    check(&env("registry.example:5000"));
    let docker = dir.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    // base64 of "ada:s3cret-pw", for another registry only.
    let json = r#"{"auths":{"registry.example:5000":{"auth":"YWRhOnMzY3JldC1wdw=="}}}"#;
    std::fs::write(docker.join("config.json"), json).unwrap();
    check(&[("DOCKER_CONFIG", docker.display().to_string())]);
    let seen = recorder.seen();
    assert!(seen.len() >= 2, "the recorder was asked: {seen:?}");
    assert!(seen.iter().all(|a| a == "-"), "nothing for another registry was sent: {seen:?}");

    // The same credentials for the recorder itself are sent to it: the test can see them.
    check(&env(&recorder.host));
    let seen = recorder.seen();
    assert!(seen.iter().any(|a| a.contains("Basic")), "{seen:?}");
}

/// This machine's address on the interface of its default route, if it has one that is not
/// loopback. Connecting a UDP socket sends nothing; it only picks the source address.
fn outward_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.255.255.255:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// A registry off loopback is spoken to over HTTPS unless `push --insecure` or
/// `[registry] insecure` names it: a plain-HTTP registry is refused otherwise.
#[test]
fn plain_http_only_to_loopback_or_a_registry_listed_insecure() {
    let Some(ip) = outward_address() else {
        let why = "this machine has no address besides loopback";
        crate::support::skipped("plain HTTP off loopback", why, "EDGEGATE_REQUIRE_REGISTRY");
        return;
    };
    let Some(registry) = Registry::start_on("plain_http_only", ip) else { return };
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("echo.wasm");
    std::fs::write(&wasm, edgegate_guests::ECHO_JSON).unwrap();
    let reference = format!("oci://{}/workers/w:v1", registry.host());
    let refused = push(&wasm, &reference);
    assert!(!refused.status.success(), "HTTPS to a plain-HTTP registry off loopback fails");
    let insecure = edgegate(&["push", wasm.to_str().unwrap(), &reference, "--insecure"], &[]);
    assert!(insecure.status.success(), "{}", String::from_utf8_lossy(&insecure.stderr));

    let config = dir.path().join("edgegate.toml");
    let serving = serving(&reference, &dir.path().join("cache"));
    std::fs::write(&config, &serving).unwrap();
    let refused = check(&config);
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(!refused.status.success() && stderr.contains("workers.w.module"), "{stderr}");
    assert!(stderr.contains("https://"), "it was asked over HTTPS: {stderr}");
    let listed = format!("{serving}\n[registry]\ninsecure = [{:?}]\n", registry.host());
    std::fs::write(&config, listed).unwrap();
    let checked = check(&config);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
}
