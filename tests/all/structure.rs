//! The module import graph inside every crate of the workspace has no circles.
//!
//! Each crate root (`src/lib.rs`, `src/main.rs`, `tests/*/main.rs`, `benches/*.rs` …) is
//! followed through its `mod x;` declarations. A module imports what it names through
//! `crate::`, `super::`, `self::` or a child's name, in `use` trees and in code. A name that a
//! module brings in with a `use` (a `pub use` re-export, most often) is followed to the module
//! it comes from, so `crate::Gateway` imports `gateway`, not the root. Its own ancestors do not
//! count (a child naming its parent's items is how Rust nests), and an inline module
//! (`mod tests { … }`) counts as its file's.

mod tokens;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use tokens::{Binding, Tok, lex, use_bindings};

/// A module's path inside its crate: `[]` is the root.
type Module = Vec<String>;

/// One crate's modules (each with its file) and, for each, the modules it imports with the
/// paths that name them.
#[derive(Debug, Default)]
struct Graph {
    files: BTreeMap<Module, PathBuf>,
    imports: BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>,
    /// The names each file module's own `use` items bind, with the path each was written as.
    bindings: BTreeMap<(Module, String), Vec<String>>,
    /// What each module imports from its ancestors (which circles leave out), with the paths.
    upward: BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>,
}

/// How many `use` bindings one path is followed through: re-exports of re-exports end long
/// before, and a `use` that names itself cannot loop.
const MAX_HOPS: usize = 8;

impl Graph {
    /// The crate whose root file is `root`.
    fn of_crate(root: &Path) -> Graph {
        let mut graph = Graph::default();
        let mut sources = BTreeMap::new();
        let mut pending = vec![(Module::new(), root.to_path_buf(), true)];
        while let Some((module, file, is_root)) = pending.pop() {
            let src =
                fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let toks = lex(&src);
            let dir = if is_root || file.ends_with("mod.rs") {
                file.parent().expect("a file has a folder").to_path_buf()
            } else {
                file.with_extension("")
            };
            for declared in declared_modules(&toks) {
                let mut child = module.clone();
                child.extend(declared.iter().cloned());
                let base = dir.join(declared.join("/"));
                let flat = base.with_extension("rs");
                let file = if flat.exists() { flat } else { base.join("mod.rs") };
                assert!(
                    file.exists(),
                    "{}: `mod {}` has no file",
                    dir.display(),
                    declared.join("::")
                );
                pending.push((child, file, false));
            }
            graph.files.insert(module.clone(), file);
            sources.insert(module, toks);
        }
        for (module, toks) in &sources {
            for (path, name) in module_uses(toks) {
                if let Some(name) = name {
                    graph.bindings.insert((module.clone(), name), path);
                }
            }
        }
        for (module, toks) in &sources {
            for (inline, path) in named_paths(toks) {
                let mut here = module.clone();
                here.extend(inline);
                if let Some(target) = graph.resolve(&here, &path)
                    && &target != module
                {
                    let edges = if module.starts_with(&target) {
                        &mut graph.upward
                    } else {
                        &mut graph.imports
                    };
                    let paths = edges.entry(module.clone()).or_default();
                    paths.entry(target).or_default().insert(path.join("::"));
                }
            }
        }
        graph
    }

    /// The file module `path`, written in module `here` (inline modules included), names, its
    /// `use` bindings followed.
    fn resolve(&self, here: &[String], path: &[String]) -> Option<Module> {
        self.resolve_through(here, path, 0)
    }

