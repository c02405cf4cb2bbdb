//! What a built module holds, for `edgegate build`'s report: its ABI, size, exports, imports
//! (and whether this host provides them), memory, data and largest functions. A component is
//! reported by its own imports and exports and its core module's memory, data and code.

use std::fmt;

use anyhow::Context;
use edgegate_abi::{ABI_VERSION, imports};
use wasmparser::{ExternalKind, KnownCustom, Name, Parser, Payload, TypeRef};

/// One WebAssembly page.
const PAGE: u64 = 64 << 10;

/// How many of the largest functions the report lists.
const LARGEST: usize = 8;

/// A module, read section by section.
#[derive(Debug, Default)]
pub struct ModuleReport {
    /// Its bytes.
    pub size: u64,
    /// `(name, kind)` of each export.
    pub exports: Vec<(String, &'static str)>,
    /// `(module, name)` of each import.
    pub imports: Vec<(String, String)>,
    /// The ABI version its exports claim (`None`: no edgegate entry point).
    pub abi_version: Option<u32>,
    /// A `wasi:http` component: `imports` and `exports` are the component's interfaces.
    pub component: bool,
    /// Initial and maximum pages of its memory.
    pub memory: Option<(u64, Option<u64>)>,
    /// Bytes of its data segments.
    pub data_bytes: u64,
    /// `(name, body bytes)` of its largest functions, largest first.
    pub largest: Vec<(String, u64)>,
}

impl ModuleReport {
    /// Reads `wasm`.
    pub fn read(wasm: &[u8]) -> anyhow::Result<Self> {
        let mut report = Self { size: wasm.len() as u64, ..Self::default() };
        let mut imported_functions = 0u32;
        let mut bodies: Vec<(u32, u64)> = Vec::new();
        let mut names: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
        for payload in Parser::new(0).parse_all(wasm) {
            match payload.context("not a WebAssembly module")? {
                Payload::ImportSection(section) => {
                    for import in section.into_imports() {
                        let import = import?;
                        if matches!(import.ty, TypeRef::Func(_) | TypeRef::FuncExact(_)) {
                            imported_functions += 1;
                        }
                        report.imports.push((import.module.into(), import.name.into()));
                    }
                }
                Payload::ExportSection(section) => {
                    for export in section {
                        let export = export?;
                        report.exports.push((export.name.into(), kind_name(export.kind)));
                        if let Some(v) = edgegate_abi::abi_version_of_export(export.name) {
                            report.abi_version = Some(v);
                        }
                    }
                }
                Payload::MemorySection(section) => {
                    if let Some(memory) = section.into_iter().next() {
                        let memory = memory?;
                        report.memory = Some((memory.initial, memory.maximum));
                    }
                }
                Payload::DataSection(section) => {
                    for data in section {
                        report.data_bytes += data?.data.len() as u64;
                    }
                }
                Payload::CodeSectionEntry(body) => {
                    let index = imported_functions + bodies.len() as u32;
                    bodies.push((index, body.range().len() as u64));
                }
                Payload::CustomSection(section) => {
                    if let KnownCustom::Name(reader) = section.as_known() {
                        for name in reader.into_iter().flatten() {
                            if let Name::Function(map) = name {
                                for naming in map.into_iter().flatten() {
                                    names.insert(naming.index, naming.name.into());
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        bodies.sort_by_key(|b| std::cmp::Reverse(b.1));
        report.largest = bodies
            .into_iter()
            .take(LARGEST)
            .map(|(index, len)| {
                let name = names.remove(&index).map_or_else(
                    || format!("function #{index}"),
                    // `{:#}`: without the symbol's hash.
                    |name| format!("{:#}", rustc_demangle::demangle(&name)),
                );
                (name, len)
            })
            .collect();
        Ok(report)
    }

    /// The report of `component`, a component wrapping the core module `core` reports on:
    /// its size, imports and exports, and the module's memory, data and code.
    pub fn of_component(component: &[u8], core: Self) -> anyhow::Result<Self> {
        let mut report = Self {
            size: component.len() as u64,
            component: true,
            abi_version: None,
            imports: Vec::new(),
            exports: Vec::new(),
            ..core
        };
        // The component's own sections only, not those of the modules nested in it.
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(component) {
            match payload.context("not a WebAssembly component")? {
                Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
                Payload::End(_) => depth = depth.saturating_sub(1),
                Payload::ComponentImportSection(section) if depth == 0 => {
                    for import in section {
                        report.imports.push((String::new(), import?.name.name.to_owned()));
                    }
                }
                Payload::ComponentExportSection(section) if depth == 0 => {
                    for export in section {
                        report.exports.push((export?.name.name.to_owned(), "interface"));
                    }
                }
                _ => {}
            }
        }
        Ok(report)
    }

    /// Whether `wasm` (a core module) embeds a component type: the bindings of `wit-bindgen`
    /// (the `wasip2` crate, say) put one in, for `wit-component` to make a component of it.
    pub fn has_component_type(wasm: &[u8]) -> bool {
        Parser::new(0).parse_all(wasm).flatten().any(|payload| {
            matches!(payload, Payload::CustomSection(s) if s.name().starts_with("component-type"))
        })
    }

    /// Imports this host does not provide: any from another module, or a name ABI v1 lacks;
    /// for a component, an interface outside what edgegate links.
    pub fn unknown_imports(&self) -> Vec<String> {
        if self.component {
            return self
                .imports
                .iter()
                .map(|(_, name)| name)
                .filter(|name| !edgegate_runtime::component_provides(name))
                .cloned()
                .collect();
        }
        self.imports
            .iter()
            .filter(|(module, name)| !imports::provided(module, name))
            .map(|(module, name)| format!("{module}::{name}"))
            .collect()
    }
}

fn kind_name(kind: ExternalKind) -> &'static str {
    match kind {
        ExternalKind::Func | ExternalKind::FuncExact => "function",
        ExternalKind::Memory => "memory",
        ExternalKind::Table => "table",
        ExternalKind::Global => "global",
        ExternalKind::Tag => "tag",
    }
}

/// `bytes` in KB (1000 bytes, as module budgets are written) with the exact count.
pub fn kb(bytes: u64) -> String {
    format!("{:.1} KB ({bytes} bytes)", bytes as f64 / 1000.0)
}

impl fmt::Display for ModuleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let abi = match self.abi_version {
            _ if self.component => "wasi:http/proxy component".to_owned(),
            Some(v) if v == ABI_VERSION => format!("v{v} (this host speaks v{ABI_VERSION})"),
            Some(v) => format!("v{v}: **this host speaks v{ABI_VERSION} only**"),
            None => format!("none: no `{}` export", edgegate_abi::EXPORT_HANDLE),
        };
        writeln!(f, "  ABI:       {abi}")?;
        let exports: Vec<String> =
            self.exports.iter().map(|(name, kind)| format!("{name} ({kind})")).collect();
        writeln!(f, "  exports:   {}", exports.join(", "))?;
        let unknown = self.unknown_imports();
        let status = if unknown.is_empty() && self.component {
            "all provided by this host: see docs/components.md".to_owned()
        } else if unknown.is_empty() {
            format!("all provided by this host (ABI v{ABI_VERSION})")
        } else {
            format!("NOT provided by this host: {}", unknown.join(", "))
        };
        let names: Vec<&str> = self.imports.iter().map(|(_, name)| name.as_str()).collect();
        writeln!(f, "  imports:   {} ({status})", names.join(", "))?;
        match self.memory {
            Some((initial, maximum)) => writeln!(
                f,
                "  memory:    {initial} pages initial ({} KiB), maximum {}",
                initial * PAGE / 1024,
                maximum
                    .map_or("none (the worker's limit caps it)".into(), |m| format!("{m} pages"))
            )?,
            None => writeln!(f, "  memory:    none")?,
        }
        writeln!(f, "  data:      {}", kb(self.data_bytes))?;
        writeln!(f, "  largest functions (body bytes):")?;
        for (name, len) in &self.largest {
            let name: String = name.chars().take(90).collect();
            writeln!(f, "    {len:>7}  {name}")?;
        }
        Ok(())
    }
}
