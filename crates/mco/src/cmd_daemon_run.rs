//! `mco daemon run --node NAME`: the node daemon in the cluster (crate `mco-daemon`; what it applies: `mco-apply`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use mco_daemon::kubelet_health::{self, HealthzUrl};
use mco_daemon::{Settings, Stopped, Timing};

use crate::cmd_daemon::{NodeArgs, node};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The Node this daemon runs on; it reads and writes no other.
    #[arg(long = "node", value_name = "NAME")]
    node_name: String,
    /// Kubeconfig file. Without it: $KUBECONFIG, ~/.kube/config or the in-cluster service account.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The node's own credentials for its Node object: the kubelet's kubeconfig
    /// (`system:node:NAME`), so that the API server's NodeRestriction lets this daemon write this
    /// Node and no other. With --host, the files it names are the host's, read under --root.
    /// Without it: the --kubeconfig credentials.
    #[arg(long, value_name = "FILE")]
    node_kubeconfig: Option<PathBuf>,
    /// Answer `GET /healthz` (the pod's probes) on this address.
    #[arg(long, value_name = "ADDR", value_parser = crate::listen_address)]
    health_listen: Option<std::net::SocketAddr>,
    /// Answer `GET /metrics` (Prometheus) on this address, without authentication (upstream:
    /// 127.0.0.1:8797).
    #[arg(long, value_name = "ADDR", value_parser = crate::listen_address)]
    metrics_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    secure_metrics: crate::SecureMetricsArgs,
    /// PinnedImageSets' images are pulled only while the node's allocatable ephemeral storage is at
    /// least this (a Kubernetes quantity; upstream's 16Gi). 0: no storage check, for kubelets that
    /// report no ephemeral storage.
    #[arg(long, value_name = "QUANTITY", default_value = "16Gi", value_parser = storage_quantity)]
    pinned_images_min_free_storage: i64,
    /// The kubelet's healthz endpoint, checked every 30 s (`mcd_kubelet_state`: failures in a row).
    #[arg(long, value_name = "URL", default_value = "http://localhost:10248/healthz")]
    kubelet_healthz_endpoint: HealthzUrl,
    #[command(flatten)]
    node: NodeArgs,
}

/// Runs until an update needs a reboot. On a host the reboot is under way and the process waits
/// for it to be stopped; on a directory root it exits 0 after writing ROOT/run/mco-reboot-requested,
/// and whoever runs the root starts it again as the rebooted node.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let node = node(&args.node);
    let host = args.node.is_host();
    let mut registry = mco_metrics::Registry::default();
    let metrics = mco_metrics::daemon::DaemonMetrics::register(&mut registry);
    let kubelet_state = metrics.kubelet_state.clone();
    let mut pinning = mco_daemon::pinning::Settings::new(args.node_name.clone(), node.root.clone());
    pinning.min_free_storage = args.pinned_images_min_free_storage;
    let settings =
        Settings { node_name: args.node_name, aleph: args.node.aleph()?, timing: Timing::default(), metrics };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        if let Some(addr) = args.health_listen {
            tokio::spawn(mco_controller::health::listen(addr, None).await?);
        }
        let client = mco_controller::client(args.kubeconfig.as_deref()).await?;
        let registry = std::sync::Arc::new(registry);
        if let Some(addr) = args.metrics_listen {
            tokio::spawn(mco_controller::health::listen(addr, Some(registry.clone())).await?);
        }
        if let Some(secure) = args.secure_metrics.options() {
            tokio::spawn(mco_metrics_auth::start(&secure, client.clone(), registry).await?);
        }
        let healthz = args.kubelet_healthz_endpoint;
        tokio::spawn(kubelet_health::monitor(
            healthz,
            kubelet_health::INTERVAL,
            kubelet_health::TIMEOUT,
            kubelet_state,
        ));
        let node_client = match &args.node_kubeconfig {
            Some(path) => node_credentials(path, args.node.mounted_host_root()).await?,
            None => client.clone(),
        };
        tokio::spawn(mco_daemon::pinning::run(client.clone(), node_client.clone(), pinning));
        match mco_daemon::run(client, node_client, node, settings).await {
            // Exiting would let systemd restart the daemon before the reboot, and it would then
            // report the update complete on a node that has not booted into it.
            Stopped::RebootRequested if host => std::future::pending().await,
            Stopped::RebootRequested => Ok(ExitCode::SUCCESS),
        }
    })
}

/// A storage size as a Kubernetes quantity (`16Gi`, `17179869184`), in bytes.
fn storage_quantity(text: &str) -> Result<i64, String> {
    let bytes = mco_api::quantity::Quantity::parse(text)?.value();
    if bytes < 0 { Err(format!("{text} is negative")) } else { Ok(bytes) }
}

/// A client with the credentials of the kubeconfig at `path`, whose absolute file paths are under
/// `host_root` when the host's root is mounted there.
#[fn_error_context::context("Reading the node's credentials from {}", path.display())]
async fn node_credentials(path: &Path, host_root: Option<&Path>) -> anyhow::Result<kube::Client> {
    let mut kubeconfig = Kubeconfig::read_from(path)?;
    if let Some(root) = host_root {
        reroot(&mut kubeconfig, root);
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Puts every absolute file path of `kubeconfig` (certificates, keys, token files) under `root`.
fn reroot(kubeconfig: &mut Kubeconfig, root: &Path) {
    let under = |path: &mut Option<String>| {
        if let Some(p) = path.as_mut().filter(|p| p.starts_with('/')) {
            *p = root.join(p.trim_start_matches('/')).display().to_string();
        }
    };
    for cluster in kubeconfig.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        under(&mut cluster.certificate_authority);
    }
    for auth in kubeconfig.auth_infos.iter_mut().filter_map(|a| a.auth_info.as_mut()) {
        under(&mut auth.client_certificate);
        under(&mut auth.client_key);
        under(&mut auth.token_file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_sizes_are_quantities() {
        assert_eq!(storage_quantity("16Gi"), Ok(16 << 30));
        assert_eq!(storage_quantity("0"), Ok(0));
        assert_eq!(storage_quantity("-1Gi"), Err("-1Gi is negative".to_string()));
        assert!(storage_quantity("lots").is_err());
    }

    #[test]
    fn a_mounted_host_roots_kubeconfig_paths_are_read_under_it() {
        // As a kubelet writes it: certificates by absolute path on the host, one relative one.
        let text = r#"
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://api-int.example:6443
    certificate-authority: /etc/kubernetes/kubelet-ca.crt
users:
- name: kubelet
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: relative/key.pem
contexts:
- name: kubelet
  context: {cluster: local, user: kubelet}
current-context: kubelet
"#;
        let mut kubeconfig = Kubeconfig::from_yaml(text).unwrap();
        reroot(&mut kubeconfig, Path::new("/rootfs"));
        let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.certificate_authority.as_deref(), Some("/rootfs/etc/kubernetes/kubelet-ca.crt"));
        let auth = kubeconfig.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(auth.client_certificate.as_deref(), Some("/rootfs/var/lib/kubelet/pki/kubelet-client-current.pem"));
        assert_eq!(auth.client_key.as_deref(), Some("relative/key.pem"));
        assert_eq!(auth.token_file, None);
    }
}
