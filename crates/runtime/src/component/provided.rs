//! The WASI and wasi:http interfaces edgegate links for components. A leaf: loading checks a
//! component's imports against it, and the load error lists it.

/// The interfaces a component may import, without their versions: any `0.2.x` of WASI's
/// own, and the one draft of `wasi:keyvalue` (`0.2.0-draft`) and of `wasi:config`
/// (`0.2.0-rc.1`) that Wasmtime 48 implements (another fails to link, naming it).
pub(crate) const PROVIDED: &[&str] = &[
    "wasi:http/types",
    "wasi:http/outgoing-handler",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:keyvalue/store",
    "wasi:keyvalue/atomics",
    "wasi:keyvalue/batch",
    "wasi:config/store",
];

/// Whether a component may import `name` (`wasi:http/types@0.2.12`, say): an interface
/// edgegate links for components (docs/components.md), at any version.
pub fn provides(name: &str) -> bool {
    let interface = name.split_once('@').map_or(name, |(interface, _)| interface);
    PROVIDED.contains(&interface)
}
