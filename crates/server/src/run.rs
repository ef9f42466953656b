//! Running the server as a process (`mco server`): the runtime, the listeners, shutdown on
//! SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio_rustls::TlsAcceptor;

use crate::{BootstrapSource, Limits, Server, tls};

/// What `mco server` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub bootstrap_dir: PathBuf,
    pub bootstrap_kubeconfig: PathBuf,
    /// `host=file` pairs, files relative to `bootstrap_dir`.
    pub bootstrap_certs: Vec<String>,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    pub listen: SocketAddr,
    pub insecure_listen: Option<SocketAddr>,
    pub limits: Limits,
}

/// Serves until SIGINT or SIGTERM. Everything that can be checked before listening is: the
/// directory, the kubeconfig, the certificate and key. The bound addresses are printed on
/// standard error (`listening on https://ADDR`), so port 0 can be used.
pub fn run(options: Options) -> anyhow::Result<()> {
    anyhow::ensure!(
        options.bootstrap_dir.is_dir(),
        "bootstrap directory {} does not exist or is not a directory",
        options.bootstrap_dir.display()
    );
    let source = BootstrapSource::new(
        options.bootstrap_dir.clone(),
        options.bootstrap_kubeconfig.clone(),
        &options.bootstrap_certs,
    )?;
    let tls = TlsAcceptor::from(tls::server_config(options.tls_cert.clone(), options.tls_key.clone())?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(async move {
        let server = Server::new(source, options.limits.clone());
        let secure = bind(options.listen).await?;
        eprintln!("listening on https://{}", secure.local_addr()?);
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(std::sync::Arc::clone(&server).serve(secure, Some(tls)));
        if let Some(addr) = options.insecure_listen {
            let insecure = bind(addr).await?;
            eprintln!("listening on http://{}", insecure.local_addr()?);
            tasks.spawn(server.serve(insecure, None));
        }
        let mut terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
        Ok(())
    })
}

async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))
}
