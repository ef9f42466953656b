use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::machineconfiguration::ContainerfileArch;
use serde_json::{Value, json};

use super::*;

fn config(spec: Value) -> MachineOSConfig {
    let mut full = json!({
        "machineConfigPool": {"name": "layered"},
        "imageBuilder": {"imageBuilderType": "Job"},
        "renderedImagePushSecret": {"name": "push-secret"},
        "renderedImagePushSpec": "registry.example.com:5000/org/os:latest",
    });
    full.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
    serde_json::from_value(json!({"metadata": {"name": "layered", "uid": "c-1"}, "spec": full})).unwrap()
}

fn pool(rendered: &str) -> MachineConfigPool {
    serde_json::from_value(json!({
        "metadata": {"name": "layered"},
        "spec": {"configuration": {"name": rendered, "source": [{"kind": "MachineConfig", "name": "00-layered"}]}}
    }))
    .unwrap()
}

fn rendered(name: &str, files: Value) -> MachineConfig {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"machineconfiguration.openshift.io/release-image-version": "4.99.0"}},
        "spec": {
            "osImageURL": "registry.example.com:5000/os@sha256:aaaa",
            "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": files}}
        }
    }))
    .unwrap()
}

fn now() -> Time {
    serde_json::from_value(json!("2026-11-26T12:00:00Z")).unwrap()
}

fn file(path: &str, contents: &str) -> Value {
    json!({"path": path, "contents": {"source": format!("data:,{contents}")}, "mode": 420})
}

#[test]
fn names_change_with_every_input_and_only_them() {
    let (c, p, r) = (config(json!({})), pool("rendered-layered-1"), rendered("rendered-layered-1", json!([])));
    let base = BuildRequest::new(&c, &p, &r).unwrap().build_name();
    assert!(base.starts_with("layered-") && base.len() == "layered-".len() + 32, "{base}");
    assert_eq!(BuildRequest::new(&c, &p, &r).unwrap().build_name(), base, "the same inputs, the same build");

    let mut paused = p.clone();
    paused.spec.paused = Some(true);
    assert_eq!(BuildRequest::new(&c, &paused, &r).unwrap().build_name(), base, "pausing is not an input");

    let other_pool = pool("rendered-layered-2");
    let content = config(json!({"containerFile": [{"content": "RUN true"}]}));
    let mut other_image = r.clone();
    other_image.spec.os_image_url = "registry.example.com:5000/os@sha256:bbbb".into();
    let mut other_release = r.clone();
    other_release.metadata.annotations.as_mut().unwrap().insert(RELEASE_IMAGE_VERSION_ANNOTATION.into(), "5".into());
    let resolved = &*format!("registry.example.com:5000/os@sha256:{}", "c".repeat(64));
    let mut resolved_again = p.clone();
    resolved_again.metadata.annotations = Some(
        [(
            mco_api::constants::RESOLVED_OS_IMAGE_ANNOTATION.to_string(),
            mco_api::machineconfiguration::resolved_os_image_record("rendered-layered-1", resolved),
        )]
        .into(),
    );
    let request = BuildRequest::new(&c, &resolved_again, &r).unwrap();
    assert!(
        request.containerfile(ContainerfileArch::NoArch).unwrap().contains(&format!("\nFROM {resolved} AS configs\n")),
        "built from the digest resolved again"
    );
    for (what, name) in [
        ("base image resolved again", request.build_name()),
        ("rendered config", BuildRequest::new(&c, &other_pool, &r).unwrap().build_name()),
        ("Containerfile", BuildRequest::new(&content, &p, &r).unwrap().build_name()),
        ("base image", BuildRequest::new(&c, &p, &other_image).unwrap().build_name()),
        ("release version", BuildRequest::new(&c, &p, &other_release).unwrap().build_name()),
    ] {
        assert_ne!(name, base, "a new {what} is a new build");
    }
}

#[test]
fn the_build_is_tagged_with_its_name_and_labelled() {
    let (c, p, r) = (config(json!({})), pool("rendered-layered-1"), rendered("rendered-layered-1", json!([])));
    let request = BuildRequest::new(&c, &p, &r).unwrap();
    let build = request.machine_os_build(&now());
    let name = build.metadata.name.clone().unwrap();
    assert_eq!(build.spec.rendered_image_push_spec, format!("registry.example.com:5000/org/os:{name}"));
    assert_eq!(build.spec.machine_config.name, "rendered-layered-1");
    assert_eq!(build.spec.machine_os_config.name, "layered");
    let labels = build.metadata.labels.unwrap();
    assert_eq!(labels[TARGET_MACHINE_CONFIG_POOL_LABEL], "layered");
    assert_eq!(labels[RENDERED_MACHINE_CONFIG_LABEL], "rendered-layered-1");
    assert_eq!(labels[MACHINE_OS_CONFIG_LABEL], "layered");
    assert_eq!(labels[MACHINE_OS_BUILD_LABEL], name);
    assert_eq!(build.metadata.annotations.unwrap()[RENDERED_IMAGE_PUSH_SECRET_ANNOTATION], "push-secret");
    assert_eq!(build.status.unwrap().build_start, Some(now()));
}

