//! The objects a new lab cluster starts with, as an installer would create them: the operator's
//! namespace, the ControllerConfig naming the OS image, the built-in `master` and `worker` pools,
//! each role's base MachineConfig, and what the boot image controller reads (the Infrastructure
//! and a ClusterVersion whose install completed, with their CRDs); on a cloud platform also what
//! its MachineSets need ([`cloud_objects`]). Pure: the images, addresses and stub come in,
//! objects go out.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use fn_error_context::context;
use mco_api::constants::{
    BOOT_IMAGES_CONFIGMAP, BOOT_IMAGES_STREAM_KEY, CONTROLLER_CONFIG_NAME, DISABLE_TEMPLATING_KEY,
    GENERATED_BY_VERSION_ANNOTATION, IMAGE_REFERENCES_KEY, MACHINE_API_NAMESPACE, MACHINE_CONFIG_ROLE_LABEL,
    MASTER_POOL, MCFG_API_VERSION, MCO_NAMESPACE, RELEASE_IMAGE_REFERENCES_CONFIGMAP, RELEASE_IMAGE_VERSION_ANNOTATION,
    RELEASE_VERSION_KEY, USER_DATA_KEY, USER_DATA_SECRET_SUFFIX, WORKER_POOL, default_pools,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Release version the lab's ControllerConfig and rendered configs carry.
pub const LAB_RELEASE: &str = "4.22.0-mco-lab";
/// `config.openshift.io` objects the boot image controller reads.
const CONFIG_API_VERSION: &str = "config.openshift.io/v1";
/// Kernel argument every lab node gets from its base config (proves the firstboot pivot applied kargs).
pub const LAB_KARG: &str = "mco.lab=1";
/// `status.infrastructureName` (the installer's cluster ID, prefix of cloud resource names).
const INFRASTRUCTURE_NAME: &str = "mco-lab";
/// The GCP project and region a `--platform gcp` lab believes it runs in.
pub const GCP_PROJECT_ID: &str = "mco-lab";
pub const GCP_REGION: &str = "us-central1";
/// The boot images a cloud lab's MachineSets should use: real stream metadata as the installer
/// ships it (rhcos-4.16, build 416.94.202405291527-0), shared with mco-bootimage's tests.
pub const BOOT_IMAGES_STREAM: &str = include_str!("../../bootimage/testdata/rhcos-4.16-stream.json");
/// `releaseVersion` of the boot images ConfigMap: the OCP release that shipped
/// [`BOOT_IMAGES_STREAM`]. The boot image controller records it as the cluster's boot image
/// version once every MachineSet uses the stream's images; 4.16.0 is below the lab's release and
/// above the skew limit (4.13.0), as a cluster upgraded since 4.16 with current boot images has.
pub const BOOT_IMAGES_RELEASE: &str = "4.16.0";

/// What the lab's control plane believes it runs on (`mco lab up --platform`). The nodes are lab
/// nodes either way; only the Infrastructure and the objects for MachineSets differ.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// No cloud (upstream's platform `None`): no MachineSets; boot image skew enforcement is
    /// Manual at the install version.
    #[default]
    None,
    /// Google Cloud: the boot image controller manages the MachineSets an admin applies (opted
    /// in by default, skew enforcement Automatic).
    Gcp,
}

impl Platform {
    /// The `--platform` value.
    pub fn name(self) -> &'static str {
        match self {
            Platform::None => "none",
            Platform::Gcp => "gcp",
        }
    }

    /// `status.platformStatus.type` of the Infrastructure.
    fn infrastructure_type(self) -> &'static str {
        match self {
            Platform::None => "None",
            Platform::Gcp => "GCP",
        }
    }

    /// Whether the cluster has Machine API MachineSets, so [`cloud_objects`] belong in it.
    pub fn has_machinesets(self) -> bool {
        self != Platform::None
    }
}

