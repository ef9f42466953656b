//! What the kubelet config and container runtime config controllers of a new cluster generate
//! for a set of manifests, for `mco render` and `mco validate` offline: every KubeletConfig, then
//! every ContainerRuntimeConfig, synced once in creation order (then name order), each sync seeing
//! the MachineConfigs, name suffixes and finalizers the earlier ones wrote, as the controllers'
//! queues go through objects created in that order.

use mco_api::constants::MC_NAME_SUFFIX_ANNOTATION;
use mco_api::{ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool};

use crate::common::{Cluster, PoolConfig, Sync};
use crate::kubelet_sync::{KubeletInputs, sync};
use crate::runtime_sync::sync_container_runtime;

/// The cluster the controllers would run in.
#[derive(Debug, Clone, Copy)]
pub struct Offline<'a> {
    pub controller_config: &'a ControllerConfig,
    pub pools: &'a [MachineConfigPool],
    /// The controller's version hash, written on generated MachineConfigs.
    pub controller_version: &'a str,
    pub kubelet: KubeletInputs<'a>,
    /// Whether the `AdditionalStorageConfig` feature gate is on.
    pub additional_storage: bool,
}

/// A config object the controllers refused, with the message of its `Failure` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub kind: &'static str,
    pub name: String,
    pub message: String,
}

/// The MachineConfigs once both controllers have synced everything.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The given MachineConfigs with the generated ones added (replacing any of the same name)
    /// and the ones the controllers delete gone.
    pub machine_configs: Vec<MachineConfig>,
    pub refused: Vec<Refused>,
}

/// Syncs `kubelet_configs`, then `runtime_configs`, over `machine_configs`.
pub fn generate(
    offline: &Offline,
    machine_configs: Vec<MachineConfig>,
    kubelet_configs: &[KubeletConfig],
    runtime_configs: &[ContainerRuntimeConfig],
) -> Generated {
    let mut generated = Generated { machine_configs, refused: Vec::new() };
    sync_each(offline, kubelet_configs, &mut generated, |cluster, kc| sync(cluster, &offline.kubelet, kc));
    sync_each(offline, runtime_configs, &mut generated, |cluster, crc| {
        sync_container_runtime(cluster, offline.additional_storage, crc)
    });
    generated
}

