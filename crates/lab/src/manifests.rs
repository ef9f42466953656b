//! The objects a new lab cluster starts with, as an installer would create them: the operator's
//! namespace, the ControllerConfig naming the OS image, the built-in `master` and `worker` pools,
//! each role's base MachineConfig, and what the boot image controller reads (the Infrastructure
//! and a ClusterVersion whose install completed, with their CRDs). Pure: the images and
//! addresses come in, objects go out.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use mco_api::constants::{
    CONTROLLER_CONFIG_NAME, GENERATED_BY_VERSION_ANNOTATION, MACHINE_CONFIG_ROLE_LABEL, MASTER_POOL, MCFG_API_VERSION,
    MCO_NAMESPACE, RELEASE_IMAGE_VERSION_ANNOTATION, WORKER_POOL, default_pools,
};
use serde_json::{Value, json};

/// Release version the lab's ControllerConfig and rendered configs carry.
pub const LAB_RELEASE: &str = "4.22.0-mco-lab";
/// `config.openshift.io` objects the boot image controller reads.
const CONFIG_API_VERSION: &str = "config.openshift.io/v1";
/// Kernel argument every lab node gets from its base config (proves the firstboot pivot applied kargs).
pub const LAB_KARG: &str = "mco.lab=1";

/// What the cluster's objects depend on.
#[derive(Debug, Clone)]
pub struct ClusterInputs<'a> {
    /// The pinned OS image every pool runs (`HOST/NAME@sha256:…`).
    pub os_image: &'a str,
    /// `127.0.0.1:<port>` of the lab registry, which speaks plain HTTP.
    pub registry: &'a str,
    /// `generated-by-version` the controller expects (its raw version).
    pub controller_version_raw: &'a str,
}

/// The objects, in creation order (after [`config_crds`] are established).
pub fn cluster_objects(inputs: &ClusterInputs) -> Vec<Value> {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MCO_NAMESPACE}}),
        controller_config(inputs),
    ];
    objects.extend(default_pools().iter().map(|pool| serde_json::to_value(pool).expect("pools serialize")));
    objects.extend([MASTER_POOL, WORKER_POOL].map(|role| base_config(role, inputs.registry)));
    // A machine without a cloud (no MachineSets to manage): skew enforcement is Manual at the
    // install version unless the admin says otherwise.
    objects.push(json!({
        "apiVersion": CONFIG_API_VERSION,
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "status": {"platformStatus": {"type": "None"}, "controlPlaneTopology": "HighlyAvailable"},
    }));
    objects.push(json!({
        "apiVersion": CONFIG_API_VERSION,
        "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "status": {
            "desired": {"version": LAB_RELEASE},
            "history": [{"version": LAB_RELEASE, "state": "Completed"}],
        },
    }));
    objects
}

/// CRDs for the `config.openshift.io` kinds the lab creates: schemaless, no status subresource
/// (the lab writes their status like an installer; nothing else reconciles them).
pub fn config_crds() -> Vec<Value> {
    vec![
        mco_testenv::config_openshift_crd("Infrastructure", "infrastructures"),
        mco_testenv::config_openshift_crd("ClusterVersion", "clusterversions"),
    ]
}

fn controller_config(inputs: &ClusterInputs) -> Value {
    json!({
        "apiVersion": MCFG_API_VERSION,
        "kind": "ControllerConfig",
        "metadata": {
            "name": CONTROLLER_CONFIG_NAME,
            "annotations": {
                GENERATED_BY_VERSION_ANNOTATION: inputs.controller_version_raw,
                RELEASE_IMAGE_VERSION_ANNOTATION: LAB_RELEASE,
            },
        },
        "spec": {
            "baseOSContainerImage": inputs.os_image,
            "osImageURL": "",
            "releaseImage": format!("{}/mco/release:{LAB_RELEASE}", inputs.registry),
        },
    })
}