/// What the cluster's objects depend on.
#[derive(Debug, Clone)]
pub struct ClusterInputs<'a> {
    /// The pinned OS image every pool runs (`HOST/NAME@sha256:…`).
    pub os_image: &'a str,
    /// `127.0.0.1:<port>` of the lab registry, which speaks plain HTTP.
    pub registry: &'a str,
    /// `generated-by-version` the controller expects (its raw version).
    pub controller_version_raw: &'a str,
    pub platform: Platform,
    /// The extensions image of [`ClusterInputs::os_image`]'s stream.
    pub extensions_image: &'a str,
    /// The release's other stream: its OS image and extensions image.
    pub other_stream: (&'a str, &'a str),
}

/// The objects, in creation order (after [`config_crds`] are established).
pub fn cluster_objects(inputs: &ClusterInputs) -> Vec<Value> {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MCO_NAMESPACE}}),
        controller_config(inputs),
    ];
    objects.extend(default_pools().iter().map(|pool| serde_json::to_value(pool).expect("pools serialize")));
    objects.extend([MASTER_POOL, WORKER_POOL].map(|role| base_config(role, inputs.registry)));
    objects.push(infrastructure(inputs.platform));
    objects.push(release_image_references(inputs));
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

/// The image configuration kinds, as OpenShift serves them before mco runs: mco's CRDs for them
/// (`deploy/components/image-config`, which the lab overlay applies again).
#[context("Reading the image configuration CRDs under {}", deploy.display())]
pub fn image_config_crds(deploy: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(deploy.join("components/image-config/crds.yaml"))?;
    serde_yaml::Deserializer::from_str(&text).map(|document| Ok(Value::deserialize(document)?)).collect()
}

/// The `cluster` Image (no registry settings), as OpenShift's installer creates it.
pub fn image_config() -> Value {
    json!({"apiVersion": CONFIG_API_VERSION, "kind": "Image", "metadata": {"name": "cluster"}, "spec": {}})
}

/// What a cloud cluster has for its MachineSets before anyone applies one: the Machine API
/// namespace, the `coreos-bootimages` ConfigMap with [`BOOT_IMAGES_STREAM`], and the installer's
/// `worker-user-data` secret holding `worker_stub` (the pointer Ignition config machines boot
/// with), which the boot image controller upgrades before it moves a MachineSet.
pub fn cloud_objects(worker_stub: &str) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MACHINE_API_NAMESPACE}}),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": BOOT_IMAGES_CONFIGMAP, "namespace": MCO_NAMESPACE},
            "data": {BOOT_IMAGES_STREAM_KEY: BOOT_IMAGES_STREAM, RELEASE_VERSION_KEY: BOOT_IMAGES_RELEASE},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": format!("{WORKER_POOL}{USER_DATA_SECRET_SUFFIX}"), "namespace": MACHINE_API_NAMESPACE},
            "data": {USER_DATA_KEY: STANDARD.encode(worker_stub), DISABLE_TEMPLATING_KEY: STANDARD.encode("true\n")},
        }),
    ]
}

/// Infrastructure `cluster` as the installer leaves it on `platform`. Without a cloud the boot
/// image controller manages no MachineSets.
fn infrastructure(platform: Platform) -> Value {
    let type_ = platform.infrastructure_type();
    let (mut platform_spec, mut platform_status) = (json!({"type": type_}), json!({"type": type_}));
    if platform == Platform::Gcp {
        platform_spec["gcp"] = json!({});
        platform_status["gcp"] = json!({"projectID": GCP_PROJECT_ID, "region": GCP_REGION});
    }
    json!({
        "apiVersion": CONFIG_API_VERSION,
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": {"platformSpec": platform_spec},
        "status": {
            "infrastructureName": INFRASTRUCTURE_NAME,
            "platform": type_,
            "platformStatus": platform_status,
            "controlPlaneTopology": "HighlyAvailable",
            "infrastructureTopology": "HighlyAvailable",
        },
    })
}

