//! `mco server`: the Machine Config Server, serving from a bootstrap directory or from the cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use mco_metrics::server::ServerMetrics;
use mco_server::run::Mode;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["bootstrap_dir", "kubeconfig", "in_cluster"])))]
pub struct ServerArgs {
    /// Bootstrap mode: a directory in the upstream bootstrap layout: machine-pools/<pool>.yaml
    /// (status.configuration.name names the rendered config), machine-configs/<name>.yaml,
    /// controller-config/machine-config-controller.yaml.
    #[arg(long, value_name = "DIR")]
    bootstrap_dir: Option<PathBuf>,
    /// Bootstrap mode: kubeconfig served to machines as /etc/kubernetes/kubeconfig.
    #[arg(long, value_name = "FILE", requires = "bootstrap_dir", required_unless_present_any = ["kubeconfig", "in_cluster"])]
    bootstrap_kubeconfig: Option<PathBuf>,
    /// Bootstrap mode: registry CA served as /etc/docker/certs.d/HOST/ca.crt; FILE is relative to
    /// the directory.
    #[arg(long = "bootstrap-certs", value_name = "HOST=FILE", conflicts_with_all = ["kubeconfig", "in_cluster"])]
    bootstrap_certs: Vec<String>,
    /// Cluster mode: serve pools and rendered configs of the API server this kubeconfig reaches
    /// (a pool's target config only once one of its nodes runs it).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Cluster mode in a pod: reach the API server with the pod's service account (then give
    /// --apiserver-url: booting machines cannot reach the cluster's Service address).
    #[arg(long, requires = "apiserver_url")]
    in_cluster: bool,
    /// Cluster mode: API server URL written into the kubeconfig served to nodes [default: the
    /// server of --kubeconfig].
    #[arg(long, value_name = "URL", conflicts_with = "bootstrap_dir")]
    apiserver_url: Option<String>,
    /// Cluster mode: directory holding `token` and `ca.crt` of the node-bootstrapper service
    /// account (its token secret's keys), from which the served kubeconfig is built.
    #[arg(long, value_name = "DIR", conflicts_with = "bootstrap_dir", default_value = mco_server::source::cluster::DEFAULT_BOOTSTRAP_TOKEN_DIR)]
    bootstrap_token_dir: PathBuf,
    /// Serving certificate (PEM chain); re-read when it changes.
    #[arg(long, value_name = "FILE")]
    tls_cert: PathBuf,
    /// Key of the serving certificate (PEM); re-read when it changes.
    #[arg(long, value_name = "FILE")]
    tls_key: PathBuf,
    /// Address of the HTTPS listener.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:22623")]
    listen: SocketAddr,
    /// Address of an additional plain HTTP listener (upstream: port 22624).
    #[arg(long, value_name = "ADDR")]
    insecure_listen: Option<SocketAddr>,
    /// Cap on the encoded bodies kept in memory, in MiB (least recently served dropped first).
    #[arg(long, value_name = "MIB", default_value_t = mco_server::cache::DEFAULT_CAPACITY >> 20)]
    cache_mib: usize,
    /// Answer `GET /metrics` (Prometheus) on this address, without authentication.
    #[arg(long, value_name = "ADDR", value_parser = crate::listen_address)]
    metrics_listen: Option<SocketAddr>,
    /// (Cluster mode only: the API server judges each request's token.)
    #[command(flatten)]
    secure_metrics: crate::SecureMetricsArgs,
}

/// Time the watches get to list the cluster's objects before the server gives up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

pub fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    let secure_metrics = args.secure_metrics.options();
    if secure_metrics.is_some() && args.bootstrap_dir.is_some() {
        anyhow::bail!("--metrics-secure-listen needs cluster mode: the API server judges each request's token");
    }
    let cluster_kubeconfig = args.kubeconfig.clone();
    let mode = match (args.bootstrap_dir, args.bootstrap_kubeconfig) {
        (Some(dir), Some(kubeconfig)) => Mode::Bootstrap { dir, kubeconfig, certs: args.bootstrap_certs },
        (None, None) => Mode::Cluster {
            kubeconfig: args.kubeconfig,
            apiserver_url: args.apiserver_url,
            bootstrap_token_dir: args.bootstrap_token_dir,
            sync_timeout: SYNC_TIMEOUT,
        },
        _ => unreachable!("clap requires --bootstrap-kubeconfig with --bootstrap-dir and refuses it without"),
    };
    let cache_bytes = args
        .cache_mib
        .checked_mul(1 << 20)
        .ok_or_else(|| anyhow::anyhow!("--cache-mib {} is too large", args.cache_mib))?;
    let mut registry = mco_metrics::Registry::default();
    let metrics = ServerMetrics::register(&mut registry);
    let options = mco_server::run::Options {
        mode,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        listen: args.listen,
        insecure_listen: args.insecure_listen,
        limits: mco_server::Limits::default(),
        cache_bytes,
        metrics,
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let registry = Arc::new(registry);
        if let Some(addr) = args.metrics_listen {
            tokio::spawn(mco_controller::health::listen(addr, Some(registry.clone())).await?);
        }
        if let Some(secure) = secure_metrics {
            let client = mco_controller::client(cluster_kubeconfig.as_deref()).await?;
            tokio::spawn(mco_metrics_auth::start(&secure, client, registry).await?);
        }
        mco_server::run::run(options).await
    })?;
    Ok(ExitCode::SUCCESS)
}
