//! The Kubernetes manifests under `deploy/kubernetes`: every one checked against the Kubernetes
//! schemas by `kubernetes-validate` (PyPI, installed by `tools/kubernetes-validate/install`),
//! strictly (an unknown field fails); the kustomization lists exactly the files there, and
//! renders (`kubectl kustomize`, installed by `tools/kubectl/install`) to valid resources; the
//! configuration they mount passes `edgegate check`; and the timings agree with each other.

use std::path::{Path, PathBuf};
use std::process::Command;

fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// `kubernetes-validate`, or `None`: see [`installed`].
fn validator() -> Option<PathBuf> {
    installed(
        "kubernetes-validate",
        "tools/kubernetes-validate/venv/bin/kubernetes-validate",
        "EDGEGATE_REQUIRE_KUBERNETES_VALIDATE",
    )
}

/// `tool`, installed by `tools/…/install` at `path` under the checkout, or `None` (said
/// loudly) when it is not; with `required` set to 1 (as in CI) that is a failure.
fn installed(tool: &str, path: &str, required: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if path.is_file() {
        return Some(path);
    }
    let what = format!("the Kubernetes manifests checked with {tool}");
    let why = format!("{tool} is not installed (tools/{tool}/install)");
    crate::support::skipped(&what, &why, required);
    None
}

/// The resources `kustomization.yaml` lists.
fn resources() -> Vec<String> {
    let text = std::fs::read_to_string(manifests().join("kustomization.yaml")).unwrap();
    let list = text.split("resources:\n").nth(1).expect("a resources list");
    list.lines().map_while(|line| line.strip_prefix("  - ")).map(str::to_owned).collect()
}

fn validate(validator: &Path, files: &[PathBuf]) -> std::process::Output {
    Command::new(validator)
        .args(["--strict", "--kubernetes-version", "1.32"])
        .args(files)
        .output()
        .unwrap()
}

#[test]
fn every_manifest_is_valid_kubernetes_and_the_kustomization_lists_them_all() {
    let mut listed = resources();
    listed.sort();
    let mut present: Vec<String> = std::fs::read_dir(manifests())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".yaml") && name != "kustomization.yaml")
        .collect();
    present.sort();
    assert_eq!(listed, present, "kustomization.yaml's resources are the manifests here");
    let Some(validator) = validator() else { return };
    let files: Vec<PathBuf> = listed.iter().map(|f| manifests().join(f)).collect();
    let out = validate(&validator, &files);
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    for kind in
        ["deployment", "service", "horizontalpodautoscaler", "poddisruptionbudget", "networkpolicy"]
    {
        assert!(said.contains(&format!("passed for resource {kind}/")), "{kind}: {said}");
    }
    // The validator does refuse: the same Deployment with a misspelt field fails.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("deployment.yaml");
    let text = std::fs::read_to_string(manifests().join("deployment.yaml")).unwrap();
    std::fs::write(&bad, text.replace("readinessProbe:", "readinesProbe:")).unwrap();
    assert!(!validate(&validator, &[bad]).status.success());
}