/// The release's OS images, as its payload's `image-references` names them (tags as upstream's),
/// where the OSImageStream controller finds the streams.
fn release_image_references(inputs: &ClusterInputs) -> Value {
    let tag = |name: &str, image: &str| json!({"name": name, "from": {"kind": "DockerImage", "name": image}});
    let references = json!({
        "kind": "ImageStream",
        "apiVersion": "image.openshift.io/v1",
        "metadata": {"name": LAB_RELEASE},
        "spec": {"tags": [
            tag("rhel-coreos", inputs.os_image),
            tag("rhel-coreos-extensions", inputs.extensions_image),
            tag("rhel-coreos-10", inputs.other_stream.0),
            tag("rhel-coreos-10-extensions", inputs.other_stream.1),
        ]},
    });
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": RELEASE_IMAGE_REFERENCES_CONFIGMAP, "namespace": MCO_NAMESPACE},
        "data": {IMAGE_REFERENCES_KEY: serde_yaml::to_string(&references).expect("JSON values serialize")},
    })
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
            "baseOSExtensionsContainerImage": inputs.extensions_image,
            "osImageURL": "",
            "releaseImage": format!("{}/mco/release:{LAB_RELEASE}", inputs.registry),
            // What the operator copies in: the templates (the kubelet's, for KubeletConfigs) need
            // the platform and the cluster DNS address (in the API server's Service range).
            "infra": infrastructure(inputs.platform),
            "clusterDNSIP": CLUSTER_DNS_IP,
        },
    })
}

/// The address the kubelets give pods as their DNS server (no DNS answers there yet).
const CLUSTER_DNS_IP: &str = "10.0.0.10";

/// The pool's kubelet configuration (`/etc/kubernetes/kubelet.conf`), what upstream's templates
/// write for every node of a pool. What this machine needs of a kubelet (cgroups v1, no
/// CAP_SYS_RESOURCE) and each node's paths and addresses are the lab machine's own drop-in
/// ([`crate::machine`]), so any pool configuration, a KubeletConfig's included, runs here.
pub fn kubelet_config() -> Value {
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true},
            "x509": {"clientCAFile": "/etc/kubernetes/kubelet-ca.crt"},
        },
        "authorization": {"mode": "Webhook"},
        "serializeImagePulls": false,
        "clusterDomain": "cluster.local",
    })
}

/// Where the kubelet reads [`kubelet_config`] and its drop-ins, as upstream's nodes do.
pub const KUBELET_CONFIG: &str = "/etc/kubernetes/kubelet.conf";
pub const KUBELET_CONFIG_DIR: &str = "/etc/kubernetes/kubelet.conf.d";

/// Where a lab machine's own kubelet settings are (its name, address and labels), as upstream's
/// `kubelet.service` reads `/etc/kubernetes/kubelet-env`; written when the machine is installed.
pub const KUBELET_ENV: &str = "/etc/kubernetes/kubelet-env";
/// The kubelet's credentials (`system:node:<name>`), where upstream's kubelets keep theirs.
pub const NODE_KUBECONFIG: &str = "/var/lib/kubelet/kubeconfig";

/// The kubelet's unit, shaped as upstream's template: started after containerd and the
/// dependencies the first boot's OS update comes before, the node's own settings from
/// [`KUBELET_ENV`].
fn kubelet_unit() -> String {
    format!(
        "[Unit]\nDescription=Kubernetes Kubelet (lab)\nRequires=containerd.service kubelet-dependencies.target\n\
         After=containerd.service kubelet-dependencies.target\nAfter=ostree-finalize-staged.service\n\n\
         [Service]\nEnvironmentFile=-{KUBELET_ENV}\n\
         ExecStart=/usr/bin/kubelet --config={KUBELET_CONFIG} --config-dir={KUBELET_CONFIG_DIR} \\\n  \
         --kubeconfig={NODE_KUBECONFIG} --hostname-override=${{KUBELET_NODE_NAME}} \\\n  \
         --node-ip=${{KUBELET_NODE_IP}} --node-labels=${{CUSTOM_KUBELET_LABELS}}\n\
         Restart=always\nRestartSec=10\n\n[Install]\nWantedBy=multi-user.target\n"
    )
}