/// `00-<role>`: the registry settings every node needs to pull the OS image, a role marker, a
/// kubelet unit, and the lab kernel argument.
fn base_config(role: &str, registry: &str) -> Value {
    let registries_conf = format!("[[registry]]\nlocation = \"{registry}\"\ninsecure = true\n");
    let file = |path: &str, contents: &str, mode: u32| {
        json!({
            "path": path,
            "mode": mode,
            "overwrite": true,
            "contents": {"source": format!("data:;base64,{}", STANDARD.encode(contents))},
        })
    };
    let kubelet = "[Unit]\nDescription=Kubernetes Kubelet (lab)\n\n[Service]\nExecStart=/usr/bin/kubelet\n\n\
                   [Install]\nWantedBy=multi-user.target\n";
    json!({
        "apiVersion": MCFG_API_VERSION,
        "kind": "MachineConfig",
        "metadata": {"name": format!("00-{role}"), "labels": {MACHINE_CONFIG_ROLE_LABEL: role}},
        "spec": {
            "config": {
                "ignition": {"version": "3.5.0"},
                "storage": {"files": [
                    file("/etc/containers/registries.conf", &registries_conf, 0o644),
                    file("/etc/mco-lab/role", &format!("{role}\n"), 0o644),
                ]},
                "systemd": {"units": [{"name": "kubelet.service", "enabled": true, "contents": kubelet}]},
            },
            "kernelArguments": [LAB_KARG],
        },
    })
}

#[cfg(test)]
mod tests {
    use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool};

    use super::*;

    fn inputs() -> ClusterInputs<'static> {
        ClusterInputs {
            os_image: "127.0.0.1:5000/mco/node@sha256:0000000000000000000000000000000000000000000000000000000000000000",
            registry: "127.0.0.1:5000",
            controller_version_raw: "v0.1.0-mco",
        }
    }

    fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    #[test]
    fn objects_are_valid_api_objects_in_creation_order() {
        let objects = cluster_objects(&inputs());
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ControllerConfig",
                "MachineConfigPool",
                "MachineConfigPool",
                "MachineConfig",
                "MachineConfig",
                "Infrastructure",
                "ClusterVersion"
            ]
        );
        let cc: ControllerConfig =
            serde_json::from_value(named(&objects, "ControllerConfig", "machine-config-controller").clone()).unwrap();
        assert_eq!(cc.spec.base_os_container_image.as_deref(), Some(inputs().os_image));
        for pool in ["master", "worker"] {
            let pool: MachineConfigPool =
                serde_json::from_value(named(&objects, "MachineConfigPool", pool).clone()).unwrap();
            assert!(mco_api::validate::machine_config_pool(&pool).is_empty());
        }
    }

    #[test]
    fn the_boot_image_controller_sees_a_completed_install_without_a_cloud() {
        let objects = cluster_objects(&inputs());
        let infrastructure: mco_bootimage::Infrastructure =
            serde_json::from_value(named(&objects, "Infrastructure", "cluster").clone()).unwrap();
        assert!(!infrastructure.boot_image_support().supported);
        assert!(!infrastructure.is_single_replica());
        let version: mco_bootimage::skew::ClusterVersion =
            serde_json::from_value(named(&objects, "ClusterVersion", "version").clone()).unwrap();
        assert_eq!(version.install_version(), "4.22.0");
        assert_eq!(version.docs_version(), "4.22");
        let crds = config_crds();
        let crds: Vec<&str> = crds.iter().map(|c| c["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(crds, ["infrastructures.config.openshift.io", "clusterversions.config.openshift.io"]);
    }

    #[test]
    fn base_configs_let_nodes_pull_from_the_lab_registry() {
        let objects = cluster_objects(&inputs());
        for role in ["master", "worker"] {
            let mc: MachineConfig =
                serde_json::from_value(named(&objects, "MachineConfig", &format!("00-{role}")).clone()).unwrap();
            let labels = mc.metadata.labels.as_ref().unwrap();
            assert_eq!(labels[MACHINE_CONFIG_ROLE_LABEL], role);
            assert_eq!(mc.spec.kernel_arguments.as_deref(), Some(&[LAB_KARG.to_string()][..]));
            let config = mco_render::merge::validate_machine_config(&mc).unwrap().unwrap();
            let registries = config.storage.files.iter().find(|f| f.path == "/etc/containers/registries.conf").unwrap();
            let source = registries.contents.source.as_deref().unwrap();
            assert_eq!(
                String::from_utf8(mco_ignition::dataurl::decode(source).unwrap().data).unwrap(),
                "[[registry]]\nlocation = \"127.0.0.1:5000\"\ninsecure = true\n"
            );
        }
    }
}
