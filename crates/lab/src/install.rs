//! Installs mco in the lab the way an administrator installs it on a cluster: mco's image, built by
//! `hack/image.sh` from the lab's own `mco` binary and pushed to the lab registry, and the
//! manifests of `deploy/` (its `overlays/lab`) applied with the real kubectl, in an overlay of the
//! lab's own that pins the image by digest.

use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fn_error_context::context;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::{Api, Client};
use mco_api::constants::MCO_NAMESPACE;

use crate::images::REGISTRY_ALIAS;
use crate::layout::Layout;
use crate::process::run_tool;

/// The repository's `deploy/` directory, as this binary was built from it.
pub fn default_deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// How long mco's pods get to be pulled, started and Ready after `kubectl apply`.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
/// mco's controller Deployment and daemon DaemonSet (upstream's names).
const CONTROLLER_DEPLOYMENT: &str = "machine-config-controller";
const DAEMON_DAEMONSET: &str = "machine-config-daemon";
const SERVER_DAEMONSET: &str = "machine-config-server";
/// The server's serving certificate (upstream's name).
const SERVER_TLS_SECRET: &str = "machine-config-server-tls";
/// The overlay last applied, beside its kustomization.yaml (what `mco lab install` starts from).
const OVERLAY_FILE: &str = "overlay.json";

/// What the lab's overlay sets on top of `deploy/overlays/lab`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overlay {
    /// `sha256:…` of mco's image in the lab registry.
    pub digest: String,
    /// Written into the kubeconfig the server hands to new machines.
    pub apiserver_url: String,
    /// The cluster has MachineSets: add `components/machine-api`.
    pub machine_api: bool,
}

/// The overlay's kustomization.yaml, in a directory whose path relative to `deploy/` is
/// `to_deploy` (kustomize refuses absolute paths to other kustomizations).
pub fn kustomization(overlay: &Overlay, to_deploy: &Path) -> String {
    let to = |dir: &str| to_deploy.join(dir).display().to_string();
    let components = if overlay.machine_api {
        format!("components:\n  - {}\n", to("components/machine-api"))
    } else {
        String::new()
    };
    format!(
        "# Written by `mco lab up`: deploy/overlays/lab with the lab's image and API server.\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\n\
         kind: Kustomization\n\
         resources:\n  - {lab}\n\
         {components}\
         images:\n  - name: mco\n    newName: {REGISTRY_ALIAS}/mco/mco\n    digest: {digest}\n\
         configMapGenerator:\n  - name: machine-config-server-settings\n    namespace: openshift-machine-config-operator\n    \
         behavior: merge\n    literals:\n      - apiserver-url={url}\n",
        lab = to("overlays/lab"),
        digest = overlay.digest,
        url = overlay.apiserver_url,
    )
}

/// `to` as a path relative to the directory `from` (both absolute, without `..`).
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path: PathBuf = std::iter::repeat_n(Component::ParentDir, from.len() - common).collect();
    path.extend(&to[common..]);
    path
}

/// Builds the userlands of mco's image (`hack/image.sh --userland-only`) and of the lab's OS images
/// (`--node-userland`: mco's image's with systemd and what a node runs beside it), both cached,
/// before the lab's network namespace, from which Debian's mirror cannot be reached
/// ([`Layout::userland`]).
#[context("Preparing the userland of mco's image and of the lab's OS images")]
pub async fn prepare_userland(deploy: &Path, layout: &Layout) -> anyhow::Result<()> {
    let script = deploy.join("../hack/image.sh");
    let log = layout.log("images");
    let build = |which: &'static str| run_tool(Path::new("bash"), [script.as_os_str(), which.as_ref()], &[], &log);
    let (_, out) = tokio::try_join!(build("--userland-only"), build("--node-userland"))?;
    let cached = Path::new(out.lines().last().context("hack/image.sh printed no path")?.trim());
    let userland = layout.userland();
    std::fs::create_dir_all(layout.images())?;
    match std::fs::hard_link(cached, &userland) {
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            let partial = userland.with_extension("tar.partial");
            std::fs::copy(cached, &partial).with_context(|| format!("copying {}", cached.display()))?;
            std::fs::rename(&partial, &userland)?;
        }
        linked => linked.with_context(|| format!("linking {} to {}", cached.display(), userland.display()))?,
    }
    Ok(())
}

