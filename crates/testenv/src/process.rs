//! A child process whose output goes to `<dir>/<name>.log`, killed when dropped.

use std::fs::OpenOptions;
use std::future::Future;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fn_error_context::context;

use crate::Error;

/// How much of a log an error quotes.
const LOG_TAIL_LINES: usize = 30;
const POLL_INTERVAL: Duration = Duration::from_millis(100);
const TERMINATE_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `binary args...`; the log is appended to, so a restarted process keeps the old lines.
    #[context("Starting {name}")]
    pub(crate) fn spawn(name: &'static str, binary: &Path, args: &[String], dir: &Path) -> anyhow::Result<Process> {
        let log = dir.join(format!("{name}.log"));
        let out = OpenOptions::new().create(true).append(true).open(&log).with_context(|| log.display().to_string())?;
        let mut command = Command::new(binary);
        command.args(args).stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        let child = spawn_dying_with_process(command).with_context(|| binary.display().to_string())?;
        tracing::debug!(name, pid = child.id(), log = %log.display(), "started");
        Ok(Process { name, child, log })
    }

    /// Waits until something accepts connections on 127.0.0.1:`port`.
    pub(crate) async fn wait_for_port(&mut self, port: u16, timeout: Duration) -> Result<(), Error> {
        self.wait_until(timeout, || async move {
            TcpStream::connect((Ipv4Addr::LOCALHOST, port)).map(drop).map_err(|e| e.to_string())
        })
        .await
    }

    /// Polls `probe` until it succeeds; fails early, with the end of the log, if the process exits.
    pub(crate) async fn wait_until<F, Fut>(&mut self, timeout: Duration, mut probe: F) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            let reason = match probe().await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if let Some(status) = self.child.try_wait().context("waiting for a child process")? {
                return Err(self.not_ready(format!("exited with {status} (last probe: {reason})")));
            }
            if Instant::now() >= deadline {
                return Err(self.not_ready(format!("not ready after {timeout:?}: {reason}")));
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Stops the process as a service manager would: SIGTERM, then SIGKILL if it has not exited
    /// after [`TERMINATE_TIMEOUT`].
    pub(crate) async fn terminate(&mut self) -> anyhow::Result<()> {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .with_context(|| format!("signalling {}", self.name))?;
        let deadline = Instant::now() + TERMINATE_TIMEOUT;
        while self.child.try_wait()?.is_none() {
            if Instant::now() >= deadline {
                anyhow::bail!("{} still runs {TERMINATE_TIMEOUT:?} after SIGTERM", self.name);
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
        Ok(())
    }

    fn not_ready(&self, reason: String) -> Error {
        let text = std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(cannot read the log: {e})"));
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
        Error::NotReady { name: self.name, reason, log: self.log.clone(), tail }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Already exited is the only way kill fails here; wait reaps the zombie either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
        tracing::debug!(name = self.name, "stopped");
    }
}

/// Spawns `command` so that it dies with this process (SIGKILL as its parent-death signal), from
/// a thread that lives as long as the process: the kernel sends that signal when the spawning
/// *thread* ends, and a test's own thread ends with the test, before a shared server's last use.
/// The command runs in the calling thread's network namespace (a test may have one of its own,
/// as the lab does), where its readiness is then probed.
fn spawn_dying_with_process(mut command: Command) -> std::io::Result<Child> {
    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<std::io::Result<mpsc::Sender<Job>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, received) = mpsc::channel::<Job>();
        std::thread::Builder::new().name("testenv-spawner".into()).spawn(move || {
            // The sender lives in a static: this loop, and the thread, end only with the process.
            for (mut command, reply) in received {
                let _ = reply.send(command.spawn());
            }
        })?;
        Ok(jobs)
    });
    let spawner = spawner.as_ref().map_err(|e| std::io::Error::new(e.kind(), e.to_string()))?;
    let network = std::fs::File::open("/proc/thread-self/ns/net")?;
    // SAFETY: prctl and setns are async-signal-safe and touch no memory of the parent.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
                || libc::setns(std::os::fd::AsRawFd::as_raw_fd(&network), libc::CLONE_NEWNET) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (reply, spawned) = mpsc::channel();
    let gone = || std::io::Error::other("the spawner thread is gone");
    spawner.send((command, reply)).map_err(|_| gone())?;
    spawned.recv().map_err(|_| gone())?
}

/// `N` distinct free ports on 127.0.0.1. They are free when this returns; another program could
/// take one before the child binds it, which a test run then reports as a start failure.
#[context("Finding free loopback ports")]
pub(crate) fn free_ports<const N: usize>() -> anyhow::Result<[u16; N]> {
    // All listeners stay open until every port is known, so the ports differ.
    let listeners = (0..N).map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0))).collect::<Result<Vec<_>, _>>()?;
    let ports = listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect::<anyhow::Result<Vec<u16>>>()?;
    Ok(ports.try_into().expect("one port per listener"))
}
