//! The served body: a rendered MachineConfig's Ignition with the files the server adds, converted
//! to the negotiated spec version. Pure: everything it reads is in
//! [`Inputs`].
//!
//! Order of the added files, as upstream: the kubelet CA and cloud CA (replacing the source of a
//! file already at that path), then `/etc/machine-config-daemon/node-annotations.json`,
//! `/etc/kubernetes/kubeconfig`, `/etc/mcs-machine-config-content.json` (the MachineConfig as
//! served, a debug aid), the bootstrap registry CAs (cluster mode: the boot image skew status,
//! which upstream does not have), and last
//! `/etc/ignition-machine-config-encapsulated.json` (the MachineConfig without its Ignition
//! config, which the firstboot service applies: kernel arguments, extensions, OS image).

use std::collections::BTreeMap;

use mco_api::MachineConfig;
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, CURRENT_IMAGE_ANNOTATION, DESIRED_CONFIG_ANNOTATION, DESIRED_IMAGE_ANNOTATION,
    FIRST_PIVOT_CONFIG_ANNOTATION, PRE_BUILT_IMAGE_ANNOTATION, STATE_ANNOTATION, STATE_DONE,
};
use mco_goser::Escaping;
use mco_ignition::convert::{ConvertError, Target};
use mco_ignition::{AnyConfig, v3};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};

pub const KUBELET_CA_PATH: &str = "/etc/kubernetes/kubelet-ca.crt";
pub const CLOUD_PROVIDER_CA_PATH: &str = "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem";
pub const NODE_ANNOTATIONS_PATH: &str = "/etc/machine-config-daemon/node-annotations.json";
pub const KUBECONFIG_PATH: &str = "/etc/kubernetes/kubeconfig";
pub const MACHINE_CONFIG_CONTENT_PATH: &str = "/etc/mcs-machine-config-content.json";
pub const ENCAPSULATED_PATH: &str = "/etc/ignition-machine-config-encapsulated.json";

/// Everything one pool's body is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    /// The rendered config to serve, as stored.
    pub machine_config: MachineConfig,
    /// Name the node annotations seed file carries (the pool's chosen rendered config).
    pub config_name: String,
    /// Contents of `/etc/kubernetes/kubeconfig` (holds a bootstrap token: never log it).
    pub kubeconfig: Vec<u8>,
    /// ControllerConfig `kubeAPIServerServingCAData` and `cloudProviderCAData`.
    pub kubelet_ca: Vec<u8>,
    pub cloud_provider_ca: Vec<u8>,
    /// Files appended after the debug copy (bootstrap: `/etc/docker/certs.d/<host>/ca.crt`;
    /// cluster: the boot image skew status for firstboot).
    pub extra_files: Vec<(String, Vec<u8>)>,
    /// OS image a layered pool's new nodes boot into (cluster mode); empty for none.
    pub desired_image: String,
    /// Cluster mode writes the requested version into the encapsulated MachineConfig's empty
    /// config; bootstrap mode always writes 3.5.0.
    pub encapsulate_requested_version: bool,
}

/// Why a body could not be produced (HTTP 500).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServeError {
    #[error("MachineConfig {name}: parsing Ignition config failed with error: {message}")]
    Parse { name: String, message: String },
    #[error(
        "failed to migrate kernel args Can't serve version {0} with ignition KernelArguments.ShouldNotExist populated"
    )]
    KernelArgsShouldNotExist(Target),
    #[error("MachineConfig {name}: {source}")]
    Convert { name: String, source: ConvertError },
    #[error("serializing the served config: {0}")]
    Serialize(String),
}

