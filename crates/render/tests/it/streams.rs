//! Rendering from OS image streams: the basic-worker conformance case rendered with an
//! OSImageStream takes its base OS image from the pool's stream; an `osImageURL` override wins
//! over the default stream and is refused with a stream the pool names (upstream's message).

use std::fs;
use std::path::Path;

use mco_api::constants::{OS_IMAGE_URL_OVERRIDDEN_ANNOTATION, RELEASE_IMAGE_VERSION_ANNOTATION};
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool, OSImageStream};
use mco_render::{ControllerVersion, Inputs, RenderError, Rendered, StorageOverrides, Streams, render};
use serde_json::json;

const VERSION_HASH: &str = "was-not-built-properly";

fn case() -> (MachineConfigPool, ControllerConfig, Vec<MachineConfig>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/render/basic-worker/input");
    let yaml = |name: &str| fs::read_to_string(dir.join(name)).unwrap();
    let mut names: Vec<_> = fs::read_dir(dir.join("machineconfigs")).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    let mcs = names.iter().map(|p| serde_yaml::from_str(&fs::read_to_string(p).unwrap()).unwrap()).collect();
    (
        serde_yaml::from_str(&yaml("pool.yaml")).unwrap(),
        serde_yaml::from_str(&yaml("controllerconfig.yaml")).unwrap(),
        mcs,
    )
}

fn image(name: &str, digit: char) -> String {
    format!("quay.io/openshift/{name}@sha256:{}", digit.to_string().repeat(64))
}

fn os_image_stream() -> OSImageStream {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "OSImageStream",
        "metadata": {"name": "cluster", "annotations": {RELEASE_IMAGE_VERSION_ANNOTATION: VERSION_HASH}},
        "spec": {"defaultStream": "rhel-9"},
        "status": {"defaultStream": "rhel-9", "availableStreams": [
            {"name": "rhel-9", "osImage": image("os-9", '9'), "osExtensionsImage": image("ext-9", '9')},
            {"name": "rhel-10", "osImage": image("os-10", 'a'), "osExtensionsImage": image("ext-10", 'a')},
        ]},
    }))
    .unwrap()
}

fn render_with(
    pool: &MachineConfigPool,
    cc: &ControllerConfig,
    mcs: &[MachineConfig],
    stream: Option<&OSImageStream>,
) -> Result<Rendered, RenderError> {
    let version = ControllerVersion { raw: "v0.0.0-was-not-built-properly".into(), hash: VERSION_HASH.into() };
    render(Inputs {
        pool,
        machine_configs: mcs,
        controller_config: cc,
        version: &version,
        current: None,
        storage_overrides: StorageOverrides::default(),
        streams: Streams { os_image_stream: stream, worker_pool: None },
        offline: false,
    })
}

fn overridden(rendered: &Rendered) -> Option<&String> {
    rendered.machine_config.metadata.annotations.as_ref()?.get(OS_IMAGE_URL_OVERRIDDEN_ANNOTATION)
}

#[test]
fn pools_render_from_their_streams_images() {
    let (mut pool, cc, mcs) = case();
    let stream = os_image_stream();
    let without = render_with(&pool, &cc, &mcs, None).unwrap();
    assert_eq!(Some(&without.machine_config.spec.os_image_url), cc.spec.base_os_container_image.as_ref());

    // The default stream.
    let default = render_with(&pool, &cc, &mcs, Some(&stream)).unwrap();
    let spec = &default.machine_config.spec;
    assert_eq!(spec.os_image_url, image("os-9", '9'));
    assert_eq!(spec.base_os_extensions_container_image, image("ext-9", '9'));
    assert_eq!(default.base_os_image, image("os-9", '9'));
    assert_eq!(overridden(&default), None, "the stream's image is no override");
    assert_ne!(default.machine_config.metadata.name, without.machine_config.metadata.name);

    // The stream the pool names.
    pool.spec.os_image_stream = Some(mco_api::machineconfiguration::NameReference { name: "rhel-10".into() });
    let named = render_with(&pool, &cc, &mcs, Some(&stream)).unwrap();
    assert_eq!(named.machine_config.spec.os_image_url, image("os-10", 'a'));
    assert_eq!(overridden(&named), None);
}

#[test]
fn an_os_image_override_wins_over_the_default_stream_and_is_refused_with_a_named_one() {
    let (mut pool, cc, mut mcs) = case();
    let stream = os_image_stream();
    let custom = image("custom", 'c');
    let override_mc: MachineConfig = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-worker-os", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"osImageURL": custom},
    }))
    .unwrap();
    mcs.push(override_mc);
    let rendered = render_with(&pool, &cc, &mcs, Some(&stream)).unwrap();
    assert_eq!(rendered.machine_config.spec.os_image_url, custom);
    assert_eq!(overridden(&rendered).map(String::as_str), Some("true"));

    pool.spec.os_image_stream = Some(mco_api::machineconfiguration::NameReference { name: "rhel-10".into() });
    let refused = render_with(&pool, &cc, &mcs, Some(&stream)).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "could not generate rendered MachineConfig: cannot override MachineConfig osImageURL and set \
         MachineConfigPool spec.osImageStream.name simultaneously"
    );
}

fn crio_drop_in(name: &str, path: &str, toml: &str) -> MachineConfig {
    use base64::Engine as _;
    let source = format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(toml));
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
            {"path": path, "mode": 420, "contents": {"source": source}},
        ]}}},
    }))
    .unwrap()
}

#[test]
fn runc_is_refused_in_a_pool_on_a_rhel_10_stream() {
    let (mut pool, cc, mut mcs) = case();
    let stream = os_image_stream();
    let runc = "[crio.runtime]\ndefault_runtime = \"runc\"\n";
    mcs.push(crio_drop_in("99-worker-runc", "/etc/crio/crio.conf.d/50-runtime", runc));
    render_with(&pool, &cc, &mcs, Some(&stream)).expect("runc is fine on RHEL 9");
    pool.spec.os_image_stream = Some(mco_api::machineconfiguration::NameReference { name: "rhel-10".into() });
    let refused = render_with(&pool, &cc, &mcs, Some(&stream)).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "MachineConfigPool worker targets a RHEL 10 OS image where runc is not available. To unblock, migrate to crun \
         by removing any ContainerRuntimeConfig that sets defaultRuntime to runc, and removing any MachineConfig that \
         sets default_runtime = \"runc\" in CRI-O configuration under /etc/crio/crio.conf.d/"
    );
    // A later drop-in (by path) that sets crun wins; one that sets nothing does not matter.
    mcs.push(crio_drop_in(
        "99-worker-crun",
        "/etc/crio/crio.conf.d/60-runtime",
        "[crio.runtime]\ndefault_runtime = \"crun\"\n",
    ));
    mcs.push(crio_drop_in("99-worker-other", "/etc/crio/crio.conf.d/70-other", "[crio.image]\npause_image = \"x\"\n"));
    render_with(&pool, &cc, &mcs, Some(&stream)).expect("crun set last");
    // A drop-in that is not TOML.
    mcs.push(crio_drop_in("99-worker-broken", "/etc/crio/crio.conf.d/80-broken", "[crio.runtime\n"));
    let broken = render_with(&pool, &cc, &mcs, Some(&stream)).unwrap_err().to_string();
    assert!(
        broken.starts_with(
            "failed to check runc in generated MachineConfig for pool worker: failed to parse TOML from CRI-O drop-in \
             \"/etc/crio/crio.conf.d/80-broken\" in MC \"rendered-worker-"
        ),
        "{broken}"
    );
}
