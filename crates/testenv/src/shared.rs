//! The API server a test binary's tests share: started by the first test that asks, in whatever
//! runtime that test has, and killed when the test binary exits (libtest ends with `exit`, which
//! runs `atexit` handlers; the processes also die with the binary, see [`crate::process`]).

use std::sync::{Arc, Mutex};

use crate::{Cluster, Error, Processes, TestEnv};

/// The shared server's processes, taken and dropped (killed, directory removed) at exit.
static PROCESSES: Mutex<Option<Processes>> = Mutex::new(None);

/// The shared server, started on the first call.
pub(crate) async fn cluster() -> Result<Arc<Cluster>, Error> {
    static CLUSTER: tokio::sync::OnceCell<Arc<Cluster>> = tokio::sync::OnceCell::const_new();
    CLUSTER
        .get_or_try_init(|| async {
            let mut env = TestEnv::start().await?;
            let processes = env.processes.take().expect("a server of its own");
            *PROCESSES.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(processes);
            // SAFETY: registering a handler is always sound; the handler only takes a lock and
            // drops what it holds.
            if unsafe { libc::atexit(stop_at_exit) } != 0 {
                tracing::warn!("cannot register the shared API server's exit handler; its directory stays");
            }
            Ok(env.cluster.clone())
        })
        .await
        .cloned()
}

extern "C" fn stop_at_exit() {
    let processes = PROCESSES.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    drop(processes);
}