/// Upstream's `kubelet-dependencies.target` (what a lab machine has of it).
const KUBELET_DEPENDENCIES_UNIT: &str = "[Unit]
Description=Dependencies necessary to run kubelet
Requires=basic.target network-online.target
";

/// Upstream's `machine-config-daemon-firstboot.service`: before the kubelet, while Ignition's
/// copy of the pool's config is there, the daemon completes the first boot (OS image, kernel
/// arguments) and reboots. Upstream runs the daemon from the operator's image; a lab machine
/// runs the binary its firmware shares ([`crate::boot::DAEMON_BINARY`]).
const FIRSTBOOT_UNIT: &str = "[Unit]
Description=Machine Config Daemon Firstboot
ConditionPathExists=/run/ostree-booted
ConditionPathExists=/etc/ignition-machine-config-encapsulated.json
After=network-online.target
Before=kubelet-dependencies.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/run/bin/machine-config-daemon daemon firstboot --root / --sysroot /sysroot --cmdline /proc/cmdline

[Install]
RequiredBy=firstboot-osupdate.target
";

/// Upstream's `firstboot-osupdate.target`.
const FIRSTBOOT_OSUPDATE_UNIT: &str = "[Unit]
Description=The firstboot OS update has completed
Requires=basic.target

[Install]
WantedBy=default.target
";