#[test]
fn push_specs_are_checked() {
    let cases = [
        ("registry.example.com/org/os:latest", Ok("registry.example.com/org/os")),
        ("127.0.0.1:5000/os", Ok("127.0.0.1:5000/os")),
        ("localhost/os:v1", Ok("localhost/os")),
        ("10.200.0.1:5000/mco/layered:latest", Ok("10.200.0.1:5000/mco/layered")),
        ("os:latest", Err(())),
        ("org/os:latest", Err(())),
        ("registry.example.com/os@sha256:aaaa", Err(())),
        ("registry.example.com/os:", Err(())),
        ("registry.example.com/", Err(())),
        ("registry.example.com/Os:latest", Err(())),
        ("registry.example.com//os", Err(())),
        ("registry.example.com/os latest", Err(())),
    ];
    for (spec, expected) in cases {
        assert_eq!(push_repository(spec).map_err(|_| ()), expected, "{spec}");
    }
    let bad = config(json!({"renderedImagePushSpec": "os:latest"}));
    let (p, r) = (pool("rendered-layered-1"), rendered("rendered-layered-1", json!([])));
    let error = BuildRequest::new(&bad, &p, &r).unwrap_err().to_string();
    assert!(error.contains("\"os:latest\"") && error.contains("host[:port]/path[:tag]"), "{error}");
}

#[test]
fn inputs_that_cannot_be_built_are_refused() {
    let c = config(json!({}));
    let p = pool("rendered-layered-1");
    let mut no_image = rendered("rendered-layered-1", json!([]));
    no_image.spec.os_image_url.clear();
    assert_eq!(
        BuildRequest::new(&c, &p, &no_image).unwrap_err().to_string(),
        "rendered MachineConfig rendered-layered-1 names no OS image (spec.osImageURL) to build from"
    );
    let not_rendered = rendered("00-worker", json!([]));
    assert_eq!(
        BuildRequest::new(&c, &p, &not_rendered).unwrap_err(),
        RequestError::NotRenderedConfig("00-worker".into())
    );
    let unrendered: MachineConfigPool =
        serde_json::from_value(json!({"metadata": {"name": "layered"}, "spec": {}})).unwrap();
    assert_eq!(
        BuildRequest::pool_target(&unrendered).unwrap_err().to_string(),
        "MachineConfigPool layered has no rendered config yet"
    );
    assert_eq!(BuildRequest::pool_target(&p).unwrap(), "rendered-layered-1");
}

