//! The image configuration controller against a real API server (mco-testenv, which serves the
//! image configuration kinds from mco's CRDs): upstream's e2e case (an ImageContentSourcePolicy
//! with one digest mirror) becomes each built-in pool's `99-<pool>-generated-registries` with the
//! mirror in registries.conf, owned by the Image `cluster`; nothing for a pool that is not built in;
//! a pool's own registries.conf is the base of its file; a digest mirror set adds its mirrors;
//! deleting both takes the mirrors away.

use std::path::PathBuf;

use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, ResourceExt};
use mco_api::image_config::{Image, ImageContentSourcePolicy, ImageDigestMirrorSet};
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool};
use mco_controller::registries::run;
use mco_ignition::v3;
use mco_render::ControllerVersion;
use mco_testenv::{TestEnv, eventually, satisfying};
use serde::de::DeserializeOwned;
use serde_json::json;

fn example<T: DeserializeOwned>(file: &str) -> T {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(file);
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn create<T>(client: &Client, object: &T) -> T
where
    T: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    Api::<T>::all(client.clone()).create(&PostParams::default(), object).await.unwrap()
}

/// The files of MachineConfig `name` (path → contents), `None` while it does not exist.
async fn files_of(api: &Api<MachineConfig>, name: &str) -> Option<Vec<(String, String)>> {
    let mc = api.get_opt(name).await.unwrap()?;
    let config: v3::Config = serde_json::from_value(mc.spec.config.unwrap_or_default()).unwrap();
    let files = config.storage.files.iter().map(|f| {
        let contents = mco_ignition::dataurl::decode_contents(&f.contents).unwrap();
        (f.path.clone(), String::from_utf8(contents).unwrap())
    });
    Some(files.collect())
}

const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

#[tokio::test]
async fn mirror_policies_become_each_built_in_pools_registries_files() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    for pool in ["master-pool.yaml", "worker-pool.yaml", "infra-pool.yaml"] {
        create(&client, &example::<MachineConfigPool>(&format!("cluster/{pool}"))).await;
    }
    create(&client, &example::<ControllerConfig>("cluster/controllerconfig.yaml")).await;
    let version = ControllerVersion { raw: "v0.0.0-test".into(), hash: "test-version".into() };
    let controller =
        tokio::spawn(run(client.clone(), version, std::time::Duration::from_millis(200), Default::default()));

    // Upstream's TestICSPConfigMirror policy, before the Image config exists.
    let policy: ImageContentSourcePolicy = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1alpha1", "kind": "ImageContentSourcePolicy",
        "metadata": {"name": "icsp-test-digest-only"},
        "spec": {"repositoryDigestMirrors": [
            {"source": "registry.access.redhat.com/ubi8/icsp-ubi-minimal", "mirrors": ["mirror.com/ubi8/ubi-minimal"]},
        ]},
    }))
    .unwrap();
    create(&client, &policy).await;
    let image = create(&client, &example::<Image>("image-config/image.yaml")).await;

    let mcs = Api::<MachineConfig>::all(client.clone());
    for pool in ["master", "worker"] {
        let name = format!("99-{pool}-generated-registries");
        let files = eventually(&format!("{name} with the policy's mirror"), || async {
            let files = files_of(&mcs, &name).await;
            satisfying(files, |f| {
                f.as_ref().is_some_and(|f| {
                    f.iter().any(|(path, text)| path == REGISTRIES_CONF && text.contains("mirror.com/ubi8/ubi-minimal"))
                })
            })
        })
        .await
        .unwrap();
        let (_, conf) = files.iter().find(|(path, _)| path == REGISTRIES_CONF).unwrap();
        assert!(
            conf.contains("location = \"registry.access.redhat.com/ubi8/icsp-ubi-minimal\"")
                && conf.contains("pull-from-mirror = \"digest-only\""),
            "{conf}"
        );
        let mc = mcs.get(&name).await.unwrap();
        assert_eq!(mc.labels().get("machineconfiguration.openshift.io/role").map(String::as_str), Some(pool));
        let owner = &mc.owner_references()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Image", image.uid().unwrap().as_str()));
    }
    // infra is no built-in pool: it inherits worker's configs.
    assert!(mcs.get_opt("99-infra-generated-registries").await.unwrap().is_none());

    // The worker pool's own registries.conf is the base of its generated one (and not master's).
    let own = "[[registry]]\nlocation = \"own.example.com\"\ninsecure = true\n";
    let config = json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
        {"path": REGISTRIES_CONF, "contents": {"source": mco_testenv::data_url(own)}, "mode": 420},
    ]}});
    create(&client, &MachineConfig::for_pool("00-worker-registries", "worker", Some(config))).await;
    eventually("99-worker-generated-registries on the worker pool's own registries.conf", || async {
        let files = files_of(&mcs, "99-worker-generated-registries").await.unwrap_or_default();
        satisfying(files, |f| {
            f.iter().any(|(_, text)| text.contains("own.example.com") && text.contains("mirror.com/ubi8/ubi-minimal"))
        })
    })
    .await;
    let master = files_of(&mcs, "99-master-generated-registries").await.unwrap();
    assert!(master.iter().all(|(_, text)| !text.contains("own.example.com")), "{master:?}");

    // A digest mirror set for the same source joins the policy's mirrors.
    let set: ImageDigestMirrorSet = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": {"name": "more"},
        "spec": {"imageDigestMirrors": [
            {"source": "registry.access.redhat.com/ubi8/icsp-ubi-minimal", "mirrors": ["second.example.com/ubi"]},
        ]},
    }))
    .unwrap();
    create(&client, &set).await;
    eventually("99-worker-generated-registries with both mirrors", || async {
        let files = files_of(&mcs, "99-worker-generated-registries").await.unwrap_or_default();
        satisfying(files, |f| {
            f.iter().any(|(_, text)| text.contains("second.example.com/ubi") && text.contains("mirror.com/ubi8"))
        })
    })
    .await;

    // With neither, nothing is configured: the generated configs stay, without files.
    let params = DeleteParams::default();
    Api::<ImageContentSourcePolicy>::all(client.clone()).delete(&policy.name_any(), &params).await.unwrap();
    Api::<ImageDigestMirrorSet>::all(client.clone()).delete("more", &params).await.unwrap();
    for pool in ["master", "worker"] {
        let name = format!("99-{pool}-generated-registries");
        eventually(&format!("{name} without files"), || async {
            satisfying(files_of(&mcs, &name).await, |f| f.as_ref().is_some_and(Vec::is_empty))
        })
        .await;
    }
    controller.abort();
}
