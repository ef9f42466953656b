//! The object rules upstream enforces in the API server (CRD schema, CEL rules and validating
//! admission policies), as pure functions, so that manifests can be checked offline and a
//! controller can reject bad input with the same words.
//!
//! Each function returns every violation it finds, not just the first.

use std::collections::HashSet;
use std::fmt;
use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use regex::Regex;

use crate::constants::{MACHINE_CONFIGURATION_NAME, OS_IMAGE_STREAM_NAME};
use crate::machineconfiguration::{ContainerfileArch, MachineConfigPool, MachineOSConfig, OSImageStream};
use crate::operator::{
    BootImageSkewEnforcementConfig, BootImageSkewEnforcementConfigMode, BootImageSkewEnforcementModeStatus,
    ClusterBootImageManual, ClusterBootImageManualMode, MachineConfiguration, MachineManager, MachineManagerResource,
    MachineManagerSelectorMode, NodeDisruptionPolicyConfig, NodeDisruptionPolicySpecAction,
    NodeDisruptionPolicySpecActionType,
};

/// One rule an object breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Kind of the object, e.g. `MachineConfiguration`.
    pub kind: &'static str,
    /// Name of the object.
    pub name: String,
    /// JSON path of the offending field, e.g. `spec.nodeDisruptionPolicy.files[2].actions`.
    pub field: String,
    /// The offending value, for scalar fields.
    pub value: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.name, self.field)?;
        if let Some(value) = &self.value {
            write!(f, " {value:?}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for FieldError {}

const OCP_VERSION_PATTERN: &str = r"^[0-9]+\.[0-9]+\.[0-9]+$";
const RHCOS_VERSION_PATTERN: &str = r"^[0-9]+\.[0-9]+\.([0-9]{8}|[0-9]{12})-[0-9]+$";
const SERVICE_NAME_PATTERN: &str = r"^[a-zA-Z0-9:._\\-]+\..";
const SERVICE_SUFFIX_PATTERN: &str =
    r"\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)$";
const PUSH_SPEC_PATTERN: &str =
    r"^([a-zA-Z0-9-]+\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?(/[a-zA-Z0-9-_]{1,61})*/[a-zA-Z0-9-_.]+:[a-zA-Z0-9._-]+$";
const PUSH_SPEC_SVC_PATTERN: &str = r"^[^.]+\.[^.]+\.svc:[0-9]+/[^/]+/[^/]+:[^/]+$";
const PERCENT_PATTERN: &str = r"^[0-9]+%$";

fn regex(pattern: &'static str) -> Regex {
    Regex::new(pattern).expect("built-in pattern compiles")
}

static OCP_VERSION: LazyLock<Regex> = LazyLock::new(|| regex(OCP_VERSION_PATTERN));
static RHCOS_VERSION: LazyLock<Regex> = LazyLock::new(|| regex(RHCOS_VERSION_PATTERN));
static SERVICE_NAME: LazyLock<Regex> = LazyLock::new(|| regex(SERVICE_NAME_PATTERN));
static SERVICE_SUFFIX: LazyLock<Regex> = LazyLock::new(|| regex(SERVICE_SUFFIX_PATTERN));
static PUSH_SPEC: LazyLock<Regex> = LazyLock::new(|| regex(PUSH_SPEC_PATTERN));
static PUSH_SPEC_SVC: LazyLock<Regex> = LazyLock::new(|| regex(PUSH_SPEC_SVC_PATTERN));
static PERCENT: LazyLock<Regex> = LazyLock::new(|| regex(PERCENT_PATTERN));

const MAX_MACHINE_MANAGERS: usize = 5;
const MAX_POLICY_ENTRIES: usize = 50;
const MAX_ACTIONS: usize = 10;
const MAX_SERVICE_NAME_LEN: usize = 255;
const MAX_STORAGE_OVERRIDES: usize = 3;
const MAX_CONTAINERFILES: usize = 4;
const MAX_CONTAINERFILE_LEN: usize = 4096;
const MAX_PUSH_SPEC_LEN: usize = 447;

/// Collects the errors of one object.
struct Errors {
    kind: &'static str,
    name: String,
    errors: Vec<FieldError>,
}

impl Errors {
    fn new(kind: &'static str, name: Option<&String>) -> Self {
        Self { kind, name: name.cloned().unwrap_or_default(), errors: Vec::new() }
    }

    fn add(&mut self, field: impl Into<String>, value: Option<&str>, message: impl Into<String>) {
        self.errors.push(FieldError {
            kind: self.kind,
            name: self.name.clone(),
            field: field.into(),
            value: value.map(str::to_string),
            message: message.into(),
        });
    }

    fn max_items(&mut self, field: &str, len: usize, max: usize) {
        if len > max {
            self.add(field, None, format!("must have at most {max} items"));
        }
    }

    /// `value` must be `min..=max` characters long and match `pattern`.
    fn string(&mut self, field: &str, value: &str, len: (usize, usize), pattern: (&Regex, &str)) {
        let (min, max) = len;
        let chars = value.chars().count();
        if chars < min || chars > max {
            self.add(field, Some(value), format!("must be {min} to {max} characters long"));
        }
        if !pattern.0.is_match(value) {
            self.add(field, Some(value), format!("must match {}", pattern.1));
        }
    }

    /// `present` iff `required`: "<what> is required when <when>, and forbidden otherwise".
    fn required_iff(&mut self, field: &str, present: bool, required: bool, when: &str) {
        if present != required {
            let what = field.rsplit('.').next().unwrap_or(field);
            self.add(field, None, format!("{what} is required when {when}, and forbidden otherwise"));
        }
    }
}

/// Checks a MachineConfiguration: its name, `spec.managedBootImages`, `spec.nodeDisruptionPolicy`,
/// `spec.irreconcilableValidationOverrides`, `spec.bootImageSkewEnforcement`, and the rules that
/// tie the spec to an `Automatic` skew enforcement status.
pub fn machine_configuration(object: &MachineConfiguration) -> Vec<FieldError> {
    let mut errors = Errors::new("MachineConfiguration", object.metadata.name.as_ref());
    if errors.name != MACHINE_CONFIGURATION_NAME {
        let name = errors.name.clone();
        errors.add(
            "metadata.name",
            Some(&name),
            format!("only a single object named {MACHINE_CONFIGURATION_NAME:?} is allowed"),
        );
    }
    let spec = &object.spec;
    if let Some(managers) = spec.managed_boot_images.as_ref().and_then(|m| m.machine_managers.as_ref()) {
        machine_managers(&mut errors, "spec.managedBootImages.machineManagers", managers);
    }
    if let Some(policy) = &spec.node_disruption_policy {
        node_disruption_policy(&mut errors, policy);
    }
    if let Some(overrides) = &spec.irreconcilable_validation_overrides {
        let field = "spec.irreconcilableValidationOverrides.storage";
        match &overrides.storage {
            None => errors.add(field, None, "is required"),
            Some(storage) => {
                if storage.is_empty() {
                    errors.add(field, None, "must have at least 1 item");
                }
                errors.max_items(field, storage.len(), MAX_STORAGE_OVERRIDES);
                let mut seen = HashSet::new();
                for (i, item) in storage.iter().enumerate() {
                    if !seen.insert(item) {
                        errors.add(format!("{field}[{i}]"), None, "duplicate value");
                    }
                }
            }
        }
    }
    if let Some(skew) = &spec.boot_image_skew_enforcement {
        skew_enforcement(&mut errors, skew);
    }
    automatic_skew_rules(&mut errors, object);
    errors.errors
}

fn machine_managers(errors: &mut Errors, field: &str, managers: &[MachineManager]) {
    errors.max_items(field, managers.len(), MAX_MACHINE_MANAGERS);
    let mut seen = HashSet::new();
    for (i, manager) in managers.iter().enumerate() {
        let item = format!("{field}[{i}]");
        if !seen.insert((manager.resource, manager.api_group)) {
            errors.add(&item, None, "duplicate entry for this resource and apiGroup");
        }
        let selection = &manager.selection;
        let partial = selection.mode == MachineManagerSelectorMode::Partial;
        errors.required_iff(
            &format!("{item}.selection.partial"),
            selection.partial.is_some(),
            partial,
            "mode is Partial",
        );
        if let Some(p) = &selection.partial
            && p.machine_resource_selector.is_none()
        {
            errors.add(format!("{item}.selection.partial.machineResourceSelector"), None, "is required");
        }
        if manager.resource == MachineManagerResource::ControlPlaneMachineSets && partial {
            errors.add(
                format!("{item}.selection.mode"),
                Some("Partial"),
                "Only All or None selection mode is permitted for ControlPlaneMachineSets",
            );
        }
    }
}

fn node_disruption_policy(errors: &mut Errors, policy: &NodeDisruptionPolicyConfig) {
    let base = "spec.nodeDisruptionPolicy";
    if let Some(files) = &policy.files {
        let field = format!("{base}.files");
        errors.max_items(&field, files.len(), MAX_POLICY_ENTRIES);
        let mut seen = HashSet::new();
        for (i, file) in files.iter().enumerate() {
            let item = format!("{field}[{i}]");
            if !file.path.starts_with('/') {
                errors.add(format!("{item}.path"), Some(&file.path), "must be an absolute path");
            }
            if !seen.insert(file.path.as_str()) {
                errors.add(format!("{item}.path"), Some(&file.path), "duplicate value");
            }
            actions(errors, &format!("{item}.actions"), &file.actions);
        }
    }
    if let Some(units) = &policy.units {
        let field = format!("{base}.units");
        errors.max_items(&field, units.len(), MAX_POLICY_ENTRIES);
        let mut seen = HashSet::new();
        for (i, unit) in units.iter().enumerate() {
            let item = format!("{field}[{i}]");
            service_name(errors, &format!("{item}.name"), &unit.name);
            if !seen.insert(unit.name.as_str()) {
                errors.add(format!("{item}.name"), Some(&unit.name), "duplicate value");
            }
            actions(errors, &format!("{item}.actions"), &unit.actions);
        }
    }
    if let Some(sshkey) = &policy.sshkey {
        actions(errors, &format!("{base}.sshkey.actions"), &sshkey.actions);
    }
}

fn actions(errors: &mut Errors, field: &str, actions: &[NodeDisruptionPolicySpecAction]) {
    use NodeDisruptionPolicySpecActionType as A;
    errors.max_items(field, actions.len(), MAX_ACTIONS);
    for (alone, name) in [(A::Reboot, "Reboot"), (A::None, "None")] {
        if actions.len() > 1 && actions.iter().any(|a| a.type_ == alone) {
            errors.add(
                field,
                None,
                format!("{name} action can only be specified standalone, as it will override any other actions"),
            );
        }
    }
    for (i, action) in actions.iter().enumerate() {
        let item = format!("{field}[{i}]");
        for (service, type_, when) in
            [(&action.reload, A::Reload, "type is Reload"), (&action.restart, A::Restart, "type is Restart")]
        {
            let key = if type_ == A::Reload { "reload" } else { "restart" };
            let service_field = format!("{item}.{key}");
            errors.required_iff(&service_field, service.is_some(), action.type_ == type_, when);
            if let Some(service) = service {
                service_name(errors, &format!("{service_field}.serviceName"), &service.service_name);
            }
        }
    }
}

fn service_name(errors: &mut Errors, field: &str, name: &str) {
    if name.chars().count() > MAX_SERVICE_NAME_LEN {
        errors.add(field, Some(name), format!("must be at most {MAX_SERVICE_NAME_LEN} characters long"));
    }
    for (regex, pattern) in [(&*SERVICE_NAME, SERVICE_NAME_PATTERN), (&*SERVICE_SUFFIX, SERVICE_SUFFIX_PATTERN)] {
        if !regex.is_match(name) {
            errors.add(field, Some(name), format!("must match {pattern}"));
        }
    }
}

fn skew_enforcement(errors: &mut Errors, skew: &BootImageSkewEnforcementConfig) {
    let base = "spec.bootImageSkewEnforcement";
    if skew.mode.is_none() {
        errors.add(format!("{base}.mode"), None, "is required");
    }
    errors.required_iff(
        &format!("{base}.manual"),
        skew.manual.is_some(),
        skew.mode == Some(BootImageSkewEnforcementConfigMode::Manual),
        "mode is Manual",
    );
    if let Some(manual) = &skew.manual {
        manual_boot_image(errors, &format!("{base}.manual"), manual);
    }
}

fn manual_boot_image(errors: &mut Errors, base: &str, manual: &ClusterBootImageManual) {
    if manual.mode.is_none() {
        errors.add(format!("{base}.mode"), None, "is required");
    }
    let field = format!("{base}.ocpVersion");
    errors.required_iff(
        &field,
        manual.ocp_version.is_some(),
        manual.mode == Some(ClusterBootImageManualMode::OcpVersion),
        "mode is OCPVersion",
    );
    if let Some(version) = &manual.ocp_version {
        errors.string(&field, version, (5, 10), (&OCP_VERSION, OCP_VERSION_PATTERN));
    }
    let field = format!("{base}.rhcosVersion");
    errors.required_iff(
        &field,
        manual.rhcos_version.is_some(),
        manual.mode == Some(ClusterBootImageManualMode::RhcosVersion),
        "mode is RHCOSVersion",
    );
    if let Some(version) = &manual.rhcos_version {
        errors.string(&field, version, (14, 21), (&RHCOS_VERSION, RHCOS_VERSION_PATTERN));
    }
}

/// Upstream's object-level CEL rules (feature gate BootImageSkewEnforcement): while the status says
/// `Automatic`, the spec may not take away what automatic enforcement relies on.
fn automatic_skew_rules(errors: &mut Errors, object: &MachineConfiguration) {
    let status = object.status.as_ref();
    let automatic = status.and_then(|s| s.boot_image_skew_enforcement_status.as_ref()).and_then(|s| s.mode)
        == Some(BootImageSkewEnforcementModeStatus::Automatic);
    if !automatic {
        return;
    }
    let is_machinesets = |m: &&MachineManager| m.resource == MachineManagerResource::MachineSets;
    let all = |m: &&MachineManager| m.selection.mode == MachineManagerSelectorMode::All;
    let spec_boot_images = object.spec.managed_boot_images.as_ref();
    let status_boot_images = status.and_then(|s| s.managed_boot_images_status.as_ref());
    if spec_boot_images.is_none() && status_boot_images.is_none() {
        errors.add(
            "spec.managedBootImages",
            None,
            "when skew enforcement is in Automatic mode, a boot image configuration is required",
        );
    }
    if let Some(managers) = spec_boot_images.and_then(|b| b.machine_managers.as_ref()) {
        let field = "spec.managedBootImages.machineManagers";
        if managers.is_empty() {
            errors.add(
                field,
                None,
                "when skew enforcement is in Automatic mode, managedBootImages.machineManagers must not be an empty list",
            );
        }
        let machinesets: Vec<_> = managers.iter().filter(is_machinesets).collect();
        if !machinesets.is_empty() && !machinesets.iter().any(all) {
            errors.add(
                field,
                None,
                "when skew enforcement is in Automatic mode, any MachineAPI MachineSet MachineManager must use selection mode 'All'",
            );
        }
    }
    if let Some(managers) = status_boot_images.and_then(|b| b.machine_managers.as_ref())
        && !managers.iter().filter(is_machinesets).any(|m| all(&m))
    {
        errors.add(
            "status.managedBootImagesStatus.machineManagers",
            None,
            "when skew enforcement is in Automatic mode, managedBootImagesStatus must contain a MachineManager opting in all MachineAPI MachineSets",
        );
    }
}

/// Checks a MachineConfigPool: `spec.maxUnavailable` is an integer ≥ 0 or a percentage `"N%"`.
pub fn machine_config_pool(pool: &MachineConfigPool) -> Vec<FieldError> {
    let mut errors = Errors::new("MachineConfigPool", pool.metadata.name.as_ref());
    let field = "spec.maxUnavailable";
    match &pool.spec.max_unavailable {
        Some(IntOrString::Int(n)) if *n < 0 => {
            errors.add(field, Some(&n.to_string()), "must be greater than or equal to 0")
        }
        Some(IntOrString::String(s)) if !PERCENT.is_match(s) => {
            errors.add(field, Some(s), "must be an integer or a percentage (e.g. \"10%\")")
        }
        _ => {}
    }
    errors.errors
}

/// Checks an OSImageStream as its CRD's rules do: the singleton's name, the default stream (of
/// the spec and of the status) among the available ones, and unique stream names.
pub fn os_image_stream(stream: &OSImageStream) -> Vec<FieldError> {
    let mut errors = Errors::new("OSImageStream", stream.metadata.name.as_ref());
    if errors.name != OS_IMAGE_STREAM_NAME {
        errors.add(
            "metadata.name",
            Some(&errors.name.clone()),
            "osimagestream is a singleton, .metadata.name must be 'cluster'",
        );
    }
    let Some(status) = &stream.status else { return errors.errors };
    let names: Vec<&str> = status.available_streams.iter().map(|s| s.name.as_str()).collect();
    for (index, name) in names.iter().enumerate() {
        if names[..index].contains(name) {
            errors.add(format!("status.availableStreams[{index}]"), Some(name), "Duplicate value");
        }
    }
    if !names.contains(&status.default_stream.as_str()) {
        errors.add(
            "status.defaultStream",
            Some(&status.default_stream),
            "defaultStream must reference a stream name from availableStreams",
        );
    }
    if !names.contains(&stream.spec.default_stream.as_str()) {
        errors.add(
            "spec.defaultStream",
            Some(&stream.spec.default_stream),
            "spec.defaultStream must reference an existing stream name from status.availableStreams",
        );
    }
    errors.errors
}

/// Checks a pool's `spec.osImageStream.name` against the cluster's OSImageStream (upstream's
/// admission policy `machineconfigpool-osimagestream-reference-validation`).
pub fn pool_os_image_stream(pool: &MachineConfigPool, stream: &OSImageStream) -> Vec<FieldError> {
    let mut errors = Errors::new("MachineConfigPool", pool.metadata.name.as_ref());
    let Some(reference) = &pool.spec.os_image_stream else { return errors.errors };
    let available = stream.status.as_ref().map(|s| s.available_streams.as_slice()).unwrap_or_default();
    if !available.iter().any(|s| s.name == reference.name) {
        errors.add(
            "spec.osImageStream.name",
            Some(&reference.name),
            "The specified osImageStream name must reference a valid stream from the cluster OSImageStream resource",
        );
    }
    errors.errors
}

/// Checks a MachineOSConfig: its name equals `spec.machineConfigPool.name`, the push spec has the
/// tag format, and at most 4 containerfiles (one per architecture) of at most 4096 characters.
pub fn machine_os_config(mosc: &MachineOSConfig) -> Vec<FieldError> {
    let mut errors = Errors::new("MachineOSConfig", mosc.metadata.name.as_ref());
    let spec = &mosc.spec;
    if errors.name != spec.machine_config_pool.name {
        errors.add(
            "spec.machineConfigPool.name",
            Some(&spec.machine_config_pool.name),
            "MachineOSConfig name must match the referenced MachineConfigPool name; can only have one MachineOSConfig per MachineConfigPool",
        );
    }
    let field = "spec.renderedImagePushSpec";
    let push_spec = spec.rendered_image_push_spec.as_str();
    if push_spec.is_empty() || push_spec.chars().count() > MAX_PUSH_SPEC_LEN {
        errors.add(field, Some(push_spec), format!("must be 1 to {MAX_PUSH_SPEC_LEN} characters long"));
    }
    if !PUSH_SPEC.is_match(push_spec) && !PUSH_SPEC_SVC.is_match(push_spec) {
        errors.add(
            field,
            Some(push_spec),
            "the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme. Or it must be a valid .svc followed by a port, repository, image name, and tag.",
        );
    }
    if let Some(files) = &spec.containerfile {
        let field = "spec.containerFile";
        errors.max_items(field, files.len(), MAX_CONTAINERFILES);
        let mut seen = HashSet::new();
        for (i, file) in files.iter().enumerate() {
            // An unset architecture is the default `NoArch`, so the two collide.
            let arch = file.containerfile_arch.unwrap_or(ContainerfileArch::NoArch);
            if !seen.insert(arch) {
                errors.add(format!("{field}[{i}].containerfileArch"), None, "duplicate value");
            }
            if file.content.chars().count() > MAX_CONTAINERFILE_LEN {
                errors.add(
                    format!("{field}[{i}].content"),
                    None,
                    format!("must be at most {MAX_CONTAINERFILE_LEN} characters long"),
                );
            }
        }
    }
    errors.errors
}

const DNS1123_SUBDOMAIN_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const QUALIFIED_NAME_PATTERN: &str = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| regex(DNS1123_SUBDOMAIN_PATTERN));
static QUALIFIED_NAME: LazyLock<Regex> = LazyLock::new(|| regex(QUALIFIED_NAME_PATTERN));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| regex(LABEL_VALUE_PATTERN));
/// The API server's limit on all annotations of an object together (keys and values).
const TOTAL_ANNOTATION_BYTES: usize = 256 << 10;