/// Builds mco's image from `mco` with `hack/image.sh` beside `deploy` (labelled with `version` if
/// given, else the binary's), pushes it to the lab registry (`registry`: `127.0.0.1:PORT`) and
/// returns its digest.
#[context("Building mco's image")]
pub async fn build_image(
    mco: &Path,
    deploy: &Path,
    layout: &Layout,
    registry: &str,
    version: Option<&str>,
) -> anyhow::Result<String> {
    let script = deploy.join("../hack/image.sh");
    let to = format!("docker://{registry}/mco/mco:lab");
    let conf = layout.registries_conf();
    let args = [script.as_os_str(), mco.as_os_str(), to.as_ref()];
    let mut env = vec![("CONTAINERS_REGISTRIES_CONF", conf.as_os_str())];
    if let Some(version) = version {
        env.push(("MCO_IMAGE_VERSION", version.as_ref()));
    }
    let digest = run_tool(Path::new("bash"), args, &env, &layout.log("images")).await?;
    Ok(digest.trim().to_string())
}

/// The kubectl of the lab's Kubernetes version (built with its other binaries).
pub fn kubectl() -> anyhow::Result<PathBuf> {
    let [kubectl] = mco_testenv::find_binaries(["kubectl"])?;
    Ok(kubectl)
}

/// The overlay the lab applied last.
#[context("Reading the lab's installation ({OVERLAY_FILE})")]
pub fn applied_overlay(layout: &Layout) -> anyhow::Result<Overlay> {
    let text = std::fs::read_to_string(layout.dir.join("install").join(OVERLAY_FILE))?;
    Ok(serde_json::from_str(&text)?)
}

/// Writes the lab's overlay into the lab directory and applies it with `kubectl`.
#[context("Installing mco from {}", deploy.display())]
pub async fn apply(
    kubectl: &Path,
    kubeconfig: &Path,
    deploy: &Path,
    layout: &Layout,
    overlay: &Overlay,
) -> anyhow::Result<()> {
    let dir = layout.dir.join("install");
    std::fs::create_dir_all(&dir)?;
    let dir = dir.canonicalize()?;
    let deploy = deploy.canonicalize().with_context(|| format!("finding {}", deploy.display()))?;
    std::fs::write(dir.join("kustomization.yaml"), kustomization(overlay, &relative_path(&dir, &deploy)))?;
    let args =
        ["--kubeconfig".as_ref(), kubeconfig.as_os_str(), "apply".as_ref(), "--kustomize".as_ref(), dir.as_os_str()];
    run_tool(kubectl, args, &[], &layout.log("install")).await?;
    std::fs::write(dir.join(OVERLAY_FILE), serde_json::to_vec_pretty(overlay)?)?;
    Ok(())
}

/// Waits until every replica of the controller's Deployment is available and of its current template.
pub async fn wait_controller(client: &Client) -> anyhow::Result<()> {
    wait_available(client, CONTROLLER_DEPLOYMENT, deployment_available).await
}

/// Waits until a server's pod of the DaemonSet's current template is available on each of
/// `masters` control-plane nodes.
pub async fn wait_servers(client: &Client, masters: usize) -> anyhow::Result<()> {
    wait_available(client, SERVER_DAEMONSET, |ds| daemonset_available(ds, masters)).await
}

/// The server's serving certificate Secret from PEM files.
pub fn server_tls_secret(cert: &Path, key: &Path) -> anyhow::Result<serde_json::Value> {
    let read = |path: &Path| std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()));
    Ok(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SERVER_TLS_SECRET, "namespace": MCO_NAMESPACE},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": read(cert)?, "tls.key": read(key)?},
    }))
}

/// Waits until a daemon's pod of the DaemonSet's current template is available on each of `nodes` nodes.
pub async fn wait_daemons(client: &Client, nodes: usize) -> anyhow::Result<()> {
    wait_available(client, DAEMON_DAEMONSET, |ds| daemonset_available(ds, nodes)).await
}

