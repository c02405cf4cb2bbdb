//! `edgegate check`, configuration errors, and exit codes.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};

use crate::support::{runtime_section, write_config};

pub fn edgegate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(args)
        .env_remove("EDGEGATE_CONFIG")
        .env("XDG_CACHE_HOME", crate::support::cache_dir().join("xdg"))
        .output()
        .unwrap()
}

/// `edgegate check` of `config` with the shared test cache: exit code, stdout, stderr.
pub fn check(config: &str) -> (Option<i32>, String, String) {
    check_exact(&format!("{}\n{config}", runtime_section()))
}

/// `edgegate check` of `config` as it is.
pub fn check_exact(config: &str) -> (Option<i32>, String, String) {
    let (_dir, path) = write_config(config);
    let out = edgegate(&["check", "--config", path.to_str().unwrap()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn check_accepts_a_good_config() {
    let (code, stdout, stderr) = check(&format!(
        "[workers.echo]\nmodule = \"builtin:echo-json\"\n[workers.h]\nmodule = \"{}\"\n\
         [[routes]]\npath = \"/echo\"\nworker = \"echo\"\n",
        edgegate_guests::HOSTILE
    ));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("edgegate.toml: ok (2 workers, 1 routes)"), "{stdout}");
}

#[test]
fn check_accepts_the_demo() {
    let out = edgegate(&["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Each broken config exits 1 with a message naming the file, the key and the problem.
#[test]
fn config_errors_name_file_key_and_problem() {
    for (config, key, problem) in [
        ("[server]\nbogus = 1\n", "server.bogus", "unknown field"),
        ("[workers.w]\nmodule = \"missing.wasm\"\n", "workers.w.module", "missing.wasm"),
        (
            "[workers.w]\nmodule = \"builtin:echo-json\"\nlimits.cpu = \"2 parsecs\"\n",
            "workers.w.limits.cpu",
            "parsecs",
        ),
        (
            &format!("[workers.w]\nmodule = \"{}\"\n", edgegate_guests::WRONG_ABI),
            "workers.w.module",
            "ABI v2",
        ),
        (
            &format!("[workers.w]\nmodule = \"{}\"\n", edgegate_guests::BIG_MEMORY),
            "workers.w.module",
            "memory",
        ),
        ("[[routes]]\npath = \"/\"\nworker = \"ghost\"\n", "routes[0].worker", "ghost"),
    ] {
        let (code, _, stderr) = check(config);
        assert_eq!(code, Some(1), "{config}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains("edgegate.toml"), "names the file: {first}");
        assert!(first.contains(key), "names the key {key}: {first}");
        assert!(stderr.contains(problem), "says {problem}: {stderr}");
    }
}

/// A configuration error that comes from another error prints that error's causes under it.
#[test]
fn config_errors_print_their_cause_chain() {
    let (code, _, stderr) = check("[workers.w]\nmodule = \"missing.wasm\"\n");
    assert_eq!(code, Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines[0].contains("workers.w.module: cannot read") && lines[0].contains("missing.wasm")
    );
    assert!(lines[1].contains("caused by: No such file or directory"), "{stderr}");
    let (code, _, stderr) =
        check(&format!("[workers.w]\nmodule = \"{}\"\n", edgegate_guests::WRONG_ABI));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.lines().next().unwrap_or_default().contains("cannot load"), "{stderr}");
    assert!(stderr.contains("caused by: built for edgegate ABI v2"), "{stderr}");
}

#[test]
fn serve_refuses_a_broken_config_with_exit_1() {
    let (_dir, path) = write_config("[server]\nlisten = \"nowhere\"\n");
    let out = edgegate(&["serve", "--config", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("server.listen"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(edgegate(&["serve", "--no-such-flag"]).status.code(), Some(2));
    assert_eq!(edgegate(&["frobnicate"]).status.code(), Some(2));
}

/// What one `--help` names.
struct Help {
    /// Long flags, `--help` and `--version` left out.
    flags: BTreeSet<String>,
    /// The values a flag takes, where clap lists them.
    values: BTreeMap<String, BTreeSet<String>>,
    positionals: BTreeSet<String>,
    commands: BTreeSet<String>,
}

fn help_of(args: &[&str]) -> Help {
    let mut args = args.to_vec();
    args.push("--help");
    let out = edgegate(&args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut flags = BTreeSet::new();
    let mut section = "";
    let mut commands = BTreeSet::new();
    let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut flag = String::new();
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let indent = line.len() - line.trim_start().len();
        match (section, words.as_slice()) {
            ("Options:", [first, rest @ ..]) if first.starts_with('-') && indent <= 6 => {
                let long =
                    if first.starts_with("--") { first } else { rest.first().unwrap_or(first) };
                flag = long.trim_end_matches(',').to_owned();
                flags.insert(flag.clone());
            }
            ("Options:", ["-", value, ..]) if value.ends_with(':') => {
                let value = value.trim_end_matches(':').to_owned();
                values.entry(flag.clone()).or_default().insert(value);
            }
            ("Commands:", [name, ..]) if indent == 2 => {
                commands.insert((*name).to_owned());
            }
            _ => {}
        }
    }
    flags.retain(|f| !matches!(f.as_str(), "--help" | "--version"));
    commands.remove("help");
    let usage = text.lines().find(|l| l.starts_with("Usage:")).unwrap();
    let positionals = usage
        .split_whitespace()
        .filter(|w| w.contains('<') && !w.contains("OPTIONS") && !w.contains("COMMAND"))
        .map(|w| w.trim_matches(|c| "[]<>.".contains(c)).to_owned())
        .collect();
    Help { flags, values, positionals, commands }
}

#[test]
fn the_documented_command_line_is_the_one_clap_parses() {
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md"))
            .unwrap();
    let block = docs.split("## The command line").nth(1).unwrap();
    let block = block.split("```text\n").nth(1).unwrap().split("```").next().unwrap();
    let benchmarks =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/benchmarks.md"))
            .unwrap();
    let top = help_of(&[]);
    let global = top.flags;
    let mut documented = BTreeSet::new();
    for line in block.lines() {
        let line = line.split('#').next().unwrap();
        let words: Vec<&str> = line.split_whitespace().skip(1).collect();
        let command = words
            .iter()
            .find(|w| w.chars().all(|c| c.is_ascii_lowercase()))
            .unwrap_or_else(|| panic!("no subcommand in `{line}`"));
        documented.insert((*command).to_owned());
        let flags: BTreeSet<String> = words
            .iter()
            .filter_map(|w| w.trim_start_matches(['[', '|']).split(['|', ']']).next())
            .filter(|w| w.starts_with("--"))
            .map(str::to_owned)
            .collect();
        let help = help_of(&[command]);
        let clap = help.flags;
        for (i, word) in words.iter().enumerate() {
            let flag = word.trim_start_matches('[');
            let values = help.values.get(flag).or_else(|| top.values.get(flag));
            if let (Some(values), Some(written)) = (values, words.get(i + 1)) {
                let written: BTreeSet<String> =
                    written.trim_end_matches(']').split('|').map(str::to_owned).collect();
                assert_eq!(&written, values, "`{command}`: the values of {flag}");
            }
        }
        let unknown: Vec<_> = flags.difference(&clap).collect();
        assert!(
            unknown.is_empty(),
            "`{command}`: documented flags clap does not know: {unknown:?}"
        );
        let undocumented: Vec<_> =
            clap.difference(&flags).filter(|f| !global.contains(*f)).collect();
        if *command == "bench" {
            // The rest of the lab's flags are listed in benchmarks.md.
            let missing: Vec<_> =
                undocumented.iter().filter(|f| !benchmarks.contains(&format!("`{f}"))).collect();
            assert!(
                missing.is_empty(),
                "bench flags in neither synopsis nor benchmarks.md: {missing:?}"
            );
        } else {
            assert!(
                undocumented.is_empty(),
                "`{command}`: flags the synopsis lacks: {undocumented:?}"
            );
        }
        for name in help.positionals.iter().chain(&help.commands) {
            assert!(
                words.iter().any(|w| w.split(['[', ']', '|']).any(|p| p == name)),
                "`{command}`: `{name}` is not in `{line}`"
            );
        }
    }
    assert_eq!(documented, top.commands, "the synopsis names every subcommand");
    for flag in &global {
        assert!(block.contains(flag.as_str()), "the global flag {flag} is documented");
    }
}

/// The words in `text` between `start` and the next `end`, each a subcommand name: backticks,
/// commas and "and" left out.
fn listed_commands(text: &str, start: &str, end: &str) -> BTreeSet<String> {
    let after = text.split(start).nth(1).unwrap_or_else(|| panic!("no `{start}`"));
    let list = after.split(end).next().unwrap();
    list.split([',', ' ', '\n', '`'])
        .filter(|w| !w.is_empty() && *w != "and")
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_readme_and_the_architecture_list_the_binary_s_commands() {
    let read = |page: &str| {
        std::fs::read_to_string(format!("{}/{page}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    let commands = help_of(&[]).commands;
    assert!(commands.contains("push") && commands.len() > 6, "{commands:?}");
    let readme = listed_commands(&read("README.md"), "edgegate          the CLI: ", "\n");
    assert_eq!(readme, commands, "README.md's layout lists the CLI");
    let architecture = listed_commands(
        &read("docs/architecture.md"),
        "one file per subcommand in\n  `src/commands/`: ",
        " (and the",
    );
    assert_eq!(architecture, commands, "docs/architecture.md lists the CLI");
}

#[test]
fn a_command_list_is_read_as_its_names() {
    let text = "the CLI: serve, check, `new` and push\nnext";
    let listed = listed_commands(text, "the CLI: ", "\n");
    assert_eq!(listed, ["check", "new", "push", "serve"].map(str::to_owned).into());
}
