//! The OSImageStream controller against a real API server and a real registry on loopback: the
//! release's OS and extensions images (labelled as upstream's are) become the streams of the
//! OSImageStream `cluster`, a tag recorded by its digest; the pools render from the default
//! stream; the admin's default stream moves them; a deleted object comes back.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use mco_api::constants::{
    IMAGE_REFERENCES_KEY, MCO_NAMESPACE, RELEASE_IMAGE_REFERENCES_CONFIGMAP, RELEASE_IMAGE_VERSION_ANNOTATION,
};
use mco_api::{MachineConfig, MachineConfigPool, OSImageStream};
use mco_controller::{osimagestream, render};
use mco_os::registry::{LocalRegistry, registries_conf_text};
use mco_render::ControllerVersion;
use mco_testenv::{TestEnv, eventually, satisfying};
use serde_json::json;

use crate::images;
use images::{push_buildah_image, worker_file};

fn version() -> ControllerVersion {
    ControllerVersion { raw: "v0.0.0-was-not-built-properly".into(), hash: "was-not-built-properly".into() }
}

fn stream_names(stream: &OSImageStream) -> Vec<(String, String, String)> {
    let status = stream.status.clone().unwrap_or_default();
    status.available_streams.into_iter().map(|s| (s.name, s.os_image, s.os_extensions_image)).collect()
}

async fn rendered_image(pools: &Api<MachineConfigPool>, mcs: &Api<MachineConfig>, pool: &str) -> Option<String> {
    let target = pools.get(pool).await.unwrap().spec.configuration.and_then(|c| c.name)?;
    Some(mcs.get_opt(&target).await.unwrap()?.spec.os_image_url)
}

#[tokio::test]
async fn the_releases_labelled_images_become_the_clusters_os_image_streams() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let host = registry.host();
    let os_labels =
        |stream: &'static str| [format!("io.openshift.os.streamclass={stream}"), "containers.bootc=1".into()];
    let ext_labels = |stream: &'static str| {
        [format!("io.openshift.os.streamclass={stream}"), "io.openshift.os.extensions=true".into()]
    };
    let push = |name_tag: &str, labels: &[String]| {
        let config: Vec<&str> = labels.iter().flat_map(|label| ["--label", label.as_str()]).collect();
        push_buildah_image(tmp.path(), &registry, name_tag, &config)
    };
    let os9 = format!("{host}/os@{}", push("os:9", &os_labels("rhel-9")));
    let ext9 = format!("{host}/ext@{}", push("ext:9", &ext_labels("rhel-9")));
    let os10 = format!("{host}/os@{}", push("os:10", &os_labels("rhel-10")));
    let ext10 = format!("{host}/ext@{}", push("ext:10", &ext_labels("rhel-10")));
    let unlabelled = format!("{host}/plain@{}", push("plain:1", &["purpose=none".into()]));

    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    env.create_manifests(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster"))
        .await
        .unwrap();
    env.mark_controller_config_completed().await.unwrap();
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    // The nodes' registries configuration (the registry is plain HTTP), as a MachineConfig gives it.
    let registries =
        worker_file("50-worker-registries", "/etc/containers/registries.conf", &registries_conf_text(registry.port));
    mcs.create(&PostParams::default(), &registries).await.unwrap();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": MCO_NAMESPACE}})).unwrap();
    let _ = Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await;
    // The release's image-references: the rhel-10 OS image by tag, and images of other kinds.
    let tag = |name: &str, image: &str| json!({"name": name, "from": {"kind": "DockerImage", "name": image}});
    let references = json!({"kind": "ImageStream", "apiVersion": "image.openshift.io/v1", "spec": {"tags": [
        tag("rhel-coreos", &os9), tag("rhel-coreos-extensions", &ext9),
        tag("rhel-coreos-10", &format!("{host}/os:10")), tag("rhel-coreos-10-extensions", &ext10),
        tag("rhel-coreos-unlabelled", &unlabelled), tag("machine-config-operator", &format!("{host}/mco:1")),
    ]}});
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": RELEASE_IMAGE_REFERENCES_CONFIGMAP, "namespace": MCO_NAMESPACE},
        "data": {IMAGE_REFERENCES_KEY: serde_yaml::to_string(&references).unwrap()},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), MCO_NAMESPACE)
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();

    let render_options = render::controller::Options {
        render_delay: Duration::from_millis(500),
        retry_delay: Duration::from_millis(500),
        ..Default::default()
    };
    let renders = tokio::spawn(render::controller::run(client.clone(), version(), render_options));
    let options = osimagestream::Options {
        retry_delay: Duration::from_millis(500),
        rescan: Duration::from_secs(2),
        ..Default::default()
    };
    let streams_controller = tokio::spawn(osimagestream::run(client.clone(), version(), options));
    let streams: Api<OSImageStream> = Api::all(client.clone());
    let pools: Api<MachineConfigPool> = Api::all(client.clone());

    // The streams, each image by digest (the tag pinned); the ControllerConfig's images (in no
    // registry) and the unlabelled image are left out; rhel-9 is the default of a 4.x release.
    let expected =
        vec![("rhel-10".to_string(), os10.clone(), ext10.clone()), ("rhel-9".to_string(), os9.clone(), ext9.clone())];
    let stream = eventually("the OSImageStream with both streams", || async {
        let stream = streams.get_opt("cluster").await.unwrap();
        satisfying(stream, |s| s.as_ref().is_some_and(|s| stream_names(s) == expected))
    })
    .await
    .unwrap();
    assert_eq!(stream.spec.default_stream, "rhel-9");
    assert_eq!(stream.status.as_ref().unwrap().default_stream, "rhel-9");
    assert_eq!(stream.annotations().get(RELEASE_IMAGE_VERSION_ANNOTATION), Some(&version().hash));

    // The pools render from the default stream.
    for pool in ["master", "worker"] {
        eventually(&format!("pool {pool} on the rhel-9 image"), || async {
            satisfying(rendered_image(&pools, &mcs, pool).await, |image| image.as_deref() == Some(os9.as_str()))
        })
        .await;
    }

    // The admin's default stream: the status follows, the pools move.
    let default_10 = json!({"spec": {"defaultStream": "rhel-10"}});
    streams.patch("cluster", &PatchParams::default(), &Patch::Merge(&default_10)).await.unwrap();
    eventually("status.defaultStream rhel-10", || async {
        let status = streams.get("cluster").await.unwrap().status.unwrap_or_default();
        satisfying(status.default_stream, |d| d == "rhel-10")
    })
    .await;
    eventually("the worker pool on the rhel-10 image", || async {
        satisfying(rendered_image(&pools, &mcs, "worker").await, |image| image.as_deref() == Some(os10.as_str()))
    })
    .await;
    // A default the cluster does not offer is refused by the API server (the CRD's rule).
    let unknown = json!({"spec": {"defaultStream": "centos-10"}});
    let refused = streams.patch("cluster", &PatchParams::default(), &Patch::Merge(&unknown)).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("spec.defaultStream must reference an existing stream name from status.availableStreams"),
        "{refused}"
    );

    // Deleted, it comes back from the sources (with the release's default again).
    streams.delete("cluster", &Default::default()).await.unwrap();
    eventually("the OSImageStream made again", || async {
        let stream = streams.get_opt("cluster").await.unwrap();
        satisfying(stream, |s| {
            s.as_ref().is_some_and(|s| stream_names(s) == expected && s.spec.default_stream == "rhel-9")
        })
    })
    .await;
    renders.abort();
    streams_controller.abort();
}
