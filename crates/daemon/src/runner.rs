//! Every external command (systemctl, rpm-ostree, bootc, rpm) goes through one trait, so command
//! lines are built by pure functions that tests compare with upstream's exact invocations, and
//! failures read the same everywhere: the command line, the exit status and stderr.

use std::fmt;
use std::process::Command;

/// A command line: the program and its arguments, exactly as they will be executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    pub program: String,
    pub args: Vec<String>,
}

impl Cmd {
    pub fn new<I, S>(program: &str, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cmd { program: program.to_string(), args: args.into_iter().map(Into::into).collect() }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.program)?;
        for a in &self.args {
            if a.is_empty() || a.contains(char::is_whitespace) {
                write!(f, " {a:?}")?;
            } else {
                write!(f, " {a}")?;
            }
        }
        Ok(())
    }
}

/// A command that ran and failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("running {cmd}: {source}")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("{cmd} failed ({status}): {stderr}")]
    Failed { cmd: String, status: String, stderr: String },
}

/// What a command printed and whether it succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub success: bool,
    pub status: String,
    pub stdout: String,
    pub stderr: String,
}

/// Runs commands. [`HostRunner`] executes them on this machine.
pub trait Runner: Send + Sync {
    /// Runs `cmd` whatever its exit status; only failing to start it is an error.
    fn output(&self, cmd: &Cmd) -> Result<Output, CommandError>;

    /// Runs `cmd` and returns its stdout; a non-zero exit is an error carrying stderr.
    fn run(&self, cmd: &Cmd) -> Result<String, CommandError> {
        let out = self.output(cmd)?;
        if !out.success {
            return Err(CommandError::Failed {
                cmd: cmd.to_string(),
                status: out.status,
                stderr: out.stderr.trim().into(),
            });
        }
        Ok(out.stdout)
    }
}

/// Executes commands on this machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostRunner;

impl Runner for HostRunner {
    fn output(&self, cmd: &Cmd) -> Result<Output, CommandError> {
        tracing::debug!(%cmd, "running");
        let out = Command::new(&cmd.program)
            .args(&cmd.args)
            .output()
            .map_err(|source| CommandError::Spawn { cmd: cmd.to_string(), source })?;
        Ok(Output {
            success: out.status.success(),
            status: out.status.to_string(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_the_command_status_and_stderr() {
        let err = HostRunner.run(&Cmd::new("sh", ["-c", "echo oops >&2; exit 3"])).unwrap_err();
        assert_eq!(err.to_string(), "sh -c \"echo oops >&2; exit 3\" failed (exit status: 3): oops");
        let out = HostRunner.run(&Cmd::new("sh", ["-c", "echo hi"])).unwrap();
        assert_eq!(out, "hi\n");
        let err = HostRunner.run(&Cmd::new("/nonexistent/prog", Vec::<String>::new())).unwrap_err();
        assert!(err.to_string().starts_with("running /nonexistent/prog: "), "{err}");
    }
}
