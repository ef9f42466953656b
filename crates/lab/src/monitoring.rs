//! `mco lab up --prometheus`: Debian's Prometheus in the lab's network namespace, as an
//! administrator without prometheus-operator would run it: it scrapes every mco container port
//! named `metrics`, with the labels `deploy/components/monitoring/pod-monitor.yaml` gives
//! (namespace, pod, container, node), and evaluates that component's plain rules file. Debian
//! builds Prometheus without Kubernetes service discovery, so the supervisor plays it: it lists
//! mco's pods every few seconds and writes them as a file_sd targets file. The metrics ports are
//! HTTPS and want a token allowed to read them: the lab applies the component's
//! `metrics-reader.yaml` and gives Prometheus a token of its account.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use fn_error_context::context;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt as _};
use mco_api::constants::MCO_NAMESPACE;
use serde_json::json;
use tokio::process::Command;

use crate::images::wait_for_port;
use crate::layout::Layout;
use crate::process::Service;

/// Scrape, rule evaluation and target discovery interval: short, so that an alert follows the
/// cluster within seconds in the lab (upstream's platform Prometheus scrapes every 30 s).
const INTERVAL: Duration = Duration::from_secs(5);
/// How long Prometheus gets to load its rules and be ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// mco's workloads, by their pods' `k8s-app` label (upstream's names).
const WORKLOADS: [&str; 3] = ["machine-config-controller", "machine-config-daemon", "machine-config-server"];

/// The account whose token Prometheus scrapes with (`metrics-reader.yaml`), and how long the
/// token lasts: longer than any lab.
const READER: &str = "metrics-reader";
const TOKEN_SECONDS: i64 = 7 * 24 * 3600;

/// The rules file of `deploy/` the lab's Prometheus evaluates.
pub fn rules_file(deploy: &Path) -> PathBuf {
    deploy.join("components/monitoring/rules.yml")
}

/// Prometheus's configuration: the targets in `targets` (a file_sd file), scraped over HTTPS
/// (self-signed certificates) with the bearer token in `token`, and `rules`.
pub fn config(targets: &Path, token: &Path, rules: &Path) -> String {
    let interval = format!("{}s", INTERVAL.as_secs());
    format!(
        "# Written by `mco lab up --prometheus`.\n\
         global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n\
         rule_files:\n  - {rules}\n\
         scrape_configs:\n\
         \x20 - job_name: machine-config\n\
         \x20   scheme: https\n\
         \x20   tls_config:\n\
         \x20     insecure_skip_verify: true\n\
         \x20   authorization:\n\
         \x20     credentials_file: {token}\n\
         \x20   file_sd_configs:\n\
         \x20     - files: [{targets}]\n\
         \x20       refresh_interval: {interval}\n",
        rules = rules.display(),
        targets = targets.display(),
        token = token.display(),
    )
}

/// The file_sd targets of `pods`: every running mco pod's container port named `metrics`, at its
/// pod IP, labelled as the PodMonitor labels it.
pub fn targets(pods: &[Pod]) -> serde_json::Value {
    let mut targets = Vec::new();
    for pod in pods {
        let app = pod.labels().get("k8s-app").map(String::as_str).unwrap_or_default();
        let (Some(spec), Some(status)) = (&pod.spec, &pod.status) else { continue };
        let Some(ip) = status.pod_ip.as_deref().filter(|_| status.phase.as_deref() == Some("Running")) else {
            continue;
        };
        if !WORKLOADS.contains(&app) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        for container in &spec.containers {
            for port in container.ports.iter().flatten().filter(|p| p.name.as_deref() == Some("metrics")) {
                targets.push(json!({
                    "targets": [format!("{ip}:{}", port.container_port)],
                    "labels": {
                        "namespace": pod.namespace(),
                        "pod": pod.name_any(),
                        "container": container.name,
                        "node": spec.node_name,
                    },
                }));
            }
        }
    }
    json!(targets)
}

