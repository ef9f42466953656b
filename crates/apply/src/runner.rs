//! Every external command (systemctl, rpm-ostree, bootc, rpm) goes through one trait, so command
//! lines are built by pure functions that tests compare with upstream's exact invocations, and
//! failures read the same everywhere: the command line, the exit status and stderr.

use std::fmt;
use std::path::PathBuf;
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

/// Executes commands on this machine; with `root`, chrooted into the host's root mounted there (the
/// daemon's pod), so that systemctl, rpm-ostree, bootc and rpm are the host's own.
#[derive(Debug, Default, Clone)]
pub struct HostRunner {
    pub root: Option<PathBuf>,
}

impl HostRunner {
    /// The command line actually executed for `cmd`.
    fn host_cmd(&self, cmd: &Cmd) -> Cmd {
        match &self.root {
            None => cmd.clone(),
            Some(root) => {
                let args = [root.to_string_lossy().into_owned(), cmd.program.clone()];
                Cmd::new("chroot", args.into_iter().chain(cmd.args.iter().cloned()))
            }
        }
    }
}

impl Runner for HostRunner {
    fn output(&self, cmd: &Cmd) -> Result<Output, CommandError> {
        let cmd = self.host_cmd(cmd);
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
        let host = HostRunner::default();
        let err = host.run(&Cmd::new("sh", ["-c", "echo oops >&2; exit 3"])).unwrap_err();
        assert_eq!(err.to_string(), "sh -c \"echo oops >&2; exit 3\" failed (exit status: 3): oops");
        let out = host.run(&Cmd::new("sh", ["-c", "echo hi"])).unwrap();
        assert_eq!(out, "hi\n");
        let err = host.run(&Cmd::new("/nonexistent/prog", Vec::<String>::new())).unwrap_err();
        assert!(err.to_string().starts_with("running /nonexistent/prog: "), "{err}");
    }

    // Root: chroot.
    #[cfg(feature = "real-components")]
    mod real {
        use super::*;

        #[test]
        fn a_mounted_host_root_runs_commands_chrooted_into_it() {
            let mounted = HostRunner { root: Some("/rootfs".into()) };
            let cmd = Cmd::new("systemctl", ["daemon-reload"]);
            assert_eq!(mounted.host_cmd(&cmd), Cmd::new("chroot", ["/rootfs", "systemctl", "daemon-reload"]));
            assert_eq!(HostRunner::default().host_cmd(&cmd), cmd);
            // The host's root is "/" here: the chrooted command runs and fails as the plain one would,
            // named as the host command it is.
            let slash = HostRunner { root: Some("/".into()) };
            assert_eq!(slash.run(&Cmd::new("sh", ["-c", "echo hi"])).unwrap(), "hi\n");
            let err = slash.run(&Cmd::new("sh", ["-c", "exit 4"])).unwrap_err();
            assert_eq!(err.to_string(), "sh -c \"exit 4\" failed (exit status: 4): ");
            // A root that is not there: chroot's own failure.
            let missing = HostRunner { root: Some("/nonexistent-root".into()) };
            let err = missing.run(&Cmd::new("true", Vec::<String>::new())).unwrap_err();
            assert!(err.to_string().contains("/nonexistent-root"), "{err}");
        }
    }
}
