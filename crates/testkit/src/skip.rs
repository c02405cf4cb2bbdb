//! A test that cannot run says so where a person will see it.
//!
//! The harness captures a passing test's output, so a line on stderr alone is lost in a green
//! run. [`skipped`] writes it there and also appends it to the file `EDGEGATE_SKIPPED_LOG`
//! names, which `./scripts/test` empties first and lists at its end. Where the variable
//! `required` names is `1` (as `.ci/run` sets for every part it installs), a skip is a failure.

use std::io::Write;

/// The environment variable naming the file skipped checks are listed in.
pub const LOG: &str = "EDGEGATE_SKIPPED_LOG";

/// Says that `what` was not checked, and why; panics instead where the environment variable
/// `required` is `1`.
pub fn skipped(what: &str, why: &str, required: &str) {
    assert!(!required_by(required), "{what}: {why} ({required}=1 requires it)");
    eprintln!("\n!!! SKIPPED: {what}: {why}\n");
    if let Some(path) = std::env::var_os(LOG) {
        // One write of one line to a file opened for appending: lines from tests running at
        // once, in this process or another, do not mix.
        let line = format!("{what}: {why} (set {required}=1 to require it)\n");
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            eprintln!("!!! and it could not be listed in {}: {e}", path.to_string_lossy());
        }
    }
}

/// Whether the environment variable `name` is `1`: a dependency the tests need must be there
/// (as `.ci/run` sets for each), so its absence fails instead of skipping.
fn required_by(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_listed_in_the_log_and_fails_where_required() {
        // Runs as a child process of its own, so that the variables it sets reach no other test.
        if std::env::var_os("EDGEGATE_TEST_SKIP_CHILD").is_none() {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("skipped.log");
            let run = |required: &str| {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args([
                        "--exact",
                        "skip::tests::a_skip_is_listed_in_the_log_and_fails_where_required",
                    ])
                    .env("EDGEGATE_TEST_SKIP_CHILD", "1")
                    .env(LOG, &log)
                    .env("EDGEGATE_REQUIRE_NOTHING_REAL", required)
                    .output()
                    .unwrap()
            };
            let out = run("0");
            assert!(out.status.success(), "{out:?}");
            let listed = std::fs::read_to_string(&log).unwrap();
            assert_eq!(
                listed,
                "a made-up check: nothing to run it with (set EDGEGATE_REQUIRE_NOTHING_REAL=1 to require it)\n"
                    .repeat(2)
            );
            let out = run("1");
            assert!(!out.status.success(), "required, the skip fails: {out:?}");
            return;
        }
        skipped("a made-up check", "nothing to run it with", "EDGEGATE_REQUIRE_NOTHING_REAL");
        skipped("a made-up check", "nothing to run it with", "EDGEGATE_REQUIRE_NOTHING_REAL");
    }
}
