# The workerd comparator's configuration. `edgegate bench` copies this file, the modules it
# embeds and a generated profiles.json and catalog.ndjson into one directory, and starts
#   workerd serve workerd.capnp --socket-addr http=127.0.0.1:PORT
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [(name = "main", worker = .bench)],
  sockets = [(name = "http", address = "127.0.0.1:8787", http = (), service = "main")],
);

const bench :Workerd.Worker = (
  modules = [
    (name = "worker.mjs", esModule = embed "worker.mjs"),
    (name = "workloads.mjs", esModule = embed "workloads.mjs"),
    (name = "resize-js.mjs", esModule = embed "resize-js.mjs"),
    (name = "jpeg-decoder.js", commonJsModule = embed "jpeg-decoder.js"),
    (name = "jpeg-encoder.js", commonJsModule = embed "jpeg-encoder.js"),
    (name = "profiles.json", json = embed "profiles.json"),
    (name = "catalog.ndjson", text = embed "catalog.ndjson"),
  ],
  bindings = [(name = "SECRET", fromEnvironment = "EDGEGATE_BENCH_SECRET")],
  compatibilityDate = "2026-11-01",
  compatibilityFlags = ["nodejs_compat"],
);
