//! What the OS image tests share: images pushed to a real registry with buildah, and worker
//! MachineConfigs writing a file (the nodes' registries configuration, a policy, a drop-in).

use std::path::Path;

use mco_api::MachineConfig;
use mco_os::registry::LocalRegistry;
use mco_testenv::{containerd, data_url};
use serde_json::json;

/// Pushes an image built with buildah from scratch, configured with `config` (`buildah config`
/// flags), as `HOST/NAME:TAG`; returns its digest.
pub fn push_buildah_image(dir: &Path, registry: &LocalRegistry, name_tag: &str, config: &[&str]) -> String {
    containerd::push_buildah_image(dir, &registry.host(), &registry.registries_conf, name_tag, config, None)
}

/// A MachineConfig of the worker role writing `contents` to `path`.
pub fn worker_file(name: &str, path: &str, contents: &str) -> MachineConfig {
    let source = data_url(contents);
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [{
            "path": path, "mode": 420, "contents": {"source": source},
        }]}}},
    }))
    .unwrap()
}