    fn resolve_through(&self, here: &[String], path: &[String], hops: usize) -> Option<Module> {
        let (mut full, rest): (Module, &[String]) = match path.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &path[1..]),
            Some("self") => (here.to_vec(), &path[1..]),
            Some("super") => {
                let supers = path.iter().take_while(|s| *s == "super").count();
                (here[..here.len().checked_sub(supers)?].to_vec(), &path[supers..])
            }
            Some(child) => {
                let mut module = self.file_of(here);
                module.push(child.to_owned());
                if !self.files.contains_key(&module) {
                    return None;
                }
                (here.to_vec(), path)
            }
            None => return None,
        };
        full.extend(rest.iter().cloned());
        let module = self.file_of(&full);
        if let Some(name) = full.get(module.len())
            && let Some(through) = self.bindings.get(&(module.clone(), name.clone()))
            && hops < MAX_HOPS
        {
            let mut path = through.clone();
            path.extend(full[module.len() + 1..].iter().cloned());
            if let Some(origin) = self.resolve_through(&module, &path, hops + 1) {
                return Some(origin);
            }
        }
        Some(module)
    }

    /// The longest prefix of `module` that is a file module.
    fn file_of(&self, module: &[String]) -> Module {
        (0..=module.len())
            .rev()
            .map(|n| module[..n].to_vec())
            .find(|m| self.files.contains_key(m))
            .expect("the root is a file module")
    }

    /// Every circle: the strongly connected components of more than one module (Tarjan).
    fn circles(&self) -> Vec<Vec<Module>> {
        struct Walk<'g> {
            graph: &'g Graph,
            index: BTreeMap<&'g Module, usize>,
            low: BTreeMap<&'g Module, usize>,
            stack: Vec<&'g Module>,
            circles: Vec<Vec<Module>>,
        }
        impl<'g> Walk<'g> {
            fn visit(&mut self, v: &'g Module) {
                let n = self.index.len();
                self.index.insert(v, n);
                self.low.insert(v, n);
                self.stack.push(v);
                for w in self.graph.imports.get(v).into_iter().flat_map(|m| m.keys()) {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.stack.contains(&w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let at = self.stack.iter().rposition(|m| *m == v).expect("on the stack");
                    let mut members: Vec<Module> = self.stack.drain(at..).cloned().collect();
                    members.sort();
                    if members.len() > 1 {
                        self.circles.push(members);
                    }
                }
            }
        }
        let mut walk = Walk {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            circles: Vec::new(),
        };
        for module in self.files.keys() {
            if !walk.index.contains_key(module) {
                walk.visit(module);
            }
        }
        walk.circles
    }

    /// A circle, each of its imports with the paths that made it.
    fn describe(&self, circle: &[Module]) -> String {
        let name = |m: &Module| if m.is_empty() { "crate".to_owned() } else { m.join("::") };
        let mut out = circle.iter().map(name).collect::<Vec<_>>().join(" <-> ");
        for from in circle {
            for (to, paths) in self.imports.get(from).into_iter().flatten() {
                if circle.contains(to) {
                    let paths: Vec<_> = paths.iter().map(String::as_str).collect();
                    out += &format!("\n    {} -> {}: {}", name(from), name(to), paths.join(", "));
                }
            }
        }
        out
    }
}

/// The file modules a source declares (`mod x;`), with the inline modules around them.
fn declared_modules(toks: &[Tok]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    walk_modules(toks, |inline, i| {
        if let [Tok::Ident(kw), Tok::Ident(name), Tok::Semi, ..] = &toks[i..]
            && kw == "mod"
        {
            let mut path = inline.to_vec();
            path.push(name.clone());
            out.push(path);
        }
    });
    out
}

/// The `use` item whose keyword is at `i`: what it binds, and the index of its `;`.
fn use_item(toks: &[Tok], i: usize) -> (Vec<Binding>, usize) {
    let end = toks[i..].iter().position(|t| *t == Tok::Semi).map_or(toks.len(), |n| i + n);
    (use_bindings(&toks[i + 1..end]), end)
}