/// Why `value` is not a lowercase RFC 1123 subdomain, in the API server's words.
fn dns1123_subdomain_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 253 {
        problems.push("must be no more than 253 characters".to_string());
    }
    if !DNS1123_SUBDOMAIN.is_match(value) {
        problems.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must \
             start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .to_string(),
        );
    }
    problems
}

/// Why `key` is not a qualified name (`[prefix/]name`), in the API server's words.
fn qualified_name_problems(key: &str) -> Vec<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let mut problems = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            problems.push("prefix part must be non-empty".to_string());
        } else {
            problems.extend(dns1123_subdomain_problems(prefix).into_iter().map(|p| format!("prefix part {p}")));
        }
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            problems.push("name part must be no more than 63 characters".to_string());
        }
        if !QUALIFIED_NAME.is_match(name) {
            problems.push(
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
                 alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
                 '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                    .to_string(),
            );
        }
    }
    problems
}

/// The API server's rules for the name, labels and annotations of a cluster-scoped object of
/// `kind` (every kind mco owns): the name an RFC 1123 subdomain, label and annotation keys
/// qualified names, label values of at most 63 characters, annotations at most 256 KiB together.
pub fn object_meta(
    kind: &'static str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<FieldError> {
    let name = meta.name.clone().unwrap_or_default();
    let error = |field: &str, value: &str, message: String| FieldError {
        kind,
        name: name.clone(),
        field: field.to_string(),
        value: Some(value.to_string()),
        message: format!("Invalid value: {message}"),
    };
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(FieldError {
            kind,
            name: name.clone(),
            field: "metadata.name".into(),
            value: None,
            message: "Required value: name or generateName is required".into(),
        });
    } else {
        errors.extend(dns1123_subdomain_problems(&name).into_iter().map(|p| error("metadata.name", &name, p)));
    }
    for (key, value) in meta.labels.iter().flatten() {
        errors.extend(qualified_name_problems(key).into_iter().map(|p| error("metadata.labels", key, p)));
        if value.len() > 63 {
            errors.push(error("metadata.labels", value, "must be no more than 63 characters".into()));
        }
        if !LABEL_VALUE.is_match(value) {
            errors.push(error(
                "metadata.labels",
                value,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and \
                 must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', \
                 regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                    .into(),
            ));
        }
    }
    let mut total = 0;
    for (key, value) in meta.annotations.iter().flatten() {
        errors.extend(qualified_name_problems(key).into_iter().map(|p| error("metadata.annotations", key, p)));
        total += key.len() + value.len();
    }
    if total > TOTAL_ANNOTATION_BYTES {
        errors.push(FieldError {
            kind,
            name: name.clone(),
            field: "metadata.annotations".into(),
            value: None,
            message: format!("Too long: must have at most {TOTAL_ANNOTATION_BYTES} bytes"),
        });
    }
    errors
}