/// What `deploy/kubernetes/make-secrets && kubectl apply -k deploy/kubernetes` would apply:
/// rendered by kubectl's own kustomize, valid, with the ConfigMap under its fixed name holding
/// `edgegate.toml` as it is, the Secret made of random values that `serve` takes, the image
/// set, and the label on every resource. Without `make-secrets` it does not render at all:
/// the repository holds no token.
#[test]
fn the_kustomization_renders_to_valid_resources() {
    let Some(kubectl) =
        installed("kubectl", "tools/kubectl/bin/kubectl", "EDGEGATE_REQUIRE_KUBECTL")
    else {
        return;
    };
    // A copy of the directory as checked out (no secrets.env: it is never committed).
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(manifests()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "secrets.env" {
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
    }
    let out = Command::new(&kubectl).arg("kustomize").arg(copy.path()).output().unwrap();
    assert!(!out.status.success(), "no token, no rendering");
    assert!(String::from_utf8_lossy(&out.stderr).contains("secrets.env"));
    let made = Command::new(copy.path().join("make-secrets")).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let out = Command::new(&kubectl).arg("kustomize").arg(copy.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rendered = String::from_utf8(out.stdout).unwrap();
    let documents: Vec<&str> = rendered.split("\n---\n").collect();
    // The listed resources (redis.yaml and networkpolicy.yaml hold two each), the generated
    // ConfigMap and Secret.
    assert_eq!(documents.len(), resources().len() + 4, "{rendered}");
    let secrets = std::fs::read_to_string(copy.path().join("secrets.env")).unwrap();
    let value = |name: &str| {
        let line = secrets.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).unwrap();
        line.to_owned()
    };
    let (token, password) = (value("EDGEGATE_ADMIN_TOKEN"), value("REDIS_PASSWORD"));
    assert_eq!((token.len(), password.len()), (64, 64), "{secrets}");
    assert_ne!(token, password);
    // The token `serve` would be given is one it takes.
    let config = copy.path().join("edgegate.toml");
    let toml = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        toml.replace("/var/cache/edgegate", &copy.path().join("cache").display().to_string()),
    )
    .unwrap();
    let checked = Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(["check", "--config"])
        .arg(&config)
        .env("EDGEGATE_ADMIN_TOKEN", &token)
        .env("REDIS_URL", format!("redis://:{password}@edgegate-redis:6379"))
        .output()
        .unwrap();
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    let secret = documents.iter().find(|d| d.contains("kind: Secret")).expect("a Secret");
    assert!(secret.contains("  name: edgegate-secrets-"), "named by its contents: {secret}");
    let named = secret.lines().find_map(|l| l.strip_prefix("  name: ")).unwrap();
    let deployment = documents
        .iter()
        .find(|d| d.contains("kind: Deployment") && d.contains("name: edgegate\n"))
        .unwrap();
    assert!(deployment.contains(&format!("name: {named}")), "the pods use it: {deployment}");
    // The admin port is not on the traffic Service, but on its own behind a NetworkPolicy;
    // Redis wants the password.
    let service = |name: &str| {
        documents
            .iter()
            .find(|d| {
                d.contains("kind: Service\n") && d.lines().any(|l| l == format!("  name: {name}"))
            })
            .unwrap_or_else(|| panic!("no Service {name}: {rendered}"))
    };
    assert!(!service("edgegate").contains("9090"), "{}", service("edgegate"));
    assert!(service("edgegate-admin").contains("port: 9090"));
    let policy = documents
        .iter()
        .find(|d| d.contains("kind: NetworkPolicy") && d.contains("port: admin"))
        .unwrap();
    assert!(
        policy.contains("edgegate.io/admin-client") && policy.contains("monitoring"),
        "{policy}"
    );
    let redis = documents
        .iter()
        .find(|d| d.contains("kind: Deployment") && d.contains("  name: edgegate-redis\n"))
        .unwrap();
    assert!(redis.contains("--requirepass") && redis.contains("$(REDIS_PASSWORD)"), "{redis}");
    assert!(deployment.contains("redis://:$(REDIS_PASSWORD)@edgegate-redis:6379"), "{deployment}");
    for document in &documents {
        assert!(document.contains("app.kubernetes.io/part-of: edgegate"), "{document}");
    }
    assert!(rendered.contains("image: localhost/edgegate:latest\n"), "{rendered}");
    let config = documents.iter().find(|d| d.contains("kind: ConfigMap")).expect("a ConfigMap");
    assert!(config.lines().any(|l| l == "  name: edgegate-config"), "no hash suffix: {config}");
    let toml = std::fs::read_to_string(manifests().join("edgegate.toml")).unwrap();
    let indented: String =
        toml.lines().map(|l| format!("    {l}\n").replace("    \n", "\n")).collect();
    assert!(config.contains(&indented), "edgegate.toml, whole: {config}");
    let Some(validator) = validator() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, &rendered).unwrap();
    let out = validate(&validator, &[file]);
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.contains("passed for resource configmap/"), "{said}");
}

#[test]
fn the_mounted_configuration_passes_check_and_the_timings_agree() {
    let toml = std::fs::read_to_string(manifests().join("edgegate.toml")).unwrap();
    // Checked as mounted, but with its module cache in a scratch directory, not the pod's.
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("edgegate.toml");
    let cache = format!("cache_dir = {:?}", scratch.path().join("cache"));
    std::fs::write(&config, toml.replace("cache_dir = \"/var/cache/edgegate\"", &cache)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(["check", "--config"])
        .arg(&config)
        // The Deployment's REDIS_URL; `check` resolves it and contacts nothing.
        .env("REDIS_URL", "redis://:password@edgegate-redis:6379")
        .env_remove("EDGEGATE_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let deployment = std::fs::read_to_string(manifests().join("deployment.yaml")).unwrap();
    let number = |text: &str, after: &str| -> u64 {
        let rest = text.split(after).nth(1).unwrap_or_else(|| panic!("no {after}"));
        let digits: String = rest.trim_start().chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap_or_else(|_| panic!("{after}: {rest:.20}"))
    };
    let grace = number(&deployment, "terminationGracePeriodSeconds:");
    let pause = number(&deployment, "sleep:\n                seconds:");
    let drain = number(&toml, "shutdown_timeout = \"");
    assert!(grace > pause + drain, "grace {grace} s ≤ preStop {pause} s + drain {drain} s");
    // The container serves the mounted file, watched, on the ports the probes and Service use.
    assert!(
        deployment
            .contains(r#"args: ["serve", "--config", "/etc/edgegate/edgegate.toml", "--watch"]"#)
    );
    assert!(deployment.contains("mountPath: /etc/edgegate\n"));
    assert!(
        toml.contains("listen = \"0.0.0.0:8080\"") && deployment.contains("containerPort: 8080")
    );
    assert!(
        toml.contains("admin = \"0.0.0.0:9090\"") && deployment.contains("containerPort: 9090")
    );
    assert!(
        toml.contains("cache_dir = \"/var/cache/edgegate\"")
            && deployment.contains("mountPath: /var/cache/edgegate")
    );
    // Registry credentials: $DOCKER_CONFIG/config.json, where the pull secret is mounted.
    assert!(
        deployment.contains("name: DOCKER_CONFIG\n              value: /etc/edgegate-registry\n")
            && deployment.contains("mountPath: /etc/edgegate-registry\n")
            && deployment.contains("key: .dockerconfigjson\n                path: config.json\n")
    );
}
