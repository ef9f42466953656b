//! Child processes of the lab: long-running services (stopped with SIGTERM, then SIGKILL) and
//! one-shot tools (their output checked), each logging to a file of its own.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use rustix::process::{Pid, Signal, kill_process};
use tokio::process::{Child, Command};

/// How long a service gets to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// How much of a log an error quotes.
const TAIL_LINES: usize = 20;

/// A running service; killed (SIGKILL) if dropped without [`Service::stop`].
pub struct Service {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Service {
    /// Starts `command` with stdout and stderr appended to `log`. It dies with the supervisor, even
    /// one killed halfway through the lab's bring-up (where nothing drops it).
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> anyhow::Result<Service> {
        let out = append(log)?;
        // SAFETY: the closure runs between fork and exec and only makes a system call.
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
                Ok(())
            });
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        tracing::info!(name, pid = child.id(), log = %log.display(), "started");
        Ok(Service { name: name.to_string(), child, log: log.to_path_buf() })
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The exit status if the process has exited.
    pub fn exited(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        self.child.try_wait().with_context(|| format!("checking on {}", self.name))
    }

    /// SIGTERM, then SIGKILL after [`STOP_TIMEOUT`].
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id().and_then(|id| Pid::from_raw(id as i32)) {
            let _ = kill_process(pid, Signal::TERM);
            if tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await.is_ok() {
                tracing::info!(name = self.name, "stopped");
                return;
            }
            tracing::warn!(name = self.name, "did not stop after {STOP_TIMEOUT:?}; killing it");
        }
        let _ = self.child.kill().await;
    }

    /// The last lines of the log, for error messages.
    pub fn tail(&self) -> String {
        tail(&self.log)
    }
}

fn append(log: &Path) -> anyhow::Result<std::fs::File> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    OpenOptions::new().create(true).append(true).open(log).with_context(|| format!("opening {}", log.display()))
}

/// The last lines of a log file.
pub fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// Runs a tool to completion; returns its stdout. The command line and its stderr are appended
/// to `log`; a failure quotes the end of what the tool printed.
pub async fn run_tool<I, S>(program: &Path, args: I, envs: &[(&str, &OsStr)], log: &Path) -> anyhow::Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    use std::io::Write as _;
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_os_string()).collect();
    let shown =
        format!("{} {}", program.display(), args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "));
    let mut command = Command::new(program);
    command.args(&args).stdin(Stdio::null());
    for (key, value) in envs {
        command.env(key, value);
    }
    let output = command.output().await.with_context(|| format!("running {shown}"))?;
    let mut out = append(log)?;
    writeln!(out, "+ {shown}")?;
    out.write_all(&output.stderr)?;
    if !output.status.success() {
        // Some tools (Ignition with -log-to-stdout) say why on stdout.
        out.write_all(&output.stdout)?;
        let said = [&output.stdout[..], &output.stderr[..]].concat();
        let said = String::from_utf8_lossy(&said);
        let lines: Vec<&str> = said.lines().collect();
        bail!("{shown} failed ({}):\n{}", output.status, lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n"));
    }
    String::from_utf8(output.stdout).with_context(|| format!("{shown} printed something that is not UTF-8"))
}

/// `N` ports free on the loopback interface now.
pub fn free_ports<const N: usize>() -> anyhow::Result<[u16; N]> {
    let listeners = [(); N].map(|_| std::net::TcpListener::bind("127.0.0.1:0"));
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(listeners) {
        *port = listener.context("finding a free port")?.local_addr()?.port();
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service outlives nothing that started it: the parent-death signal fires when the
    /// spawning thread ends (as the supervisor's would, killed), even with no drop to kill it.
    #[test]
    fn a_service_dies_with_what_started_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sleep.log");
        let pid = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let _guard = runtime.enter();
            let mut command = Command::new("sleep");
            command.arg("600");
            let service = Service::spawn("sleep", command, &log).unwrap();
            let pid = service.pid().unwrap();
            // No drop, so no kill_on_drop: only the parent-death signal can end it.
            std::mem::forget(service);
            pid
        })
        .join()
        .unwrap();
        let pid = Pid::from_raw(pid as i32).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let status = loop {
            match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG).unwrap() {
                Some((_, status)) => break status,
                None if std::time::Instant::now() > deadline => {
                    let _ = kill_process(pid, Signal::KILL);
                    panic!("the service still ran 30 s after the thread that started it ended");
                }
                None => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        assert_eq!(status.terminating_signal(), Some(Signal::KILL.as_raw()), "{status:?}");
    }
}