#[cfg(test)]
mod object_meta_tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn meta(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| {
            Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>())
        };
        ObjectMeta { name: Some(name.into()), labels: map(labels), annotations: map(annotations), ..Default::default() }
    }

    #[test]
    fn names_labels_and_annotations_follow_the_api_servers_rules() {
        let fine = meta(
            "99-worker.ssh-keys",
            &[("machineconfiguration.openshift.io/role", "worker"), ("a", ""), ("A_b.c-D", "X_y.z-1")],
            &[("mco.dev/canary", "1"), ("x", &"v".repeat(1000))],
        );
        assert_eq!(object_meta("MachineConfig", &fine), []);
        let long = "x".repeat(64);
        let cases: Vec<(ObjectMeta, &str)> = vec![
            (meta("", &[], &[]), "MachineConfig : metadata.name: Required value: name or generateName is required"),
            (
                meta("Bad_Name", &[], &[]),
                "MachineConfig Bad_Name: metadata.name \"Bad_Name\": Invalid value: a lowercase RFC 1123 subdomain must consist of",
            ),
            (meta(&"a".repeat(254), &[], &[]), "\": Invalid value: must be no more than 253 characters"),
            (
                meta("a", &[("bad key", "v")], &[]),
                "MachineConfig a: metadata.labels \"bad key\": Invalid value: name part must consist of",
            ),
            (
                meta("a", &[("Bad.Prefix/k", "v")], &[]),
                "metadata.labels \"Bad.Prefix/k\": Invalid value: prefix part a lowercase RFC 1123 subdomain",
            ),
            (meta("a", &[("/k", "v")], &[]), "Invalid value: prefix part must be non-empty"),
            (meta("a", &[("p/", "v")], &[]), "Invalid value: name part must be non-empty"),
            (meta("a", &[(&long, "v")], &[]), "Invalid value: name part must be no more than 63 characters"),
            (meta("a", &[("k", &long)], &[]), "Invalid value: must be no more than 63 characters"),
            (
                meta("a", &[("k", "-v")], &[]),
                "metadata.labels \"-v\": Invalid value: a valid label must be an empty string",
            ),
            (
                meta("a", &[], &[("bad key", "v")]),
                "metadata.annotations \"bad key\": Invalid value: name part must consist of",
            ),
            (
                meta("a", &[], &[("big", &"v".repeat(256 << 10))]),
                "metadata.annotations: Too long: must have at most 262144 bytes",
            ),
        ];
        for (meta, want) in cases {
            let found: Vec<String> = object_meta("MachineConfig", &meta).iter().map(ToString::to_string).collect();
            assert!(found.len() == 1 && found[0].contains(want), "want {want:?}, found {found:?}");
        }
    }
}
