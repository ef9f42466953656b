//! The per-MachineSet decision of the original's `syncMAPIMachineSet`: patch the
//! provider spec to the stream's boot image, leave it, or skip it with a reason.
//!
//! The provider spec is edited in place as JSON ([`mco_api::machine::provider`]): every key this
//! crate does not change survives, where the original re-encodes its Go struct and drops the
//! keys that struct does not know.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mco_api::MachineSet;
use mco_api::constants::{AUTOSCALER_LABELS_ANNOTATION, BOOT_IMAGE_OS_STREAM, MACHINE_OS_ID_LABEL, OS_STREAM_LABEL};
use mco_api::machine::ProviderSpecHolder;
use mco_api::machine::provider::{self, NotAnObject, azure::AzureImage};
use serde_json::{Map, Value};

use crate::arch::{Arch, ArchAnnotationError, arch_from_autoscaler_labels};
use crate::ec2::{AmiOwner, AmiOwnerLookup, LookupError};
use crate::platform::{Infrastructure, Platform};
use crate::stream::{AzureVariant, GCP_RHCOS_IMAGE_PREFIX, HyperVGen, Stream, StreamError, VmwareOva};

/// Everything a decision depends on besides the MachineSet.
pub struct PlanContext<'a> {
    /// The boot images to move to.
    pub stream: &'a Stream,
    /// The cluster's Infrastructure; without it the platform is read from the provider spec's
    /// `kind` (and vSphere is taken to be configured).
    pub infrastructure: Option<&'a Infrastructure>,
    /// Architecture of MachineSets without the autoscaler labels annotation: the control
    /// plane's; `None` on a multi-architecture cluster, where such MachineSets are skipped.
    pub default_arch: Option<Arch>,
    /// Who owns an AMI.
    pub amis: &'a dyn AmiOwnerLookup,
}

/// What to do with one MachineSet.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The provider spec must change.
    Patch(Patch),
    /// The MachineSet already boots the stream's image.
    UpToDate { image: String },
    /// The MachineSet is left alone.
    Skipped(SkipReason),
    /// vSphere: the VM template the MachineSet names must hold the stream's release. Checking
    /// and importing it needs vCenter, so the plan only names what it must be.
    VsphereTemplate { template: Option<String>, ova: VmwareOva },
}

/// A provider spec change.
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    /// The whole new `spec.template.spec.providerSpec.value`.
    pub provider_spec: Value,
    /// The boot image before (`ami-…`, a GCP image path, an Azure URN).
    pub from: String,
    /// The boot image after.
    pub to: String,
    /// The user-data secret whose stub Ignition must be upgraded before the patch is applied
    /// (new boot images only read spec 3).
    pub user_data_secret: Option<String>,
}

impl Patch {
    /// The MachineSet (or ControlPlaneMachineSet) with the new provider spec.
    pub fn apply<M: ProviderSpecHolder>(&self, machines: &M) -> M {
        let mut patched = machines.clone();
        if let Some(spec) = patched.provider_spec_mut() {
            *spec = self.provider_spec.clone();
        }
        patched
    }

    /// An RFC 7386 JSON merge patch taking `machineset` to the patched MachineSet: only the
    /// provider spec keys that change (removed keys as `null`). Arrays are replaced whole, and
    /// the API server drops `null`s inside them (e.g. GCP `disks[].labels: null`); the controller
    /// therefore updates the whole object instead.
    pub fn merge_patch(&self, machineset: &MachineSet) -> Value {
        let old = machineset.provider_spec().cloned().unwrap_or(Value::Null);
        let value = merge_patch_diff(&old, &self.provider_spec);
        serde_json::json!({"spec": {"template": {"spec": {"providerSpec": {"value": value}}}}})
    }
}