/// The `use` items of a file module itself (not of its inline modules or function bodies): each
/// path with the name it binds.
fn module_uses(toks: &[Tok]) -> Vec<Binding> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Open => depth += 1,
            Tok::Close => depth = depth.saturating_sub(1),
            Tok::Ident(kw) if kw == "use" && depth == 0 => {
                let (bindings, end) = use_item(toks, i);
                out.extend(bindings);
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Every module path a source names, with the inline modules it is written in.
fn named_paths(toks: &[Tok]) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut skip_to = 0;
    walk_modules(toks, |inline, i| {
        if i < skip_to {
            return;
        }
        match &toks[i] {
            Tok::Ident(kw) if kw == "use" => {
                let (bindings, end) = use_item(toks, i);
                for (path, _) in bindings {
                    out.push((inline.to_vec(), path));
                }
                skip_to = end;
            }
            Tok::Ident(start) if matches!(start.as_str(), "crate" | "super" | "self") => {
                let mut path = vec![start.clone()];
                let mut j = i + 1;
                while let [Tok::Sep, Tok::Ident(seg), ..] = &toks[j..] {
                    path.push(seg.clone());
                    j += 2;
                }
                if path.len() > 1 {
                    out.push((inline.to_vec(), path));
                }
                skip_to = j;
            }
            _ => {}
        }
    });
    out
}

/// Calls `f(inline modules, i)` for every token, tracking `mod name { … }` blocks.
fn walk_modules(toks: &[Tok], mut f: impl FnMut(&[String], usize)) {
    let mut depth = 0usize;
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for i in 0..toks.len() {
        f(&names, i);
        match &toks[i] {
            Tok::Open => {
                depth += 1;
                if let (Some(Tok::Ident(kw)), Some(Tok::Ident(name))) =
                    (i.checked_sub(2).map(|j| &toks[j]), i.checked_sub(1).map(|j| &toks[j]))
                    && kw == "mod"
                {
                    inline.push((name.clone(), depth));
                    names.push(name.clone());
                }
            }
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                    names.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
    }
}

/// The root file of every crate in the repository: each package's library, binaries, tests,
/// benches and examples.
fn crate_roots(repo: &Path) -> Vec<PathBuf> {
    let mut packages = Vec::new();
    let mut dirs = vec![repo.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        if dir.join("Cargo.toml").exists() {
            packages.push(dir.clone());
        }
        for entry in fs::read_dir(&dir).expect("a readable folder").flatten() {
            let name = entry.file_name();
            let skip = ["target", "node_modules", ".git"].iter().any(|s| name == *s);
            if entry.file_type().is_ok_and(|t| t.is_dir()) && !skip {
                dirs.push(entry.path());
            }
        }
    }
    let mut roots = Vec::new();
    for package in packages {
        for file in ["src/lib.rs", "src/main.rs"] {
            roots.push(package.join(file));
        }
        for dir in ["src/bin", "tests", "benches", "examples"] {
            for entry in fs::read_dir(package.join(dir)).into_iter().flatten().flatten() {
                let path = entry.path();
                roots.push(if path.is_dir() { path.join("main.rs") } else { path });
            }
        }
    }
    roots.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"));
    roots.sort();
    roots
}

#[test]
fn no_crate_imports_its_own_modules_in_a_circle() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let roots = crate_roots(repo);
    assert!(roots.len() > 20, "every package's crates: {roots:?}");
    let mut found = Vec::new();
    let mut modules = 0;
    for root in &roots {
        let graph = Graph::of_crate(root);
        modules += graph.files.len();
        for circle in graph.circles() {
            found.push(format!("{}: {}", root.display(), graph.describe(&circle)));
        }
    }
    assert!(modules > 200, "{modules} modules in {} crates", roots.len());
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// Writes `src` to `path` under `dir`, making its folders.
fn write_file(dir: &Path, path: &str, src: &str) {
    let path = dir.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, src).unwrap();
}