/// Keeps `file` holding the [`targets`] of mco's pods (replaced atomically: Prometheus never
/// reads half a file), until dropped.
pub async fn discover(client: Client, file: PathBuf) {
    let pods: Api<Pod> = Api::namespaced(client, MCO_NAMESPACE);
    let mut last = None;
    loop {
        match pods.list(&ListParams::default()).await {
            Ok(listed) => {
                let found = targets(&listed.items);
                if last.as_ref() != Some(&found) {
                    let written = write_atomically(&file, &found.to_string());
                    match written {
                        Ok(()) => last = Some(found),
                        Err(e) => tracing::warn!("writing Prometheus's targets: {e:#}"),
                    }
                }
            }
            Err(e) => tracing::warn!("listing mco's pods for Prometheus: {e}"),
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

fn write_atomically(file: &Path, text: &str) -> anyhow::Result<()> {
    let temporary = file.with_extension("tmp");
    std::fs::write(&temporary, text).with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, file).with_context(|| format!("renaming to {}", file.display()))
}

/// Starts Prometheus on 127.0.0.1:`port` with [`config`] and the [`discover`]y of mco's pods
/// (a task of `tasks`), and waits until it is ready (its rules loaded).
#[context("Starting Prometheus")]
pub async fn start(
    layout: &Layout,
    deploy: &Path,
    client: Client,
    port: u16,
    tasks: &mut tokio::task::JoinSet<()>,
) -> anyhow::Result<Service> {
    let dir = layout.dir.join("prometheus");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let rules = rules_file(deploy).canonicalize().context("finding the monitoring component's rules file")?;
    let targets_file = dir.join("targets.json");
    write_atomically(&targets_file, "[]")?;
    let token_file = dir.join("token");
    write_atomically(&token_file, &reader_token(layout, deploy, &client).await?)?;
    tasks.spawn(discover(client, targets_file.clone()));
    let config_file = dir.join("prometheus.yml");
    std::fs::write(&config_file, config(&targets_file, &token_file, &rules))?;
    let mut command = Command::new("prometheus");
    command
        .arg(format!("--config.file={}", config_file.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"));
    let mut service = Service::spawn("prometheus", command, &layout.log("prometheus"))?;
    wait_for_port(&mut service, port).await?;
    let ready = async {
        while !is_ready(port).await {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(READY_TIMEOUT, ready)
        .await
        .map_err(|_| anyhow::anyhow!("not ready after {READY_TIMEOUT:?}:\n{}", service.tail()))?;
    Ok(service)
}

/// Applies the component's metrics reader (its account, Role and binding) and returns a token of
/// the account.
#[context("Giving Prometheus a token allowed to read mco's metrics")]
async fn reader_token(layout: &Layout, deploy: &Path, client: &Client) -> anyhow::Result<String> {
    let file = deploy.join("components/monitoring/metrics-reader.yaml");
    let kubeconfig = layout.kubeconfig();
    let args = ["--kubeconfig".as_ref(), kubeconfig.as_os_str(), "apply".as_ref(), "-f".as_ref(), file.as_os_str()];
    crate::process::run_tool(&crate::install::kubectl()?, args, &[], &layout.log("prometheus-reader")).await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(TOKEN_SECONDS), ..Default::default() }),
        ..Default::default()
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let granted = accounts.create_token_request(READER, &Default::default(), &request).await?;
    granted.status.and_then(|s| s.token).context("the API server gave no token")
}

/// Whether `GET /-/ready` answers 200.
async fn is_ready(port: u16) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { return false };
    let request = "GET /-/ready HTTP/1.1\r\nHost: prometheus\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.is_ok() && response.starts_with(b"HTTP/1.1 200 ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's promtool accepts the configuration, with the rules file of `deploy/`.
    #[test]
    fn promtool_accepts_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let targets = dir.path().join("targets.json");
        std::fs::write(&targets, "[]").unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "a-token").unwrap();
        let rules = rules_file(&crate::install::default_deploy_dir()).canonicalize().unwrap();
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config(&targets, &token, &rules)).unwrap();
        let output = std::process::Command::new("promtool")
            .args(["check", "config"])
            .arg(&file)
            .output()
            .expect("running promtool (Debian's prometheus package: bash hack/setup.sh)");
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{said}");
        assert!(said.contains(&format!("Checking {}", rules.display())) && said.contains("SUCCESS"), "{said}");
    }

    fn pod(name: &str, app: &str, phase: &str, ports: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": MCO_NAMESPACE, "labels": {"k8s-app": app}},
            "spec": {"nodeName": "worker-0", "containers": [{"name": app, "ports": ports}]},
            "status": {"phase": phase, "podIP": "10.200.1.5"},
        }))
        .unwrap()
    }

    #[test]
    fn targets_are_running_mco_pods_metrics_ports_labelled_as_the_pod_monitor_does() {
        let metrics = json!([{"name": "health", "containerPort": 8798}, {"name": "metrics", "containerPort": 8797}]);
        let pods = [
            pod("machine-config-daemon-x", "machine-config-daemon", "Running", metrics.clone()),
            pod("machine-config-daemon-pending", "machine-config-daemon", "Pending", metrics.clone()),
            pod("web-1", "web", "Running", metrics.clone()),
            pod("machine-config-server-y", "machine-config-server", "Running", json!([{"containerPort": 22623}])),
        ];
        assert_eq!(
            targets(&pods),
            json!([{
                "targets": ["10.200.1.5:8797"],
                "labels": {
                    "namespace": MCO_NAMESPACE,
                    "pod": "machine-config-daemon-x",
                    "container": "machine-config-daemon",
                    "node": "worker-0",
                },
            }])
        );
    }
}
