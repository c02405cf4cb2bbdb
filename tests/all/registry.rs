//! Workers in an OCI registry, against a real one: Debian's `docker-registry` on loopback.
//! `edgegate push` publishes a module and a component as the Wasm artifact layout has them
//! (an `application/wasm` layer, an `application/vnd.wasm.config.v0+json` config), and
//! refuses what is not WebAssembly or not a reference.

use std::process::{Command, Output};

use edgegate_testkit::registry::Registry;

fn push(path: &std::path::Path, reference: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(["push"])
        .arg(path)
        .arg(reference)
        .env_remove("EDGEGATE_REGISTRY_USERNAME")
        .env_remove("EDGEGATE_REGISTRY_PASSWORD")
        .env("DOCKER_CONFIG", "/nonexistent")
        .output()
        .unwrap()
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