/// Imports that run back up: to an ancestor other than the module's own folder (its parent),
/// or to the crate root. Tests are left out.
fn imports_from_above(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for (module, targets) in &graph.upward {
        if module.first().is_some_and(|m| m == "tests") {
            continue;
        }
        for (target, paths) in targets {
            let parent = &module[..module.len() - 1];
            if target.is_empty() || target.as_slice() != parent {
                let paths: Vec<_> = paths.iter().map(String::as_str).collect();
                found.push(format!(
                    "{} -> crate::{}: {}",
                    module.join("::"),
                    target.join("::"),
                    paths.join(", ")
                ));
            }
        }
    }
    found
}

#[test]
fn the_runtime_imports_nothing_from_above() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/runtime/src/lib.rs");
    let found = imports_from_above(&Graph::of_crate(&root));
    assert!(found.is_empty(), "imports running back up in the runtime:\n{}", found.join("\n"));
    let top: BTreeSet<String> = fs::read_dir(root.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .collect();
    assert!(top.len() <= 12, "the runtime's top level holds {} files: {top:?}", top.len());
}

#[test]
fn an_import_from_the_root_or_a_grandparent_is_found_and_one_from_the_parent_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, src: &str| write_file(dir.path(), path, src);
    write("lib.rs", "mod a;\npub const TOP: u8 = 1;\n");
    write("a.rs", "mod b;\npub struct A;\n");
    write("a/b.rs", "mod c;\nuse super::A;\n");
    write("a/b/c.rs", "fn f() -> u8 { let _ = crate::a::A; crate::TOP }\n");
    let found = imports_from_above(&Graph::of_crate(&dir.path().join("lib.rs")));
    assert_eq!(found, ["a::b::c -> crate::: crate::TOP", "a::b::c -> crate::a: crate::a::A"]);
}

#[test]
fn a_circle_between_siblings_is_found_and_nothing_else_is() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, src: &str| write_file(dir.path(), path, src);
    write("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\npub use a::A;\n");
    write("a.rs", "mod inner;\nuse crate::b::{self, B};\npub struct A;\n");
    write("a/inner.rs", "use super::super::d::D;\nuse super::A;\n");
    write("b.rs", "pub struct B;\nfn f() -> crate::a::A { super::a::A }\n");
    write(
        "c.rs",
        r##"fn g<'x>(s: &'x str) -> char { let _ = "use crate::d;"; let _ = r#"crate::d"#; '{' }
           // crate::d::D
           /* super::d */
           mod tests { use super::*; use crate::b::B; }"##,
    );
    write("d.rs", "pub struct D;\n");
    let graph = Graph::of_crate(&dir.path().join("lib.rs"));
    let m =
        |s: &str| s.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect::<Module>();
    let targets =
        |from: &str| graph.imports.get(&m(from)).map(|t| t.keys().cloned().collect::<Vec<_>>());
    assert_eq!(targets(""), Some(vec![m("a")]));
    assert_eq!(targets("a"), Some(vec![m("b")]));
    assert_eq!(targets("a::inner"), Some(vec![m("d")]), "its parent a does not count");
    assert_eq!(targets("b"), Some(vec![m("a")]));
    assert_eq!(targets("c"), Some(vec![m("b")]), "strings, comments and chars name nothing");
    assert_eq!(targets("d"), None);
    let circles = graph.circles();
    assert_eq!(circles, [vec![m("a"), m("b")]], "{}", graph.describe(&circles[0]));
}

