//! Commands run inside a booted lab machine, as `machinectl shell` would run them.

use std::time::Duration;

use rustix::process::Pid;

/// Runs `args` in every namespace of the machine whose PID 1 is `pid`, without blocking the
/// runtime (which may be forwarding the lab's ports into the machine).
pub async fn in_machine(pid: Pid, args: &[&str]) -> Result<String, String> {
    nsenter(pid, &["--all"], args).await
}

/// [`in_machine`] for a machine that may be shutting down: not in its PID namespace (nor its time
/// namespace, which also only a child would enter). A shutdown stops every process in the
/// machine's PID namespace, and nsenter stops with a child that stops, so it would never reap
/// the child once killed, and the machine's PID 1 would wait for that forever.
pub async fn in_halting_machine(pid: Pid, args: &[&str]) -> Result<String, String> {
    nsenter(pid, &["--all", "--no-fork"], args).await
}

/// How long a command in a machine may take: a machine shutting down under it may stop it for
/// good (see [`in_halting_machine`]); nsenter is killed then, and the machine's init reaps its
/// child.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

async fn nsenter(pid: Pid, how: &[&str], args: &[&str]) -> Result<String, String> {
    let run = tokio::process::Command::new("nsenter")
        .args(how)
        .args(["--target", &pid.as_raw_nonzero().to_string(), "--"])
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(COMMAND_TIMEOUT, run)
        .await
        .map_err(|_| format!("{args:?}: no answer in {COMMAND_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(said)
    } else {
        Err(format!("{args:?}: {}: {said}{}", out.status, String::from_utf8_lossy(&out.stderr)))
    }
}
