//! The WASI and wasi:http interfaces edgegate links for components. A leaf: loading checks a
//! component's imports against it, and the load error lists it.

/// The interfaces a component may import, without their versions (any `0.2.x`).
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
];

/// Whether a component may import `name` (`wasi:http/types@0.2.12`, say): an interface
/// edgegate links for components (docs/components.md), at any version.
pub fn provides(name: &str) -> bool {
    let interface = name.split_once('@').map_or(name, |(interface, _)| interface);
    PROVIDED.contains(&interface)
}