#[test]
fn a_circle_through_a_re_export_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, src: &str| write_file(dir.path(), path, src);
    // `crate::F` is `f::F`, and `crate::G` is `g::Inner` renamed, re-exported by `f` in turn.
    write("lib.rs", "mod e;\nmod f;\nmod g;\npub use f::{F, G as H};\n");
    write("e.rs", "use crate::F;\npub struct E;\nfn h() -> crate::H::Item { todo!() }\n");
    write("f.rs", "pub use crate::g::Inner as G;\npub struct F(crate::e::E);\n");
    write("g.rs", "pub struct Inner;\nfn f() { use crate::e::E; }\n");
    let graph = Graph::of_crate(&dir.path().join("lib.rs"));
    let m = |s: &str| vec![s.to_owned()];
    let targets =
        |from: &str| graph.imports.get(&m(from)).map(|t| t.keys().cloned().collect::<Vec<_>>());
    assert_eq!(targets("e"), Some(vec![m("f"), m("g")]), "through the root, and through f");
    assert_eq!(targets("g"), Some(vec![m("e")]), "a use in a function body binds nothing");
    let circles = graph.circles();
    assert_eq!(circles, [vec![m("e"), m("f"), m("g")]], "{}", graph.describe(&circles[0]));
}

/// The files of `dir` the map names, relative to it: tests, hidden files and what installers
/// and runs leave there (`node_modules`, a venv, downloaded binaries, generated secrets) left out.
fn mapped_files(dir: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(here) = dirs.pop() {
        for entry in fs::read_dir(&here).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let left_out =
                ["node_modules", "venv", "bin", "secrets.env", "__pycache__", "tests", "tests.rs"];
            if name.starts_with('.') || left_out.contains(&name.as_str()) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.insert(relative);
            }
        }
    }
    files
}

/// What each `## … \`folder\`` section of `docs/map.md` names: the backticked names before
/// each list item's first colon.
fn map_sections(map: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut named: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut section = None;
    for line in map.lines() {
        if line.starts_with("## ") {
            section = line.split('`').nth(1).map(str::to_owned);
            if let Some(folder) = &section {
                named.entry(folder.clone()).or_default();
            }
            continue;
        }
        let (Some(folder), Some(item)) = (&section, line.trim_start().strip_prefix("- ")) else {
            continue;
        };
        let names = item.find("`:").map_or(item, |end| &item[..=end]);
        let spans = names.split('`').skip(1).step_by(2);
        named.entry(folder.clone()).or_default().extend(spans.map(str::to_owned));
    }
    named
}

#[test]
fn the_map_names_every_file_and_only_those() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let named = map_sections(&fs::read_to_string(repo.join("docs/map.md")).unwrap());
    let mut expected: BTreeSet<String> =
        ["src", "bench", "tools", "deploy"].map(str::to_owned).into();
    for entry in fs::read_dir(repo.join("crates")).unwrap().flatten() {
        expected.insert(format!("crates/{}/src", entry.file_name().to_string_lossy()));
    }
    let sections: BTreeSet<String> = named.keys().cloned().collect();
    assert_eq!(sections, expected, "docs/map.md's sections, against the folders it must map");
    for (folder, named) in &named {
        let files = mapped_files(&repo.join(folder));
        let missing: Vec<_> = files.difference(named).collect();
        let stale: Vec<_> = named.difference(&files).collect();
        assert!(
            missing.is_empty(),
            "docs/map.md does not name these files of {folder}: {missing:?}"
        );
        assert!(stale.is_empty(), "docs/map.md names files {folder} does not have: {stale:?}");
    }
}

#[test]
fn a_file_the_map_leaves_out_or_names_wrongly_is_found() {
    let map = "## The x: `x`\n\n- `a.rs`: `not-a-file` after the colon.\n  - `b/c.rs`, `d`.\n";
    let named = &map_sections(map)["x"];
    let names: Vec<&str> = named.iter().map(String::as_str).collect();
    assert_eq!(names, ["a.rs", "b/c.rs", "d"]);
    let dir = tempfile::tempdir().unwrap();
    for file in ["a.rs", "b/c.rs", "b/tests.rs", "e", ".hidden", "node_modules/f"] {
        write_file(dir.path(), file, "");
    }
    let files = mapped_files(dir.path());
    assert_eq!(files.difference(named).collect::<Vec<_>>(), ["e"], "e is not named");
    assert_eq!(named.difference(&files).collect::<Vec<_>>(), ["d"], "d does not exist");
}
