//! The kubelet config and container runtime config controllers against a real API server
//! (mco-testenv): a KubeletConfig and a ContainerRuntimeConfig get exactly the MachineConfigs the
//! offline generation (`mco render`) computes, with upstream's owner, finalizer and conditions; a
//! refused KubeletConfig gets upstream's failure condition and no MachineConfig; the render
//! controller renders the pool with them once they are synced; deleting one takes its
//! MachineConfig with it.

use std::path::PathBuf;
use std::time::Duration;

use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, ResourceExt};
use mco_api::machineconfiguration::config_condition;
use mco_api::{ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool};
use mco_controller::kubeletconfig::{Options, run};
use mco_kubeletconfig::{ClusterSettings, Offline};
use mco_render::ControllerVersion;
use mco_testenv::{TestEnv, eventually, satisfying};
use serde::de::DeserializeOwned;
use serde_json::json;

fn example<T: DeserializeOwned>(file: &str) -> T {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster").join(file);
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn version() -> ControllerVersion {
    ControllerVersion { raw: "v0.0.0-was-not-built-properly".into(), hash: "was-not-built-properly".into() }
}

fn object<T: DeserializeOwned>(kind: &str, name: &str, spec: serde_json::Value) -> T {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn selecting(pool: &str) -> serde_json::Value {
    json!({"matchLabels": {format!("pools.operator.machineconfiguration.openshift.io/{pool}"): ""}})
}

async fn create<T>(client: &Client, object: &T) -> T
where
    T: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    Api::<T>::all(client.clone()).create(&PostParams::default(), object).await.unwrap()
}

/// Waits until MachineConfig `name` exists; returns it.
async fn generated(client: &Client, name: &str) -> MachineConfig {
    let api = Api::<MachineConfig>::all(client.clone());
    eventually(&format!("MachineConfig {name}"), || async {
        let names: Vec<String> = api.list(&Default::default()).await.unwrap().iter().map(|mc| mc.name_any()).collect();
        api.get_opt(name).await.unwrap().ok_or(names)
    })
    .await
}

/// What `mco render` generates offline from the same pools and config objects.
fn offline(pools: &[MachineConfigPool], kcs: &[KubeletConfig], crcs: &[ContainerRuntimeConfig]) -> Vec<MachineConfig> {
    let controller_config: ControllerConfig = example("controllerconfig.yaml");
    let settings = ClusterSettings::default();
    let offline = Offline {
        controller_config: &controller_config,
        pools,
        controller_version: &version().hash,
        kubelet: settings.kubelet_inputs(),
        additional_storage: settings.additional_storage(),
    };
    mco_kubeletconfig::generate(&offline, Vec::new(), kcs, crcs).machine_configs
}

#[tokio::test]
async fn config_objects_generate_what_render_generates_and_take_it_away_when_deleted() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let pools: Vec<MachineConfigPool> =
        ["master-pool.yaml", "worker-pool.yaml"].into_iter().map(example::<MachineConfigPool>).collect();
    for pool in &pools {
        create(&client, pool).await;
    }
    create::<ControllerConfig>(&client, &example("controllerconfig.yaml")).await;
    env.mark_controller_config_completed().await.unwrap();
    create::<MachineConfig>(&client, &example("00-worker.yaml")).await;
    let mut registry = mco_metrics::Registry::default();
    let metrics = mco_metrics::controller::ControllerMetrics::register(&mut registry);
    tokio::spawn(run(client.clone(), version(), Options { retry_delay: Duration::from_millis(500), metrics }));
    let render = mco_controller::render::controller::Options {
        render_delay: Duration::from_millis(200),
        retry_delay: Duration::from_millis(500),
        ..Default::default()
    };
    tokio::spawn(mco_controller::render::controller::run(client.clone(), version(), render));

    let max_pods: KubeletConfig = object(
        "KubeletConfig",
        "max-pods",
        json!({"machineConfigPoolSelector": selecting("worker"), "kubeletConfig": {"maxPods": 42}}),
    );
    let pids: ContainerRuntimeConfig = object(
        "ContainerRuntimeConfig",
        "pids",
        json!({"machineConfigPoolSelector": selecting("worker"), "containerRuntimeConfig": {"pidsLimit": 2048}}),
    );
    let created_kc = create(&client, &max_pods).await;
    let created_crc = create(&client, &pids).await;
    let expected = offline(&pools, std::slice::from_ref(&created_kc), std::slice::from_ref(&created_crc));

    // Exactly what render generates offline, owned by its config object, which holds it by a
    // finalizer and says it succeeded.
    for (name, owner_uid) in
        [("99-worker-generated-kubelet", created_kc.uid()), ("99-worker-generated-containerruntime", created_crc.uid())]
    {
        let mc = generated(&client, name).await;
        let wanted = expected.iter().find(|mc| mc.name_any() == name).unwrap();
        assert_eq!((&mc.spec, mc.labels(), mc.annotations()), (&wanted.spec, wanted.labels(), wanted.annotations()));
        let owners = mc.owner_references();
        assert_eq!(owners.iter().map(|o| Some(o.uid.clone())).collect::<Vec<_>>(), [owner_uid], "{owners:?}");
    }
    let kcs = Api::<KubeletConfig>::all(client.clone());
    let synced = eventually("KubeletConfig max-pods accepted", || async {
        let kc = kcs.get("max-pods").await.unwrap();
        let conditions = kc.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        let types: Vec<(String, Option<String>)> =
            conditions.iter().map(|c| (c.type_.clone(), c.status.clone())).collect();
        let wanted = [
            (config_condition::ACCEPTED.to_string(), Some("True".to_string())),
            (config_condition::SUCCESS.to_string(), Some("True".to_string())),
        ];
        satisfying(kc, |_| types == wanted)
    })
    .await;
    assert_eq!(synced.finalizers(), ["99-worker-generated-kubelet"]);
    assert_eq!(synced.status.as_ref().and_then(|s| s.observed_generation), synced.metadata.generation);
    let crc = Api::<ContainerRuntimeConfig>::all(client.clone()).get("pids").await.unwrap();
    assert_eq!(crc.finalizers(), ["99-worker-generated-containerruntime"]);
    // Each controller recorded its sync of the worker pool, as upstream's.
    eventually("both controllers' sub-controller states for the worker pool", || async {
        let text = mco_metrics::render(&registry);
        let recorded: Vec<&str> = text.lines().filter(|l| l.starts_with("mcc_sub_controller_state{")).collect();
        let synced = |subcontroller: &str, state: &str| {
            let series = format!(
                "mcc_sub_controller_state{{subcontroller=\"{subcontroller}\",state=\"{state}\",object=\"worker\"}} "
            );
            recorded.iter().any(|l| l.starts_with(&series))
        };
        let both = synced("machine-config-controller-kubelet-config", "Sync Kubelet Config")
            && synced("machine-config-controller-container-runtime-config", "Sync Container Runtime Config");
        let recorded: Vec<String> = recorded.iter().map(|l| l.to_string()).collect();
        if both { Ok(()) } else { Err(recorded) }
    })
    .await;
    // The worker pool renders with both, once both are synced.
    let pools_api = Api::<MachineConfigPool>::all(client.clone());
    eventually("the worker pool rendered with the generated MachineConfigs", || async {
        let configuration = pools_api.get("worker").await.unwrap().spec.configuration;
        let sources: Vec<String> =
            configuration.iter().flat_map(|c| c.source.iter().flatten()).filter_map(|s| s.name.clone()).collect();
        let wanted = ["00-worker", "99-worker-generated-containerruntime", "99-worker-generated-kubelet"];
        satisfying(sources, |sources| *sources == wanted)
    })
    .await;

    // Refused as upstream refuses it: the failure condition, no MachineConfig for the pool.
    let refused: KubeletConfig = object(
        "KubeletConfig",
        "cgroups",
        json!({"machineConfigPoolSelector": selecting("master"), "kubeletConfig": {"cgroupDriver": "cgroupfs"}}),
    );
    create(&client, &refused).await;
    let message = eventually("KubeletConfig cgroups refused", || async {
        let conditions = kcs.get("cgroups").await.unwrap().status.and_then(|s| s.conditions).unwrap_or_default();
        let failure = conditions.iter().find(|c| c.type_ == config_condition::FAILURE).and_then(|c| c.message.clone());
        failure.ok_or(conditions)
    })
    .await;
    assert_eq!(message, "Error: KubeletConfiguration: cgroupDriver is not allowed to be set, but contains: cgroupfs");
    let machine_configs = Api::<MachineConfig>::all(client.clone());
    assert!(machine_configs.get_opt("99-master-generated-kubelet").await.unwrap().is_none());

    // Deleted: its MachineConfig goes, then (its finalizer removed) the KubeletConfig itself.
    kcs.delete("max-pods", &DeleteParams::default()).await.unwrap();
    eventually("the KubeletConfig and its MachineConfig gone", || async {
        let kc = kcs.get_opt("max-pods").await.unwrap().map(|kc| kc.finalizers().to_vec());
        let mc = machine_configs.get_opt("99-worker-generated-kubelet").await.unwrap().map(|mc| mc.name_any());
        satisfying((kc, mc), |seen| *seen == (None, None))
    })
    .await;
    assert!(machine_configs.get_opt("99-worker-generated-containerruntime").await.unwrap().is_some());
}
