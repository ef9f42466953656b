//! Installs mco in the lab the way an administrator installs it on a cluster: mco's image, built by
//! `hack/image.sh` from the lab's own `mco` binary and pushed to the lab registry, and the
//! manifests of `deploy/` (its `overlays/lab`) applied with the real kubectl, in an overlay of the
//! lab's own that pins the image by digest.

use std::path::{Component, Path, PathBuf};

use anyhow::Context as _;
use fn_error_context::context;

use crate::images::REGISTRY_ALIAS;
use crate::layout::Layout;
use crate::process::run_tool;

/// The repository's `deploy/` directory, as this binary was built from it.
pub fn default_deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// What the lab's overlay sets on top of `deploy/overlays/lab`.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Builds mco's image from `mco` with `hack/image.sh` beside `deploy`, pushes it to the lab registry
/// (`registry`: `127.0.0.1:PORT`) and returns its digest.
#[context("Building mco's image")]
pub async fn build_image(mco: &Path, deploy: &Path, layout: &Layout, registry: &str) -> anyhow::Result<String> {
    let script = deploy.join("../hack/image.sh");
    let to = format!("docker://{registry}/mco/mco:lab");
    let conf = layout.registries_conf();
    let args = [script.as_os_str(), mco.as_os_str(), to.as_ref()];
    let digest =
        run_tool(Path::new("bash"), args, &[("CONTAINERS_REGISTRIES_CONF", conf.as_os_str())], &layout.log("images"))
            .await?;
    Ok(digest.trim().to_string())
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
    Ok(())
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