fn sync_each<C: PoolConfig + Clone>(
    offline: &Offline,
    configs: &[C],
    generated: &mut Generated,
    sync_one: impl Fn(&Cluster<C>, &C) -> Sync,
) {
    let mut configs = configs.to_vec();
    configs.sort_by_key(|c| (c.meta().creation_timestamp.as_ref().map(|t| t.0), c.meta().name.clone()));
    for index in 0..configs.len() {
        let cluster = Cluster {
            controller_config: offline.controller_config,
            pools: offline.pools,
            configs: &configs,
            machine_configs: &generated.machine_configs,
            controller_version: offline.controller_version,
        };
        let synced = sync_one(&cluster, &configs[index]);
        let meta = configs[index].meta_mut();
        for mc in synced.machine_configs {
            generated.machine_configs.retain(|existing| existing.metadata.name != mc.metadata.name);
            generated.machine_configs.push(mc);
        }
        generated.machine_configs.retain(|mc| !synced.deletions.iter().any(|d| Some(d) == mc.metadata.name.as_ref()));
        if let Some(suffix) = synced.name_suffix {
            meta.annotations.get_or_insert_default().insert(MC_NAME_SUFFIX_ANNOTATION.to_string(), suffix);
        }
        if let Some(finalizers) = synced.finalizers {
            meta.finalizers = Some(finalizers);
        }
        if let Err(failure) = synced.outcome {
            let name = meta.name.clone().unwrap_or_default();
            generated.refused.push(Refused { kind: C::KIND, name, message: failure.message });
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use serde_json::{Value, json};

    use super::*;
    use crate::FeatureGates;

    /// A testdata case's ControllerConfig and pools (platform None, pools master and worker).
    fn cluster() -> (ControllerConfig, Vec<MachineConfigPool>) {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/kubelet/worker-max-pods/input.yaml");
        let input: Value = mco_goser::yaml_object(&std::fs::read_to_string(path).unwrap()).unwrap();
        (
            serde_json::from_value(input["controllerConfig"].clone()).unwrap(),
            serde_json::from_value(input["pools"].clone()).unwrap(),
        )
    }

    fn object<T: serde::de::DeserializeOwned>(kind: &str, name: &str, spec: Value) -> T {
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap()
    }

    fn kubelet_config(name: &str, kubelet: Value) -> KubeletConfig {
        let worker = json!({"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}});
        object("KubeletConfig", name, json!({"machineConfigPoolSelector": worker, "kubeletConfig": kubelet}))
    }

    /// The file `path` the MachineConfig `name` writes.
    fn file(generated: &Generated, name: &str, path: &str) -> String {
        let mc = generated.machine_configs.iter().find(|mc| mc.metadata.name.as_deref() == Some(name));
        let config = &mc.unwrap_or_else(|| panic!("no {name}")).spec.config.as_ref().unwrap();
        let files = config["storage"]["files"].as_array().unwrap();
        let source = files.iter().find(|f| f["path"] == path).unwrap()["contents"]["source"].as_str().unwrap();
        let encoded = source.split_once("base64,").unwrap().1;
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).unwrap()).unwrap()
    }

    #[test]
    fn syncs_every_config_in_order_each_seeing_the_earlier_ones() {
        let (controller_config, pools) = cluster();
        let gates = FeatureGates::default();
        let offline = Offline {
            controller_config: &controller_config,
            pools: &pools,
            controller_version: "v1",
            kubelet: KubeletInputs { api_server_tls: None, worker_latency_profile: None, feature_gates: &gates },
            additional_storage: false,
        };
        // Given out of order, three for one pool; a generated config of another controller
        // version is deleted.
        let kubelet_configs = [
            kubelet_config("b-max-pods", json!({"maxPods": 42})),
            kubelet_config("a-refused", json!({"cgroupDriver": "cgroupfs"})),
            kubelet_config("0-pods-per-core", json!({"podsPerCore": 7})),
        ];
        let runtime_configs: [ContainerRuntimeConfig; 1] = [object(
            "ContainerRuntimeConfig",
            "pids",
            json!({"machineConfigPoolSelector": {"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}},
                   "containerRuntimeConfig": {"pidsLimit": 2048}}),
        )];
        let mut stale: MachineConfig = object("MachineConfig", "99-worker-generated-kubelet", json!({}));
        stale.metadata.labels = Some([("machineconfiguration.openshift.io/role".into(), "worker".into())].into());
        let base: MachineConfig = object("MachineConfig", "00-worker", json!({}));

        let generated = generate(&offline, vec![base, stale], &kubelet_configs, &runtime_configs);

        let names: Vec<_> = generated.machine_configs.iter().map(|mc| mc.metadata.name.clone().unwrap()).collect();
        assert_eq!(
            names,
            [
                "00-worker",
                "99-worker-generated-kubelet-1",
                "99-worker-generated-kubelet-2",
                "99-worker-generated-containerruntime"
            ]
        );
        // Several for one pool: numbered in name order, each with its own settings only.
        let first = file(&generated, "99-worker-generated-kubelet-1", "/etc/kubernetes/kubelet.conf");
        assert!(first.contains("podsPerCore: 7") && !first.contains("maxPods: 42"), "{first}");
        let second = file(&generated, "99-worker-generated-kubelet-2", "/etc/kubernetes/kubelet.conf");
        assert!(second.contains("maxPods: 42"), "{second}");
        let runtime =
            file(&generated, "99-worker-generated-containerruntime", "/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit");
        assert!(runtime.contains("pids_limit = 2048"), "{runtime}");
        // The first one synced alone writes exactly what the whole pass kept.
        let alone = sync(
            &Cluster {
                controller_config: &controller_config,
                pools: &pools,
                configs: &kubelet_configs,
                machine_configs: &[],
                controller_version: "v1",
            },
            &offline.kubelet,
            &kubelet_configs[2],
        );
        assert_eq!(Some(&alone.machine_configs[0]), generated.machine_configs.get(1));
        assert_eq!(
            generated.refused,
            [Refused {
                kind: "KubeletConfig",
                name: "a-refused".into(),
                message: "Error: KubeletConfiguration: cgroupDriver is not allowed to be set, but contains: cgroupfs"
                    .into(),
            }]
        );
    }
}