/// Builds the body served for `version`.
pub fn build(inputs: &Inputs, version: Target) -> Result<Vec<u8>, ServeError> {
    let name = inputs.machine_config.metadata.name.clone().unwrap_or_default();
    let mut mc = inputs.machine_config.clone();
    let mut config = match &mc.spec.config {
        Some(raw) => mco_ignition::parse_and_convert(raw)
            .map_err(|e| ServeError::Parse { name: name.clone(), message: e.to_string() })?,
        None => v3::Config::new(v3::MAX_VERSION),
    };
    migrate_kernel_args(&mut config, &mut mc, version)?;

    add_or_replace_file(&mut config, KUBELET_CA_PATH, &inputs.kubelet_ca);
    add_or_replace_file(&mut config, CLOUD_PROVIDER_CA_PATH, &inputs.cloud_provider_ca);

    let pre_built = mc.metadata.annotations.as_ref().and_then(|a| a.get(PRE_BUILT_IMAGE_ANNOTATION)).cloned();
    let image = pre_built.filter(|i| !i.is_empty()).unwrap_or_else(|| inputs.desired_image.clone());
    append_file(&mut config, NODE_ANNOTATIONS_PATH, &node_annotations(&inputs.config_name, &image)?);
    if !inputs.desired_image.is_empty() {
        mc.spec.os_image_url = inputs.desired_image.clone();
    }
    append_file(&mut config, KUBECONFIG_PATH, &inputs.kubeconfig);
    append_file(&mut config, MACHINE_CONFIG_CONTENT_PATH, &pretty_json(&mc)?);
    for (path, data) in &inputs.extra_files {
        append_file(&mut config, path, data);
    }
    let encapsulated_version = if inputs.encapsulate_requested_version { version } else { Target::V3_5 };
    append_file(&mut config, ENCAPSULATED_PATH, &encapsulated(mc, encapsulated_version)?);

    let converted = mco_ignition::convert(&config, version).map_err(|source| ServeError::Convert { name, source })?;
    serialize_config(&converted)
}

/// Below 3.3 Ignition has no kernel arguments: they move into the MachineConfig (and so into the
/// encapsulated copy the firstboot service applies). Arguments to remove have nowhere to go.
pub fn migrate_kernel_args(config: &mut v3::Config, mc: &mut MachineConfig, version: Target) -> Result<(), ServeError> {
    if version >= Target::V3_3 {
        return Ok(());
    }
    if !config.kernel_arguments.should_not_exist.is_empty() {
        return Err(ServeError::KernelArgsShouldNotExist(version));
    }
    let kargs = std::mem::take(&mut config.kernel_arguments);
    if !kargs.should_exist.is_empty() {
        mc.spec.kernel_arguments.get_or_insert_default().extend(kargs.should_exist);
    }
    Ok(())
}

/// `addDataAndMaybeAppendToIgnition`: a file already at `path` gets the new contents (if any);
/// otherwise the file is appended when there is data.
fn add_or_replace_file(config: &mut v3::Config, path: &str, data: &[u8]) {
    match config.storage.files.iter_mut().find(|f| f.path == path) {
        Some(file) if !data.is_empty() => file.contents.source = Some(data_url(data)),
        Some(_) => {}
        None if !data.is_empty() => append_file(config, path, data),
        None => {}
    }
}

/// `appendFileToIgnition`: mode 0644, overwrite, contents as a percent-escaped data URL.
fn append_file(config: &mut v3::Config, path: &str, data: &[u8]) {
    config.storage.files.push(v3::File {
        path: path.to_string(),
        overwrite: Some(true),
        contents: v3::Resource { source: Some(data_url(data)), ..Default::default() },
        mode: Some(0o644),
        ..Default::default()
    });
}

/// What Go's `url.PathEscape` leaves alone: unreserved characters and `$&+:=@`.
const PATH_SEGMENT: &AsciiSet =
    &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'$').remove(b'&').remove(b'+');
const PATH_SEGMENT_ALL: &AsciiSet = &PATH_SEGMENT.remove(b':').remove(b'=').remove(b'@');

/// `data:,` + `dataurl.Escape` (Go's `url.PathEscape`), as upstream's `getEncodedContent`.
pub fn data_url(data: &[u8]) -> String {
    let escaped = percent_encoding::percent_encode(data, PATH_SEGMENT_ALL);
    let mut out = String::with_capacity(6 + data.len() * 3 / 2);
    out.push_str("data:,");
    for chunk in escaped {
        out.push_str(chunk);
    }
    out
}