/// Why a MachineSet is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// Another controller owns the MachineSet (Cluster API migration, Hive, ...).
    OwnerReferences(Vec<String>),
    /// Labelled for another OS stream.
    OsStream(String),
    /// A Windows MachineSet.
    Windows,
    /// No architecture annotation on a multi-architecture cluster.
    ArchitectureUnknown,
    /// The platform has no managed boot images.
    UnsupportedPlatform(String),
    /// `ami` has no `id` (ARN or filters, or an installer-copied AMI).
    AmiNotById,
    /// The AMI belongs to an account other than Red Hat's or the marketplace's.
    AmiCustom { ami: String, owner_id: String },
    /// The AMI's owner could not be determined.
    AmiOwnerUnknown { ami: String },
    /// An AWS Marketplace AMI: its successor is found by searching the marketplace.
    AmiMarketplace { ami: String },
    /// The stream has no AMI for the region (or architecture).
    RegionNotInStream { region: String, arch: Arch, stream: String },
    /// A GCP boot disk uses an image that is not Red Hat's.
    GcpCustomImage(String),
    /// The stream has no Azure marketplace images.
    AzureNoMarketplace { arch: Arch, stream: String },
    /// Azure on an architecture without marketplace images.
    AzureArchitecture(Arch),
    /// Azure confidential or trusted-launch VMs keep their image.
    AzureSecurityType(String),
    /// vSphere without `spec.platformSpec.vsphere` in the Infrastructure.
    VsphereNotConfigured,
}

impl SkipReason {
    /// Whether the original counts this as a skipped MachineSet (which resets the automatic
    /// skew baseline to the install version) rather than one that needs nothing.
    pub fn counts_as_skipped(&self) -> bool {
        !matches!(
            self,
            SkipReason::OsStream(_)
                | SkipReason::Windows
                | SkipReason::UnsupportedPlatform(_)
                | SkipReason::AzureArchitecture(_)
                | SkipReason::AzureSecurityType(_)
                | SkipReason::VsphereNotConfigured
        )
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::OwnerReferences(owners) => {
                write!(f, "has OwnerReference {}: managed by another controller", owners.join(", "))
            }
            SkipReason::OsStream(stream) => {
                write!(f, "label {OS_STREAM_LABEL} is {stream:?}; only {BOOT_IMAGE_OS_STREAM} boot images are managed")
            }
            SkipReason::Windows => write!(f, "Windows machines (template label {MACHINE_OS_ID_LABEL}=Windows)"),
            SkipReason::ArchitectureUnknown => write!(
                f,
                "architecture unknown: no kubernetes.io/arch in annotation {AUTOSCALER_LABELS_ANNOTATION} on a multi-architecture cluster"
            ),
            SkipReason::UnsupportedPlatform(p) => write!(f, "boot images are not managed on platform {p:?}"),
            SkipReason::AmiNotById => write!(f, "providerSpec.value.ami has no id (AMI given by ARN or filters)"),
            SkipReason::AmiCustom { ami, owner_id } => {
                write!(f, "custom image: AMI {ami} is owned by account {owner_id}, not by Red Hat")
            }
            SkipReason::AmiOwnerUnknown { ami } => {
                write!(f, "AMI {ami} is not a known RHCOS boot image (its owner is unknown; not in any known stream)")
            }
            SkipReason::AmiMarketplace { ami } => {
                write!(f, "AMI {ami} is an AWS Marketplace image; its successor must be looked up in the marketplace")
            }
            SkipReason::RegionNotInStream { region, arch, stream } => {
                write!(f, "region {region} not in stream {stream} for architecture {arch}")
            }
            SkipReason::GcpCustomImage(image) => {
                write!(f, "custom image: boot disk image {image} is not under {GCP_RHCOS_IMAGE_PREFIX}")
            }
            SkipReason::AzureNoMarketplace { arch, stream } => {
                write!(f, "stream {stream} has no Azure marketplace images for architecture {arch}")
            }
            SkipReason::AzureArchitecture(arch) => write!(f, "no Azure marketplace images for architecture {arch}"),
            SkipReason::AzureSecurityType(t) => write!(f, "Azure security type {t} keeps its image"),
            SkipReason::VsphereNotConfigured => write!(f, "Infrastructure has no spec.platformSpec.vsphere"),
        }
    }
}