#[test]
fn the_containerfile_bakes_the_config_then_adds_the_admins_content() {
    let files = json!([
        file("/etc/hello", "hi"),
        {"path": "/etc/owned", "contents": {"source": "data:,x"}, "user": {"name": "core"}, "group": {"id": 1000}},
        {"path": "/etc/by-id", "contents": {"source": "data:,x"}, "user": {"id": 42}},
    ]);
    let c = config(json!({"containerFile": [
        {"containerfileArch": "NoArch", "content": "FROM configs AS final\nRUN echo any > /etc/arch"},
        {"containerfileArch": "ARM64", "content": "FROM configs AS final\nRUN echo arm > /etc/arch\n"},
    ]}));
    let (p, r) = (pool("rendered-layered-1"), rendered("rendered-layered-1", files));
    let request = BuildRequest::new(&c, &p, &r).unwrap();
    let name = request.build_name();
    let expected = format!(
        "# Generated by mco for MachineOSBuild {name} (MachineOSConfig layered).\n\
         FROM registry.example.com:5000/os@sha256:aaaa AS configs\n\
         COPY ./machineconfig/ /\n\
         COPY --chown=core:1000 [\"./machineconfig/etc/owned\", \"/etc/owned\"]\n\
         COPY --chown=42 [\"./machineconfig/etc/by-id\", \"/etc/by-id\"]\n\
         LABEL machineconfig=rendered-layered-1\n\
         LABEL machineconfigpool=layered\n\
         LABEL baseOSContainerImage=registry.example.com:5000/os@sha256:aaaa\n\
         \n\
         FROM configs AS final\n\
         RUN echo any > /etc/arch\n"
    );
    assert_eq!(request.containerfile(ContainerfileArch::Amd64).unwrap(), expected, "AMD64 takes the NoArch content");
    let arm = request.containerfile(ContainerfileArch::Arm64).unwrap();
    assert!(arm.ends_with("\nFROM configs AS final\nRUN echo arm > /etc/arch\n"), "{arm}");

    let none = config(json!({}));
    let plain = BuildRequest::new(&none, &p, &r).unwrap().containerfile(ContainerfileArch::Amd64).unwrap();
    assert!(plain.ends_with("LABEL baseOSContainerImage=registry.example.com:5000/os@sha256:aaaa\n"), "{plain}");

    let refused = |file: Value| {
        let r = rendered("rendered-layered-1", json!([file]));
        BuildRequest::new(&none, &p, &r).unwrap().containerfile(ContainerfileArch::Amd64).unwrap_err().to_string()
    };
    let expands = "control characters or characters COPY would expand ($ * ? [ \\)";
    let cases = [
        (
            json!({"path": "/etc/x", "contents": {"source": "data:,x"}, "user": {"name": "core\nRUN evil"}}),
            "file \"/etc/x\" has an owner the image build cannot name: \"core\\nRUN evil\"".to_string(),
        ),
        (
            json!({"path": "/etc/x\nRUN evil", "contents": {"source": "data:,x"}, "user": {"name": "core"}}),
            format!("file path \"/etc/x\\nRUN evil\" of an owner other than root has {expands}"),
        ),
        (
            json!({"path": "/etc/a[1]", "contents": {"source": "data:,x"}, "group": {"id": 7}}),
            format!("file path \"/etc/a[1]\" of an owner other than root has {expands}"),
        ),
        (
            json!({"path": "/etc/$HOME", "contents": {"source": "data:,x"}, "user": {"id": 7}}),
            format!("file path \"/etc/$HOME\" of an owner other than root has {expands}"),
        ),
    ];
    for (file, error) in cases {
        assert_eq!(refused(file), format!("rendered MachineConfig rendered-layered-1: {error}"));
    }
    let root_owned = json!({"path": "/etc/a[1]", "contents": {"source": "data:,x"}});
    let r = rendered("rendered-layered-1", json!([root_owned]));
    assert!(BuildRequest::new(&none, &p, &r).unwrap().containerfile(ContainerfileArch::Amd64).is_ok(), "no COPY line");
    let twice =
        config(json!({"containerFile": [{"content": "RUN a"}, {"containerfileArch": "NoArch", "content": "RUN b"}]}));
    let error = BuildRequest::new(&twice, &p, &r).unwrap().containerfile(ContainerfileArch::Amd64).unwrap_err();
    assert_eq!(
        error.to_string(),
        "MachineOSConfig layered has 2 Containerfiles for NoArch; at most one per architecture"
    );
}

#[test]
fn config_maps_carry_the_inputs_and_the_nodes_container_configuration() {
    let registries = "[[registry]]\nlocation = \"10.200.0.1:5000\"\ninsecure = true\n";
    let encoded: String = registries.bytes().map(|b| format!("%{b:02X}")).collect();
    let files = json!([file("/etc/containers/registries.conf", &encoded), file("/etc/hello", "hi")]);
    let (c, p, r) = (config(json!({})), pool("rendered-layered-1"), rendered("rendered-layered-1", files));
    let request = BuildRequest::new(&c, &p, &r).unwrap();
    let mut build = request.machine_os_build(&now());
    build.metadata.uid = Some("b-1".into());
    let name = build.metadata.name.clone().unwrap();
    let maps = request.config_maps(&build, "mco-ns", ContainerfileArch::Amd64).unwrap();
    let names: Vec<_> = maps.iter().map(|m| m.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, [format!("containerfile-{name}"), format!("mc-{name}"), format!("etc-registries-{name}")]);
    assert_eq!(
        maps[0].data.as_ref().unwrap()["Containerfile"],
        request.containerfile(ContainerfileArch::Amd64).unwrap()
    );
    let gz = &maps[1].binary_data.as_ref().unwrap()["machineconfig.json.gz"].0;
    let mut json = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut json).unwrap();
    assert_eq!(serde_json::from_str::<MachineConfig>(&json).unwrap(), r);
    assert_eq!(maps[2].data.as_ref().unwrap()["registries.conf"], registries);
    for map in &maps {
        let owner = &map.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("MachineOSBuild", name.as_str(), "b-1")
        );
        assert_eq!(map.metadata.namespace.as_deref(), Some("mco-ns"));
        let labels = map.metadata.labels.as_ref().unwrap();
        assert!(labels.contains_key(EPHEMERAL_BUILD_OBJECT_LABEL) && labels.contains_key(ON_CLUSTER_LAYERING_LABEL));
    }
}