/// Waits until `check` finds the workload `name` (in mco's namespace) fully available; says what it
/// saw last otherwise.
async fn wait_available<K>(client: &Client, name: &str, check: impl Fn(&K) -> Result<(), String>) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let deadline = Instant::now() + INSTALL_TIMEOUT;
    loop {
        let seen = check(&api.get(name).await?);
        match seen {
            Ok(()) => return Ok(()),
            Err(seen) if Instant::now() > deadline => {
                anyhow::bail!(
                    "{} {MCO_NAMESPACE}/{name} after {INSTALL_TIMEOUT:?}: {seen}",
                    K::kind(&K::DynamicType::default())
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// Every replica available and of the current template.
fn deployment_available(deployment: &Deployment) -> Result<(), String> {
    let wanted = deployment.spec.replicas.unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    if status.available_replicas.unwrap_or(0) >= wanted && status.updated_replicas.unwrap_or(0) >= wanted {
        return Ok(());
    }
    Err(format!(
        "{} of {wanted} replicas available; conditions: {}",
        status.available_replicas.unwrap_or(0),
        serde_json::to_string(&status.conditions).unwrap_or_default()
    ))
}

/// A pod of the current template available on each of `nodes` nodes (a node that is down has
/// none: it is not counted).
fn daemonset_available(daemonset: &DaemonSet, nodes: usize) -> Result<(), String> {
    let status = daemonset.status.clone().unwrap_or_default();
    let wanted = i32::try_from(nodes).unwrap_or(i32::MAX);
    let (available, updated) = (status.number_available.unwrap_or(0), status.updated_number_scheduled.unwrap_or(0));
    let current = status.observed_generation.is_some() && status.observed_generation >= daemonset.metadata.generation;
    if current && available >= wanted && updated >= wanted {
        return Ok(());
    }
    Err(format!(
        "{available} of {} pods available, {updated} of the current template ({wanted} nodes; generation {:?} \
         observed {:?})",
        status.desired_number_scheduled, daemonset.metadata.generation, status.observed_generation
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_to_the_common_ancestor() {
        let cases =
            [("/a/b/c", "/a/d", "../../d"), ("/a", "/a/b", "b"), ("/a/b", "/a/b", ""), ("/x/y", "/a/b", "../../a/b")];
        for (from, to, want) in cases {
            assert_eq!(relative_path(Path::new(from), Path::new(to)), PathBuf::from(want), "{from} -> {to}");
        }
    }

    #[test]
    fn daemons_are_available_when_every_node_has_one_of_the_current_template() {
        let daemonset = |generation: i64, observed: Option<i64>, available: i32, updated: i32| -> DaemonSet {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "machine-config-daemon", "generation": generation},
                "status": {
                    "observedGeneration": observed, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                    "numberMisscheduled": 0, "numberReady": available, "numberAvailable": available,
                    "updatedNumberScheduled": updated,
                },
            }))
            .unwrap()
        };
        for (generation, observed, available, updated, nodes, want) in [
            (2, Some(2), 3, 3, 3, true),
            (2, Some(2), 2, 3, 3, false),
            (2, Some(2), 3, 2, 3, false),
            // The controller has not seen the new template yet: its counts are the old one's.
            (2, Some(1), 3, 3, 3, false),
            (1, None, 3, 3, 3, false),
            // One node is down: its pod cannot be available.
            (2, Some(2), 2, 2, 2, true),
        ] {
            let got = daemonset_available(&daemonset(generation, observed, available, updated), nodes);
            assert_eq!(got.is_ok(), want, "{generation} {observed:?} {available} {updated} {nodes}: {got:?}");
        }
    }

    #[test]
    fn the_overlay_pins_the_image_and_adds_the_machine_api_only_when_asked() {
        let mut overlay = Overlay {
            digest: "sha256:abc".into(),
            apiserver_url: "https://10.200.0.1:6443".into(),
            machine_api: false,
        };
        let text = kustomization(&overlay, Path::new("../../deploy"));
        assert!(text.contains("resources:\n  - ../../deploy/overlays/lab\n"), "{text}");
        assert!(text.contains("newName: lab-registry.local/mco/mco\n    digest: sha256:abc\n"), "{text}");
        assert!(text.contains("- apiserver-url=https://10.200.0.1:6443\n"), "{text}");
        assert!(!text.contains("components:"), "{text}");
        overlay.machine_api = true;
        let text = kustomization(&overlay, Path::new("../../deploy"));
        assert!(text.contains("components:\n  - ../../deploy/components/machine-api\n"), "{text}");
    }
}