/// The seed the daemon turns into its Node's annotations on first boot (Go map: sorted keys).
fn node_annotations(config_name: &str, image: &str) -> Result<Vec<u8>, ServeError> {
    let mut map = BTreeMap::from([
        (CURRENT_CONFIG_ANNOTATION, config_name),
        (DESIRED_CONFIG_ANNOTATION, config_name),
        (FIRST_PIVOT_CONFIG_ANNOTATION, config_name),
        (STATE_ANNOTATION, STATE_DONE),
    ]);
    if !image.is_empty() {
        map.insert(CURRENT_IMAGE_ANNOTATION, image);
        map.insert(DESIRED_IMAGE_ANNOTATION, image);
    }
    mco_goser::to_go_json(&map, Escaping::Modern).map_err(|e| ServeError::Serialize(e.to_string()))
}

/// `json.MarshalIndent(mc, "", "    ")`.
fn pretty_json(mc: &MachineConfig) -> Result<Vec<u8>, ServeError> {
    let mut out = Vec::new();
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(b"    "));
    serde::Serialize::serialize(mc, &mut serializer).map_err(|e| ServeError::Serialize(e.to_string()))?;
    Ok(out)
}

/// The MachineConfig with an empty Ignition config of `version` in place of its own (what
/// clarketm/json writes for an empty config of any spec: only the version).
fn encapsulated(mut mc: MachineConfig, version: Target) -> Result<Vec<u8>, ServeError> {
    mc.spec.config = Some(serde_json::json!({"ignition": {"version": version.version()}}));
    mco_goser::to_go_json(&mc, Escaping::Modern).map_err(|e| ServeError::Serialize(e.to_string()))
}

