//! The docs name what the repository holds: the README's layout lists every crate, worker and
//! the host's folders, and every repository path a page names exists. (The CLI lists are
//! checked against the binary in `cli.rs`, the file map in `structure.rs`.)

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The folders directly under `dir`, by name.
fn folders(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The first column of the README's layout block.
fn layout_entries(readme: &str) -> Vec<(String, String)> {
    let block = readme.split("## Layout").nth(1).expect("a Layout section");
    let block = block.split("```").nth(1).expect("a code block");
    block
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(path, rest)| (path, rest.trim())))
        .map(|(path, rest)| (path.trim_end_matches('/').to_owned(), rest.to_owned()))
        .collect()
}

#[test]
fn the_readme_layout_lists_every_crate_worker_and_host_folder() {
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let entries = layout_entries(&readme);
    let listed: BTreeSet<&str> = entries.iter().map(|(p, _)| p.as_str()).collect();
    let mut expected = BTreeSet::new();
    for group in ["crates", "workers"] {
        expected.extend(folders(&repo().join(group)).into_iter().map(|f| format!("{group}/{f}")));
    }
    expected.extend(
        ["src", "bench", "tools", "tests/all", "scripts", "fuzz", "docs"].map(String::from),
    );
    let missing: Vec<_> = expected.iter().filter(|p| !listed.contains(p.as_str())).collect();
    assert!(missing.is_empty(), "README.md's layout does not list {missing:?}");
    for path in &listed {
        assert!(repo().join(path).exists(), "README.md's layout lists {path}, which is not there");
    }
    let (_, host) = entries.iter().find(|(p, _)| p == "crates/host").unwrap();
    let named: BTreeSet<String> =
        host.split_whitespace().filter_map(|w| w.strip_suffix('/')).map(str::to_owned).collect();
    let mut actual = folders(&repo().join("crates/host/src"));
    actual.remove("tests");
    assert_eq!(named, actual, "README.md's layout names the host's folders");
}

/// The paths into the repository that a page (`text`, at `page`) names, in backticks outside
/// code blocks or as relative links, and that are not there.
fn missing_paths(page: &Path, text: &str) -> Vec<String> {
    const ROOTS: [&str; 11] = [
        "crates/",
        "src/",
        "bench/",
        "tools/",
        "deploy/",
        "workers/",
        "tests/",
        "scripts/",
        "docs/",
        "fuzz/",
        "testdata/",
    ];
    // What installers put in place, and the `src/lib.rs` of a worker crate of the reader's,
    // which the SDK and toolchain pages name.
    const ELSEWHERE: [&str; 4] =
        ["bench/wasmtime/bin", "tools/node_modules", "bench/node/node_modules", "src/lib.rs"];
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    let mut missing = Vec::new();
    for span in prose.split('`').skip(1).step_by(2) {
        let path = span.split(['#', ':', ' ']).next().unwrap().trim_end_matches(['/', '.', ',']);
        let pattern = path.contains(['*', '…', '<', '{', '$']);
        if ROOTS.iter().any(|r| path.starts_with(r))
            && !pattern
            && !ELSEWHERE.iter().any(|m| path.starts_with(m))
            && !repo().join(path).exists()
        {
            missing.push(span.to_owned());
        }
    }
    for link in prose.split("](").skip(1) {
        let target = link.split([')', ' ']).next().unwrap();
        let file = target.split('#').next().unwrap();
        if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
            continue;
        }
        if !page.parent().unwrap().join(file).exists() {
            missing.push(target.to_owned());
        }
    }
    missing
}

#[test]
fn every_path_the_docs_name_exists() {
    let mut pages =
        vec![repo().join("README.md"), repo().join("CONTRIBUTING.md"), repo().join("CHANGELOG.md")];
    let mut dirs = vec![repo().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    assert!(pages.len() > 20, "{pages:?}");
    let mut found = Vec::new();
    for page in &pages {
        let text = fs::read_to_string(page).unwrap();
        for path in missing_paths(page, &text) {
            found.push(format!("{}: {path}", page.strip_prefix(repo()).unwrap().display()));
        }
    }
    assert!(found.is_empty(), "pages name paths that are not there:\n{}", found.join("\n"));
}

#[test]
fn a_path_that_is_gone_is_found_in_backticks_and_links() {
    let page = repo().join("docs/limits.md");
    let text = "`crates/host/src/gateway.rs` and `crates/host/src/gone.rs:12`, \
                [a page](deploy.md#tenants), [gone](nowhere.md), `crates/*/src` and `a/b.rs`\n\
                ```sh\nls crates/in-a-block\n```\n";
    assert_eq!(missing_paths(&page, text), ["crates/host/src/gone.rs:12", "nowhere.md"]);
}
