//! What the OS image tests share: images pushed to a real registry with buildah, and worker
//! MachineConfigs writing a file (the nodes' registries configuration, a policy, a drop-in).

use std::path::Path;
use std::process::Command;

use mco_api::MachineConfig;
use mco_os::registry::LocalRegistry;
use mco_testenv::data_url;
use serde_json::json;

/// Pushes an image built with buildah from scratch, configured with `config` (`buildah config`
/// flags), as `HOST/NAME:TAG`; returns its digest.
pub fn push_buildah_image(dir: &Path, registry: &LocalRegistry, name_tag: &str, config: &[&str]) -> String {
    let storage = dir.join("buildah");
    let buildah = |args: &[&str]| {
        let mut cmd = Command::new("buildah");
        cmd.arg("--root").arg(&storage).arg("--runroot").arg(&storage).args(["--storage-driver", "vfs"]).args(args);
        cmd.env("CONTAINERS_REGISTRIES_CONF", &registry.registries_conf);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let container = buildah(&["from", "scratch"]);
    let container = container.trim();
    let mut configure = vec!["config"];
    configure.extend_from_slice(config);
    configure.push(container);
    buildah(&configure);
    let local = format!("localhost/{name_tag}");
    buildah(&["commit", "--rm", "--format", "oci", container, &local]);
    let digest_file = dir.join("digest");
    let to = format!("docker://{}/{name_tag}", registry.host());
    buildah(&["push", "--digestfile", digest_file.to_str().unwrap(), &local, &to]);
    std::fs::read_to_string(digest_file).unwrap().trim().to_string()
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