/// `00-<role>`: the registry settings every node needs to pull the OS image, a role marker, the
/// kubelet's unit and configuration, the first boot's units, and the lab kernel argument.
pub fn base_config(role: &str, registry: &str) -> Value {
    let registries_conf = format!("[[registry]]\nlocation = \"{registry}\"\ninsecure = true\n");
    let file = |path: &str, contents: &str, mode: u32| {
        json!({
            "path": path,
            "mode": mode,
            "overwrite": true,
            "contents": {"source": format!("data:;base64,{}", STANDARD.encode(contents))},
        })
    };
    let unit = |name: &str, contents: &str, enabled: Option<bool>| {
        let mut unit = json!({"name": name, "contents": contents});
        if let Some(enabled) = enabled {
            unit["enabled"] = json!(enabled);
        }
        unit
    };
    let units = [
        unit("kubelet.service", &kubelet_unit(), Some(true)),
        unit("kubelet-dependencies.target", KUBELET_DEPENDENCIES_UNIT, None),
        unit("machine-config-daemon-firstboot.service", FIRSTBOOT_UNIT, Some(true)),
        unit("firstboot-osupdate.target", FIRSTBOOT_OSUPDATE_UNIT, Some(true)),
    ];
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
                    file(KUBELET_CONFIG, &kubelet_config().to_string(), 0o644),
                ]},
                "systemd": {"units": units},
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
            platform: Platform::None,
            extensions_image: "127.0.0.1:5000/mco/extensions@sha256:1111111111111111111111111111111111111111111111111111111111111111",
            other_stream: (
                "127.0.0.1:5000/mco/node@sha256:2222222222222222222222222222222222222222222222222222222222222222",
                "127.0.0.1:5000/mco/extensions@sha256:3333333333333333333333333333333333333333333333333333333333333333",
            ),
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
                "ConfigMap",
                "ClusterVersion"
            ]
        );
        let cc: ControllerConfig =
            serde_json::from_value(named(&objects, "ControllerConfig", "machine-config-controller").clone()).unwrap();
        assert_eq!(cc.spec.base_os_container_image.as_deref(), Some(inputs().os_image));
        assert_eq!(serde_json::to_value(&cc.spec.infra).unwrap()["status"]["platformStatus"]["type"], "None");
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
    fn the_platform_is_what_the_infrastructure_says() {
        use mco_bootimage::platform::Platform as BootImagePlatform;
        let gcp = json!({"projectID": GCP_PROJECT_ID, "region": GCP_REGION});
        for (platform, name, type_, managed, gcp_status) in [
            (Platform::None, "none", "None", None, Value::Null),
            (Platform::Gcp, "gcp", "GCP", Some(BootImagePlatform::Gcp), gcp),
        ] {
            let objects = cluster_objects(&ClusterInputs { platform, ..inputs() });
            let raw = named(&objects, "Infrastructure", "cluster");
            assert_eq!(raw["status"]["platformStatus"]["gcp"], gcp_status, "{platform:?}");
            assert_eq!(raw["spec"]["platformSpec"]["type"], type_, "{platform:?}");
            let infrastructure: mco_bootimage::Infrastructure = serde_json::from_value(raw.clone()).unwrap();
            assert_eq!(infrastructure.platform_type(), type_);
            let support = infrastructure.boot_image_support();
            assert_eq!(support.platform, managed, "{platform:?}");
            assert_eq!(support.supported, platform.has_machinesets(), "{platform:?}");
            assert!(!infrastructure.is_single_replica());
            // The lab state and `--platform` spell it the same way.
            assert_eq!(platform.name(), name);
            assert_eq!(serde_json::to_value(platform).unwrap(), name);
            // The ControllerConfig holds a copy of it, as the operator makes it; the rest of the
            // cluster does not depend on the platform.
            assert_eq!(&named(&objects, "ControllerConfig", CONTROLLER_CONFIG_NAME)["spec"]["infra"], raw);
            let others = |objects: &[Value]| -> Vec<Value> {
                let mut others: Vec<Value> =
                    objects.iter().filter(|o| o["kind"] != "Infrastructure").cloned().collect();
                for object in &mut others {
                    if let Some(spec) = object["spec"].as_object_mut() {
                        spec.remove("infra");
                    }
                }
                others
            };
            assert_eq!(others(&objects), others(&cluster_objects(&inputs())));
        }
    }

    #[test]
    fn cloud_objects_hold_boot_images_the_controller_accepts_and_the_worker_stub() {
        use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
        use mco_bootimage::skew::{OcpVersion, ocp_limit};

        let stub = r#"{"ignition":{"config":{"merge":[{"source":"https://127.0.0.1:22623/config/worker"}]},"version":"3.5.0"}}"#;
        let objects = cloud_objects(stub);
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Namespace", "ConfigMap", "Secret"]);
        let namespace: Namespace = serde_json::from_value(objects[0].clone()).unwrap();
        assert_eq!(namespace.metadata.name.as_deref(), Some(MACHINE_API_NAMESPACE));

        let configmap: ConfigMap = serde_json::from_value(objects[1].clone()).unwrap();
        assert_eq!(
            (configmap.metadata.name.as_deref(), configmap.metadata.namespace.as_deref()),
            (Some(BOOT_IMAGES_CONFIGMAP), Some(MCO_NAMESPACE))
        );
        let data = configmap.data.unwrap();
        let stream = mco_bootimage::Stream::parse(data[BOOT_IMAGES_STREAM_KEY].as_bytes()).unwrap();
        assert_eq!(
            stream.gcp_image(mco_bootimage::Arch::X86_64).unwrap(),
            "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64"
        );
        // What the controller records once every MachineSet is current: readable, not too old
        // for upgrades, not newer than the cluster.
        let release = OcpVersion::parse(&data[RELEASE_VERSION_KEY]).unwrap();
        assert!(release >= ocp_limit() && release <= OcpVersion::parse(LAB_RELEASE).unwrap(), "{release}");

        let secret: Secret = serde_json::from_value(objects[2].clone()).unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("worker-user-data"));
        assert_eq!(secret.metadata.namespace.as_deref(), Some(MACHINE_API_NAMESPACE));
        let data = secret.data.clone().unwrap();
        assert_eq!(data[USER_DATA_KEY].0, stub.as_bytes());
        assert_eq!(data[DISABLE_TEMPLATING_KEY].0, b"true\n");
        // A spec 3 stub: the controller has nothing to upgrade before it moves a MachineSet.
        let upgraded = mco_bootimage::stub::upgrade_user_data_secret(&secret, mco_ignition::Target::V3_5, "now");
        assert_eq!(upgraded.unwrap(), None);
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