#[test]
fn the_job_runs_the_builder_with_every_input_mounted() {
    let registries = file("/etc/containers/registries.conf", "x");
    let c = config(json!({"baseImagePullSecret": {"name": "pull-secret"}}));
    let (p, r) = (pool("rendered-layered-1"), rendered("rendered-layered-1", json!([registries])));
    let request = BuildRequest::new(&c, &p, &r).unwrap();
    let mut build = request.machine_os_build(&now());
    build.metadata.uid = Some("b-1".into());
    let name = build.metadata.name.clone().unwrap();
    let maps = request.config_maps(&build, "mco-ns", ContainerfileArch::Amd64).unwrap();
    let on_host = BuildPod { host_network: true, scratch_in_memory: false };
    let job = request.job(&build, "mco-ns", "registry.example.com/mco@sha256:cccc", on_host, &maps);
    assert_eq!(job.metadata.name.as_deref(), Some(format!("build-{name}").as_str()));
    let spec = job.spec.unwrap();
    assert_eq!(spec.backoff_limit, Some(0));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some(BUILDER_SERVICE_ACCOUNT));
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(pod.host_network, Some(true));
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some("registry.example.com/mco@sha256:cccc"));
    let args = container.args.clone().unwrap().join(" ");
    assert_eq!(
        args,
        format!(
            "image build-machine-os --machine-config /etc/mco-build/mc/machineconfig.json.gz \
             --containerfile /etc/mco-build/containerfile/Containerfile \
             --to registry.example.com:5000/org/os:{name} \
             --pull-authfile /etc/mco-build/base-pull-creds/config.json \
             --push-authfile /etc/mco-build/push-creds/config.json --termination-log /dev/termination-log"
        )
    );
    let mounts: Vec<_> = container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.as_str(), m.mount_path.as_str(), m.sub_path.as_deref()))
        .collect();
    assert_eq!(
        mounts,
        [
            ("containerfile", "/etc/mco-build/containerfile", None),
            ("mc", "/etc/mco-build/mc", None),
            ("etc-registries", "/etc/containers/registries.conf", Some("registries.conf")),
            ("base-pull-creds", "/etc/mco-build/base-pull-creds", None),
            ("push-creds", "/etc/mco-build/push-creds", None),
            ("scratch", "/var/tmp", None),
        ]
    );
    let volumes = pod.volumes.unwrap();
    let secret = |v: &str| volumes.iter().find(|x| x.name == v).unwrap().secret.clone().unwrap().secret_name.unwrap();
    assert_eq!((secret("base-pull-creds").as_str(), secret("push-creds").as_str()), ("pull-secret", "push-secret"));
    let map = |v: &str| volumes.iter().find(|x| x.name == v).unwrap().config_map.clone().unwrap().name;
    assert_eq!(map("etc-registries"), format!("etc-registries-{name}"));
    let scratch_medium = |volumes: &[Volume]| {
        let scratch = volumes.iter().find(|x| x.name == "scratch").unwrap();
        scratch.empty_dir.clone().unwrap().medium
    };
    assert_eq!(scratch_medium(&volumes), None, "buildah's storage on the node's disk, as upstream's");

    let without_pull_secret = config(json!({}));
    let request = BuildRequest::new(&without_pull_secret, &p, &r).unwrap();
    let in_memory = BuildPod { host_network: false, scratch_in_memory: true };
    let job = request.job(&build, "mco-ns", "mco", in_memory, &maps);
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.host_network, None);
    assert_eq!(scratch_medium(pod.volumes.as_deref().unwrap()).as_deref(), Some("Memory"));
    let args = pod.containers[0].args.clone().unwrap().join(" ");
    assert!(!args.contains("base-pull-creds") && !args.contains("--pull-authfile"), "{args}");
    assert!(args.contains("--push-authfile /etc/mco-build/push-creds/config.json"), "{args}");
}

#[test]
fn empty_pool_configuration_fields_hash_as_go_omits_them() {
    let (c, r) = (config(json!({})), rendered("rendered-layered-1", json!([])));
    let pool_with = |configuration: Value| -> MachineConfigPool {
        serde_json::from_value(json!({"metadata": {"name": "layered"}, "spec": {"configuration": configuration}}))
            .unwrap()
    };
    let bare: MachineConfigPool = serde_json::from_value(json!({"metadata": {"name": "layered"}, "spec": {}})).unwrap();
    let expected = BuildRequest { config: &c, pool: &pool_with(json!({})), rendered: &r }.build_name();
    for pool in [bare, pool_with(json!({"name": ""})), pool_with(json!({"source": []}))] {
        assert_eq!(BuildRequest { config: &c, pool: &pool, rendered: &r }.build_name(), expected, "{pool:?}");
    }
}