/// The converted config as upstream writes it (clarketm/json for spec 3, encoding/json for 2.2).
fn serialize_config(config: &AnyConfig) -> Result<Vec<u8>, ServeError> {
    match config {
        AnyConfig::V3(c) => mco_goser::to_go_json(c, Escaping::Legacy),
        AnyConfig::V2(c) => mco_goser::to_go_json(c, Escaping::Modern),
    }
    .map_err(|e| ServeError::Serialize(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn mc(config: Value) -> MachineConfig {
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-master-abc"},
            "spec": {"config": config, "kernelArguments": ["base=1"], "osImageURL": "quay.io/os@sha256:1"}
        }))
        .unwrap()
    }

    fn inputs(config: Value) -> Inputs {
        Inputs {
            machine_config: mc(config),
            config_name: "rendered-master-abc".into(),
            kubeconfig: b"apiVersion: v1\nkind: Config\n".to_vec(),
            kubelet_ca: b"KUBELET CA\n".to_vec(),
            cloud_provider_ca: Vec::new(),
            extra_files: vec![("/etc/docker/certs.d/registry:5000/ca.crt".into(), b"REG CA".to_vec())],
            desired_image: String::new(),
            encapsulate_requested_version: false,
        }
    }

    fn body(inputs: &Inputs, version: Target) -> Value {
        serde_json::from_slice(&build(inputs, version).unwrap()).unwrap()
    }

    fn decoded(file: &Value) -> Vec<u8> {
        mco_ignition::dataurl::decode(file["contents"]["source"].as_str().unwrap()).unwrap().data
    }

    fn file<'a>(body: &'a Value, path: &str) -> &'a Value {
        body["storage"]["files"].as_array().unwrap().iter().find(|f| f["path"] == path).unwrap()
    }

    fn paths(body: &Value) -> Vec<String> {
        body["storage"]["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap().to_string()).collect()
    }

    fn base_config() -> Value {
        json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
            {"path": "/etc/motd", "contents": {"source": "data:,hello"}, "mode": 420, "overwrite": true}
        ]}})
    }

    #[test]
    fn appended_files_in_upstream_order() {
        let b = body(&inputs(base_config()), Target::V3_3);
        assert_eq!(b["ignition"]["version"], "3.3.0");
        assert_eq!(
            paths(&b),
            [
                "/etc/motd",
                KUBELET_CA_PATH,
                NODE_ANNOTATIONS_PATH,
                KUBECONFIG_PATH,
                MACHINE_CONFIG_CONTENT_PATH,
                "/etc/docker/certs.d/registry:5000/ca.crt",
                ENCAPSULATED_PATH,
            ]
        );
        for path in paths(&b).iter().skip(1) {
            let f = file(&b, path);
            assert_eq!(f["mode"], 420, "{path}");
            assert_eq!(f["overwrite"], true, "{path}");
            assert!(f["contents"]["source"].as_str().unwrap().starts_with("data:,"), "{path}");
        }
        assert_eq!(decoded(file(&b, KUBELET_CA_PATH)), b"KUBELET CA\n");
        assert_eq!(decoded(file(&b, KUBECONFIG_PATH)), b"apiVersion: v1\nkind: Config\n");
        assert_eq!(decoded(file(&b, "/etc/docker/certs.d/registry:5000/ca.crt")), b"REG CA");
        assert_eq!(
            String::from_utf8(decoded(file(&b, NODE_ANNOTATIONS_PATH))).unwrap(),
            r#"{"machineconfiguration.openshift.io/currentConfig":"rendered-master-abc","machineconfiguration.openshift.io/desiredConfig":"rendered-master-abc","machineconfiguration.openshift.io/firstPivotConfig":"rendered-master-abc","machineconfiguration.openshift.io/state":"Done"}"#
        );
    }

    #[test]
    fn debug_copy_and_encapsulated_machine_config() {
        let b = body(&inputs(base_config()), Target::V3_1);
        let debug = decoded(file(&b, MACHINE_CONFIG_CONTENT_PATH));
        assert!(debug.starts_with(b"{\n    \""), "4-space indented JSON");
        let debug: Value = serde_json::from_slice(&debug).unwrap();
        assert_eq!(debug["metadata"]["name"], "rendered-master-abc");
        assert_eq!(debug["spec"]["config"], base_config(), "the debug copy keeps the stored config");
        let enc: Value = serde_json::from_slice(&decoded(file(&b, ENCAPSULATED_PATH))).unwrap();
        assert_eq!(enc["spec"]["config"], json!({"ignition": {"version": "3.5.0"}}), "bootstrap: always 3.5.0");
        assert_eq!(enc["spec"]["kernelArguments"], json!(["base=1"]));
        assert_eq!(enc["spec"]["osImageURL"], "quay.io/os@sha256:1");
        assert_eq!(enc["kind"], "MachineConfig");

        let mut cluster = inputs(base_config());
        cluster.encapsulate_requested_version = true;
        for (target, want) in [
            (Target::V3_2, json!({"ignition": {"version": "3.2.0"}})),
            (Target::V2_2, json!({"ignition": {"version": "2.2.0"}})),
        ] {
            let b = body(&cluster, target);
            let enc: Value = serde_json::from_slice(&decoded(file(&b, ENCAPSULATED_PATH))).unwrap();
            assert_eq!(enc["spec"]["config"], want);
        }
    }

    #[test]
    fn kernel_arguments_migrate_below_3_3() {
        let config = json!({"ignition": {"version": "3.5.0"}, "kernelArguments": {"shouldExist": ["a=1", "b c"]}});
        for target in [Target::V3_3, Target::V3_4, Target::V3_5] {
            let b = body(&inputs(config.clone()), target);
            assert_eq!(b["kernelArguments"]["shouldExist"], json!(["a=1", "b c"]), "{target}");
            let enc: Value = serde_json::from_slice(&decoded(file(&b, ENCAPSULATED_PATH))).unwrap();
            assert_eq!(enc["spec"]["kernelArguments"], json!(["base=1"]), "{target}");
        }
        for target in [Target::V3_2, Target::V3_1, Target::V2_2] {
            let b = body(&inputs(config.clone()), target);
            assert!(b.get("kernelArguments").is_none(), "{target}");
            for path in [ENCAPSULATED_PATH, MACHINE_CONFIG_CONTENT_PATH] {
                let mc: Value = serde_json::from_slice(&decoded(file(&b, path))).unwrap();
                assert_eq!(mc["spec"]["kernelArguments"], json!(["base=1", "a=1", "b c"]), "{target} {path}");
            }
        }
        let remove = json!({"ignition": {"version": "3.5.0"}, "kernelArguments": {"shouldNotExist": ["quiet"]}});
        assert!(build(&inputs(remove.clone()), Target::V3_3).is_ok());
        assert_eq!(
            build(&inputs(remove), Target::V3_2).unwrap_err().to_string(),
            "failed to migrate kernel args Can't serve version 3.2.0 with ignition KernelArguments.ShouldNotExist populated"
        );
    }

    #[test]
    fn ca_files_replace_existing_sources() {
        let config = json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
            {"path": KUBELET_CA_PATH, "contents": {"source": "data:,old"}, "mode": 384},
            {"path": CLOUD_PROVIDER_CA_PATH, "contents": {"source": "data:,cloud-old"}}
        ]}});
        let b = body(&inputs(config), Target::V3_5);
        let p = paths(&b);
        assert_eq!(p.iter().filter(|x| *x == KUBELET_CA_PATH).count(), 1);
        assert_eq!(p[0], KUBELET_CA_PATH, "replaced in place");
        assert_eq!(decoded(file(&b, KUBELET_CA_PATH)), b"KUBELET CA\n");
        assert_eq!(file(&b, KUBELET_CA_PATH)["mode"], 384, "only the source changes");
        assert_eq!(decoded(file(&b, CLOUD_PROVIDER_CA_PATH)), b"cloud-old", "empty data keeps the file");
    }

    #[test]
    fn spec_2_2_body() {
        let b = body(&inputs(base_config()), Target::V2_2);
        assert_eq!(b["ignition"]["version"], "2.2.0");
        for f in b["storage"]["files"].as_array().unwrap() {
            assert_eq!(f["filesystem"], "root", "{}", f["path"]);
        }
        assert_eq!(paths(&b).last().unwrap(), ENCAPSULATED_PATH);
    }

    #[test]
    fn layered_image_and_pre_built_annotation() {
        let mut i = inputs(base_config());
        i.desired_image = "quay.io/layered@sha256:2".into();
        let b = body(&i, Target::V3_5);
        let seed: Value = serde_json::from_slice(&decoded(file(&b, NODE_ANNOTATIONS_PATH))).unwrap();
        assert_eq!(seed[CURRENT_IMAGE_ANNOTATION], "quay.io/layered@sha256:2");
        assert_eq!(seed[DESIRED_IMAGE_ANNOTATION], "quay.io/layered@sha256:2");
        let enc: Value = serde_json::from_slice(&decoded(file(&b, ENCAPSULATED_PATH))).unwrap();
        assert_eq!(enc["spec"]["osImageURL"], "quay.io/layered@sha256:2");

        let mut i = inputs(base_config());
        i.machine_config.metadata.annotations =
            Some([(PRE_BUILT_IMAGE_ANNOTATION.to_string(), "quay.io/pre@sha256:3".to_string())].into());
        let b = body(&i, Target::V3_5);
        let seed: Value = serde_json::from_slice(&decoded(file(&b, NODE_ANNOTATIONS_PATH))).unwrap();
        assert_eq!(seed[DESIRED_IMAGE_ANNOTATION], "quay.io/pre@sha256:3");
        let enc: Value = serde_json::from_slice(&decoded(file(&b, ENCAPSULATED_PATH))).unwrap();
        assert_eq!(enc["spec"]["osImageURL"], "quay.io/os@sha256:1", "the annotation does not change the MC");
    }

    #[test]
    fn conversion_failures_name_the_config() {
        let config = json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
            {"path": "/etc/x", "contents": {"source": "data:,x"}, "mode": 2541}
        ]}, "passwd": {"users": [{"name": "core", "shouldExist": false}]}});
        let err = build(&inputs(config), Target::V3_1).unwrap_err().to_string();
        assert!(err.starts_with("MachineConfig rendered-master-abc: cannot convert"), "{err}");
        let err = build(&inputs(json!({"ignition": {"version": "9.0.0"}})), Target::V3_5).unwrap_err().to_string();
        assert!(err.starts_with("MachineConfig rendered-master-abc: parsing Ignition config failed"), "{err}");
    }

    #[test]
    fn data_urls_escape_like_go_path_escape() {
        assert_eq!(
            data_url(b"a b/c;d,e?f$g&h+i:j=k@l~m_n.o-p\n%"),
            "data:,a%20b%2Fc%3Bd%2Ce%3Ff$g&h+i:j=k@l~m_n.o-p%0A%25"
        );
        assert_eq!(data_url("é\u{0}".as_bytes()), "data:,%C3%A9%00");
        assert_eq!(mco_ignition::dataurl::decode(&data_url(b"x y\n")).unwrap().data, b"x y\n");
    }
}
