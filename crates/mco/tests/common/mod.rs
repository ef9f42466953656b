//! Helpers shared by the CLI tests that run the `mco` binary.

/// Booted machines, for the real tests and the lab (each uses only part of it).
#[cfg(any(feature = "real-components", feature = "lab"))]
#[allow(dead_code)]
pub mod machine;

use assert_cmd::Command;
use assert_cmd::assert::Assert;

pub fn mco() -> Command {
    Command::cargo_bin("mco").unwrap()
}

pub fn stdout(assert: &Assert) -> String {
    String::from_utf8(assert.get_output().stdout.clone()).unwrap()
}

pub fn stderr(assert: &Assert) -> String {
    String::from_utf8(assert.get_output().stderr.clone()).unwrap()
}
