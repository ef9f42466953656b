//! Running the server as a process (`mco server`): the config source, the listeners, shutdown on
//! SIGINT/SIGTERM, in the caller's runtime (which may serve more, such as `/metrics`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use fn_error_context::context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use mco_metrics::server::ServerMetrics;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio_rustls::TlsAcceptor;

use crate::{BodyCache, BootstrapSource, ClusterOptions, ClusterSource, ConfigSource, Limits, Server, tls};

/// What `mco server` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    pub listen: SocketAddr,
    pub insecure_listen: Option<SocketAddr>,
    pub limits: Limits,
    /// Cap on the total bytes of cached bodies.
    pub cache_bytes: usize,
    /// Where answered requests and refused machines are counted.
    pub metrics: ServerMetrics,
}

/// Where the configs come from.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Upstream's bootstrap directory layout.
    Bootstrap {
        dir: PathBuf,
        kubeconfig: PathBuf,
        /// `host=file` pairs, files relative to `dir`.
        certs: Vec<String>,
    },
    /// The API server reached with `kubeconfig`, or with the pod's service account without one.
    Cluster {
        kubeconfig: Option<PathBuf>,
        /// Written into served kubeconfigs; the API server this server reaches when not given.
        apiserver_url: Option<String>,
        bootstrap_token_dir: PathBuf,
        sync_timeout: Duration,
    },
}

/// Serves until SIGINT or SIGTERM. Everything that can be checked before listening is: the
/// directory or the API server, the kubeconfig and token, the certificate and key. The bound
/// addresses are printed on standard error (`listening on https://ADDR`), so port 0 can be used.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let tls = TlsAcceptor::from(tls::server_config(options.tls_cert.clone(), options.tls_key.clone())?);
    let cache = Arc::new(BodyCache::new(options.cache_bytes));
    match options.mode.clone() {
        Mode::Bootstrap { dir, kubeconfig, certs } => {
            anyhow::ensure!(dir.is_dir(), "bootstrap directory {} does not exist or is not a directory", dir.display());
            let source = BootstrapSource::new(dir, kubeconfig, &certs, cache)?;
            serve(source, &options, tls).await
        }
        Mode::Cluster { kubeconfig, apiserver_url, bootstrap_token_dir, sync_timeout } => {
            let (client, kubeconfig_server) = client(kubeconfig.as_deref()).await?;
            let apiserver_url = apiserver_url.unwrap_or(kubeconfig_server);
            let cluster = ClusterOptions { apiserver_url, bootstrap_token_dir, sync_timeout };
            let source = ClusterSource::start(client, cluster, cache).await?;
            serve(source, &options, tls).await
        }
    }
}

async fn serve<S: ConfigSource>(source: S, options: &Options, tls: TlsAcceptor) -> anyhow::Result<()> {
    let server = Server::new(source, options.limits.clone(), options.metrics.clone());
    let secure = bind(options.listen).await?;
    eprintln!("listening on https://{}", secure.local_addr()?);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(Arc::clone(&server).serve(secure, Some(tls)));
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
}

async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))
}

/// A client for the kubeconfig at `path` (the pod's service account without one), and the API
/// server URL it reaches.
#[context("Connecting to the API server with {}", path.map_or("the pod's service account".into(), |p| p.display().to_string()))]
async fn client(path: Option<&std::path::Path>) -> anyhow::Result<(kube::Client, String)> {
    let config = match path {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::incluster()?,
    };
    let url = config.cluster_url.to_string().trim_end_matches('/').to_string();
    Ok((kube::Client::try_from(config)?, url))
}