/// A MachineSet (or ControlPlaneMachineSet) that cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {kind}")]
pub struct PlanError {
    /// Its kind and namespaced name (`MachineSet openshift-machine-api/worker-a`).
    pub object: String,
    pub kind: PlanErrorKind,
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanErrorKind {
    #[error("its machine template has no providerSpec.value")]
    NoProviderSpec,
    #[error(
        "providerSpec.value has unknown kind {0:?}; boot images are managed for AWSMachineProviderConfig, GCPMachineProviderSpec, AzureMachineProviderSpec and VSphereMachineProviderSpec"
    )]
    UnknownProviderKind(String),
    #[error("providerSpec.value.kind is {kind} but the Infrastructure platform is {platform}")]
    PlatformMismatch { kind: String, platform: &'static str },
    #[error(transparent)]
    Architecture(#[from] ArchAnnotationError),
    #[error("providerSpec.value{path} {problem}")]
    Field { path: String, problem: String },
    #[error(transparent)]
    Stream(#[from] StreamError),
    #[error(transparent)]
    Lookup(#[from] LookupError),
    #[error("could not determine azure marketplace variant for image publisher {publisher:?} offer {offer:?}")]
    AzureVariant { publisher: String, offer: String },
}

impl From<NotAnObject> for PlanErrorKind {
    fn from(e: NotAnObject) -> Self {
        PlanErrorKind::Field { path: e.path, problem: "is not an object".to_string() }
    }
}

/// Decides what to do with one MachineSet, in the original's order: owner references, OS
/// stream, Windows, architecture, then the platform's rules.
pub fn plan(machineset: &MachineSet, ctx: &PlanContext<'_>) -> Result<Decision, PlanError> {
    plan_inner(machineset, ctx)
        .map_err(|kind| PlanError { object: format!("MachineSet {}", qualified_name(&machineset.metadata)), kind })
}

/// `namespace/name`, or the name of an object without a namespace.
pub(crate) fn qualified_name(metadata: &ObjectMeta) -> String {
    let name = metadata.name.as_deref().unwrap_or("<unnamed>");
    match metadata.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// Owner references as `Kind/name`: an object with any is another controller's.
pub(crate) fn owners(metadata: &ObjectMeta) -> Option<SkipReason> {
    let owners = metadata.owner_references.as_deref().unwrap_or_default();
    (!owners.is_empty())
        .then(|| SkipReason::OwnerReferences(owners.iter().map(|o| format!("{}/{}", o.kind, o.name)).collect()))
}

/// A label naming an OS stream other than the one whose boot images are managed.
pub(crate) fn other_os_stream(metadata: &ObjectMeta) -> Option<SkipReason> {
    let stream = metadata.labels.as_ref()?.get(OS_STREAM_LABEL)?;
    (stream != BOOT_IMAGE_OS_STREAM).then(|| SkipReason::OsStream(stream.clone()))
}

fn plan_inner(machineset: &MachineSet, ctx: &PlanContext<'_>) -> Result<Decision, PlanErrorKind> {
    if let Some(skip) = owners(&machineset.metadata).or_else(|| other_os_stream(&machineset.metadata)) {
        return Ok(Decision::Skipped(skip));
    }
    if machineset.template_label(MACHINE_OS_ID_LABEL) == Some("Windows") {
        return Ok(Decision::Skipped(SkipReason::Windows));
    }
    let annotation = machineset.metadata.annotations.as_ref().and_then(|a| a.get(AUTOSCALER_LABELS_ANNOTATION));
    let arch = match (annotation, ctx.default_arch) {
        (Some(labels), _) => arch_from_autoscaler_labels(labels)?,
        (None, Some(arch)) => arch,
        (None, None) => return Ok(Decision::Skipped(SkipReason::ArchitectureUnknown)),
    };
    plan_provider_spec(machineset.provider_spec(), arch, ctx)
}

/// The platform's rules for a provider spec, for machines of `arch`.
pub(crate) fn plan_provider_spec(
    spec: Option<&Value>,
    arch: Arch,
    ctx: &PlanContext<'_>,
) -> Result<Decision, PlanErrorKind> {
    let spec = spec.filter(|v| !v.is_null()).ok_or(PlanErrorKind::NoProviderSpec)?;
    if !spec.is_object() {
        return Err(PlanErrorKind::Field { path: String::new(), problem: "is not an object".to_string() });
    }
    let kind = spec.get("kind").and_then(Value::as_str);
    let platform = match ctx.infrastructure {
        Some(infra) => {
            let Some(platform) = infra.boot_image_support().platform else {
                return Ok(Decision::Skipped(SkipReason::UnsupportedPlatform(infra.platform_type().to_string())));
            };
            if let Some(kind) = kind
                && kind != platform.provider_kind()
            {
                return Err(PlanErrorKind::PlatformMismatch {
                    kind: kind.to_string(),
                    platform: platform.infrastructure_type(),
                });
            }
            platform
        }
        None => {
            let kind = kind.unwrap_or_default();
            Platform::from_provider_kind(kind).ok_or_else(|| PlanErrorKind::UnknownProviderKind(kind.to_string()))?
        }
    };
    let spec = spec.clone();
    match platform {
        Platform::Aws => plan_aws(spec, arch, ctx),
        Platform::Gcp => plan_gcp(spec, arch, ctx),
        Platform::Azure => plan_azure(spec, arch, ctx),
        Platform::VSphere => plan_vsphere(&spec, arch, ctx),
    }
}

/// A JSON type a provider spec field must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Json {
    Object,
    String,
    Array,
    Boolean,
}

impl Json {
    fn matches(self, value: &Value) -> bool {
        match self {
            Json::Object => value.is_object(),
            Json::String => value.is_string(),
            Json::Array => value.is_array(),
            Json::Boolean => value.is_boolean(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Json::Object => "an object",
            Json::String => "a string",
            Json::Array => "an array",
            Json::Boolean => "a boolean",
        }
    }
}

/// Checks that the value at `path` (keys below `value`, which is at `prefix`) is absent, null
/// or of the expected type, so that a field of an unexpected shape is an error, not a silent
/// skip.
fn check_type(value: &Value, prefix: &str, path: &[&str], want: Json) -> Result<(), PlanErrorKind> {
    let mut value = value;
    let mut walked = prefix.to_string();
    for (i, key) in path.iter().enumerate() {
        walked.push('.');
        walked.push_str(key);
        let Some(child) = value.get(key).filter(|v| !v.is_null()) else {
            return Ok(());
        };
        let expected = if i + 1 == path.len() { want } else { Json::Object };
        if !expected.matches(child) {
            return Err(PlanErrorKind::Field { path: walked, problem: format!("is not {}", expected.name()) });
        }
        value = child;
    }
    Ok(())
}

fn user_data_secret(spec: &Value) -> Option<String> {
    provider::user_data_secret_name(spec).map(str::to_string)
}

fn plan_aws(mut spec: Value, arch: Arch, ctx: &PlanContext<'_>) -> Result<Decision, PlanErrorKind> {
    check_type(&spec, "", &["ami", "id"], Json::String)?;
    check_type(&spec, "", &["placement", "region"], Json::String)?;
    let Some(current) = provider::aws::ami_id(&spec).map(str::to_string) else {
        return Ok(Decision::Skipped(SkipReason::AmiNotById));
    };
    let region = provider::aws::region(&spec).filter(|r| !r.is_empty()).map(str::to_string).ok_or_else(|| {
        PlanErrorKind::Field { path: ".placement.region".to_string(), problem: "is missing".to_string() }
    })?;
    match ctx.amis.owner(&current, &region)? {
        AmiOwner::RedHat => {}
        AmiOwner::Marketplace { .. } => return Ok(Decision::Skipped(SkipReason::AmiMarketplace { ami: current })),
        AmiOwner::Other { owner_id } => return Ok(Decision::Skipped(SkipReason::AmiCustom { ami: current, owner_id })),
        AmiOwner::Unknown => return Ok(Decision::Skipped(SkipReason::AmiOwnerUnknown { ami: current })),
    }
    let target = match ctx.stream.aws_image(arch, &region) {
        Ok(image) => image.ami,
        Err(StreamError::MissingArchitecture { .. } | StreamError::MissingAwsRegion { .. }) => {
            let stream = ctx.stream.name().to_string();
            return Ok(Decision::Skipped(SkipReason::RegionNotInStream { region, arch, stream }));
        }
        Err(e) => return Err(e.into()),
    };
    if target == current {
        return Ok(Decision::UpToDate { image: target });
    }
    provider::aws::set_ami_id(&mut spec, &target)?;
    let user_data_secret = user_data_secret(&spec);
    Ok(Decision::Patch(Patch { provider_spec: spec, from: current, to: target, user_data_secret }))
}

fn plan_gcp(mut spec: Value, arch: Arch, ctx: &PlanContext<'_>) -> Result<Decision, PlanErrorKind> {
    check_type(&spec, "", &["disks"], Json::Array)?;
    let disks = spec.get("disks").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (i, disk) in disks.iter().enumerate() {
        let prefix = format!(".disks[{i}]");
        if !disk.is_object() {
            return Err(PlanErrorKind::Field { path: prefix, problem: "is not an object".into() });
        }
        check_type(disk, &prefix, &["boot"], Json::Boolean)?;
        check_type(disk, &prefix, &["image"], Json::String)?;
    }
    let current = provider::gcp::boot_disk_images(&spec);
    if current.is_empty() {
        return Err(PlanErrorKind::Field { path: ".disks".into(), problem: "has no boot disk with an image".into() });
    }
    let target = ctx.stream.gcp_image(arch)?;
    let stale: Vec<&str> = current.iter().copied().filter(|image| *image != target).collect();
    if let Some(custom) = stale.iter().find(|image| !image.starts_with(GCP_RHCOS_IMAGE_PREFIX)) {
        return Ok(Decision::Skipped(SkipReason::GcpCustomImage(custom.to_string())));
    }
    let Some(from) = stale.first().map(|s| s.to_string()) else {
        return Ok(Decision::UpToDate { image: target });
    };
    provider::gcp::set_boot_disk_images(&mut spec, &target)?;
    let user_data_secret = user_data_secret(&spec);
    Ok(Decision::Patch(Patch { provider_spec: spec, from, to: target, user_data_secret }))
}

const AZURE_NO_PLAN: &str = "MarketplaceNoPlan";
const AZURE_WITH_PLAN: &str = "MarketplaceWithPlan";

fn plan_azure(mut spec: Value, arch: Arch, ctx: &PlanContext<'_>) -> Result<Decision, PlanErrorKind> {
    if matches!(arch, Arch::Ppc64le | Arch::S390x) {
        return Ok(Decision::Skipped(SkipReason::AzureArchitecture(arch)));
    }
    for field in ["publisher", "offer", "sku", "version", "resourceID", "type"] {
        check_type(&spec, "", &["image", field], Json::String)?;
    }
    check_type(&spec, "", &["securityProfile", "settings", "securityType"], Json::String)?;
    if let Some(security) = provider::azure::security_type(&spec).filter(|t| !t.is_empty()) {
        return Ok(Decision::Skipped(SkipReason::AzureSecurityType(security.to_string())));
    }
    let current = provider::azure::image(&spec)
        .ok_or_else(|| PlanErrorKind::Field { path: ".image".into(), problem: "is missing".into() })?;
    let (variant, generation) = azure_variant_and_generation(&current, arch)?;
    let Some(image) = ctx.stream.azure_image(arch, variant, generation)? else {
        let stream = ctx.stream.name().to_string();
        return Ok(Decision::Skipped(SkipReason::AzureNoMarketplace { arch, stream }));
    };
    let type_ = if variant.is_paid() { AZURE_WITH_PLAN } else { AZURE_NO_PLAN };
    let target = AzureImage {
        publisher: image.publisher,
        offer: image.offer,
        sku: image.sku,
        version: image.version,
        resource_id: String::new(),
        type_: Some(type_.to_string()),
    };
    if current == target {
        return Ok(Decision::UpToDate { image: azure_urn(&target) });
    }
    provider::azure::set_image(&mut spec, &target)?;
    let user_data_secret = user_data_secret(&spec);
    Ok(Decision::Patch(Patch {
        provider_spec: spec,
        from: azure_urn(&current),
        to: azure_urn(&target),
        user_data_secret,
    }))
}

/// The marketplace offer and VM generation of a MachineSet's current Azure image, as the
/// original infers them: a legacy upload (`resourceID`) or an `azureopenshift` image is the
/// unpaid one; paid offers are known (publisher, offer) pairs.
pub fn azure_variant_and_generation(
    image: &AzureImage,
    arch: Arch,
) -> Result<(AzureVariant, HyperVGen), PlanErrorKind> {
    let legacy = !image.resource_id.is_empty();
    let variant = if legacy || image.publisher == "azureopenshift" {
        AzureVariant::NoPurchasePlan
    } else {
        match (image.publisher.as_str(), image.offer.as_str()) {
            ("redhat", "rh-ocp-worker") => AzureVariant::Ocp,
            ("redhat", "rh-opp-worker") => AzureVariant::Opp,
            ("redhat", "rh-oke-worker") => AzureVariant::Oke,
            ("redhat-limited", "rh-ocp-worker") => AzureVariant::OcpEmea,
            ("redhat-limited", "rh-opp-worker") => AzureVariant::OppEmea,
            ("redhat-limited", "rh-oke-worker") => AzureVariant::OkeEmea,
            _ => {
                return Err(PlanErrorKind::AzureVariant {
                    publisher: image.publisher.clone(),
                    offer: image.offer.clone(),
                });
            }
        }
    };
    let gen2 = if legacy {
        image.resource_id.contains("gen2")
    } else if image.type_.as_deref() == Some(AZURE_NO_PLAN) {
        image.sku.contains("v2") || arch == Arch::Aarch64
    } else {
        !image.sku.contains("gen1")
    };
    Ok((variant, if gen2 { HyperVGen::Gen2 } else { HyperVGen::Gen1 }))
}

fn azure_urn(image: &AzureImage) -> String {
    if !image.resource_id.is_empty() {
        return image.resource_id.clone();
    }
    format!("{}:{}:{}:{}", image.publisher, image.offer, image.sku, image.version)
}

fn plan_vsphere(spec: &Value, arch: Arch, ctx: &PlanContext<'_>) -> Result<Decision, PlanErrorKind> {
    check_type(spec, "", &["template"], Json::String)?;
    check_type(spec, "", &["workspace"], Json::Object)?;
    if ctx.infrastructure.is_some_and(|infra| !infra.has_vsphere_platform_spec()) {
        return Ok(Decision::Skipped(SkipReason::VsphereNotConfigured));
    }
    let ova = ctx.stream.vmware_ova(arch)?;
    let template = provider::vsphere::template(spec).filter(|t| !t.is_empty()).map(str::to_string);
    Ok(Decision::VsphereTemplate { template, ova })
}

/// The RFC 7386 merge patch that turns `old` into `new`: changed keys with their new value,
/// removed keys as `null`, objects recursively; anything else (arrays too) replaced whole.
pub fn merge_patch_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for key in old.keys().filter(|k| !new.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            for (key, value) in new {
                match old.get(key) {
                    Some(before) if before == value => {}
                    Some(before @ Value::Object(_)) if value.is_object() => {
                        patch.insert(key.clone(), merge_patch_diff(before, value));
                    }
                    _ => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}
