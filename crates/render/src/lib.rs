//! Rendering: a MachineConfigPool's MachineConfigs become one immutable `rendered-<pool>-<hash>`
//! MachineConfig, exactly as the original render controller would produce it.
//!
//! [`render`] is pure: it takes the objects, returns the rendered object or the reason the
//! controller would refuse, and never does IO. The controller, the bootstrap server and the
//! `mco render` CLI all call it.

pub mod merge;
pub mod name;
pub mod parallel;
pub mod reconcile;
pub mod select;
pub mod stream_sources;
pub mod streams;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use mco_api::constants::{
    GENERATED_BY_CONTROLLER_VERSION_ANNOTATION, GENERATED_BY_VERSION_ANNOTATION, MAX_RENDERED_CONFIG_SIZE,
    MCFG_API_VERSION, OS_IMAGE_URL_OVERRIDDEN_ANNOTATION, RELEASE_IMAGE_VERSION_ANNOTATION,
    RENDERED_CONFIG_SIZE_WARN_PERCENT,
};
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool, MachineConfigSpec};
use mco_goser::Escaping;
use serde::Serialize;

pub use merge::{BaseImages, Merged};
pub use reconcile::StorageOverrides;
pub use select::Selection;
pub use streams::Streams;

/// The version a controller identifies itself with (Go's `version.Raw` and `version.Hash`).
/// ControllerConfigs and generated MachineConfigs from another version are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerVersion {
    /// Must equal the ControllerConfig's `generated-by-version` annotation.
    pub raw: String,
    /// Written to `generated-by-controller-version` on rendered configs.
    pub hash: String,
}

impl ControllerVersion {
    /// The version of this build.
    pub fn this_build() -> Self {
        let version = env!("CARGO_PKG_VERSION");
        ControllerVersion { raw: format!("v{version}-mco"), hash: format!("mco-{version}") }
    }
}

/// Everything one render of one pool reads.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub pool: &'a MachineConfigPool,
    /// Every MachineConfig in the cluster; the pool's selector picks its own.
    pub machine_configs: &'a [MachineConfig],
    pub controller_config: &'a ControllerConfig,
    pub version: &'a ControllerVersion,
    /// The rendered config the pool currently targets, for the reconcilability check.
    pub current: Option<&'a MachineConfig>,
    pub storage_overrides: StorageOverrides,
    /// The OS image streams; the pool's replaces the ControllerConfig's images as the base.
    pub streams: Streams<'a>,
    /// Rendering from manifests (`mco render`): the OSImageStream is taken as given, whatever
    /// version wrote it.
    pub offline: bool,
}

/// A rendered config and how it came about.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub machine_config: MachineConfig,
    /// Names of the selected MachineConfigs in merge order (the pool's `spec.configuration.source`).
    pub merge_order: Vec<String>,
    /// The serialized spec and the exact bytes that were hashed.
    pub serialized: name::Serialized,
    /// The object as the original's `json.Marshal` writes it; the size limit counts these bytes.
    pub object_json: String,
    /// Things an administrator should know that do not stop the render.
    pub warnings: Vec<String>,
    /// The base OS image the config was rendered from (the pool's stream's, or the
    /// ControllerConfig's), which MachineConfigs may override.
    pub base_os_image: String,
}

/// Why a pool cannot be rendered. Messages match the original controller's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("This machineconfigpool is selecting all machineconfigs. A non-empty selector is required.")]
    SelectingAll,
    #[error(transparent)]
    InvalidSelector(#[from] select::InvalidSelector),
    #[error("no MachineConfigs found matching selector {0}")]
    NoMachineConfigs(String),
    #[error("could not generate rendered MachineConfig: {0}")]
    Generate(String),
    #[error("could not generate rendered MachineConfig: MachineConfig {name}: {field}: {message}")]
    InvalidMachineConfig { name: String, field: String, message: String },
    #[error(
        "size validation failed: rendered MachineConfig {name} is too large ({size} bytes, max {MAX_RENDERED_CONFIG_SIZE} bytes). Reduce the size of the files in the MachineConfigs of this pool"
    )]
    TooLarge { name: String, size: usize },
    #[error("{0}")]
    Unreconcilable(String),
    /// The pool's OS image stream cannot be used (upstream's words).
    #[error("{0}")]
    Stream(String),
    /// The OSImageStream is not this controller's yet: rendered once it is.
    #[error("{0}")]
    StreamNotReady(String),
}

/// Renders one pool, or says why the controller would refuse to.
pub fn render(inputs: Inputs<'_>) -> Result<Rendered, RenderError> {
    let pool_name = inputs.pool.metadata.name.clone().unwrap_or_default();
    let selection = Selection::new(inputs.pool.spec.machine_config_selector.as_ref())?;
    if selection == Selection::Everything {
        return Err(RenderError::SelectingAll);
    }
    let selected: Vec<&MachineConfig> =
        inputs.machine_configs.iter().filter(|mc| selection.matches(mc.metadata.labels.as_ref())).collect();
    if selected.is_empty() {
        return Err(RenderError::NoMachineConfigs(selection.to_string()));
    }
    check_versions(inputs.controller_config, &selected, inputs.version)?;
    // Each config is parsed, validated (contents decoded) and converted on its own.
    let validated = parallel::map(&selected, |mc| Ok((*mc, merge::validate_machine_config(mc)?)))
        .into_iter()
        .collect::<Result<Vec<_>, RenderError>>()?;
    let spec = &inputs.controller_config.spec;
    let version = (!inputs.offline).then_some(inputs.version.hash.as_str());
    let stream = streams::stream_for_pool(inputs.pool, inputs.streams, version).map_err(|e| match e {
        streams::StreamError::NotReady(m) => RenderError::StreamNotReady(m),
        streams::StreamError::Unusable(m) => RenderError::Stream(m),
    })?;
    let stream_name = stream.map(|set| set.name.clone());
    let base = match stream {
        Some(stream) => {
            BaseImages { os_image: stream.os_image.clone(), extensions_image: stream.os_extensions_image.clone() }
        }
        None => BaseImages {
            os_image: spec.base_os_container_image.clone().unwrap_or_default(),
            extensions_image: spec.base_os_extensions_container_image.clone().unwrap_or_default(),
        },
    };
    let merged = merge::merge_machine_configs(validated, &base)?;
    // The spec's JSON and its hash input are written from the merged config side by side. The
    // object holds the spec, so a spec over the limit is refused below whatever its name: then
    // the hash input (as large as the config) need not be kept.
    let drop_hash_input = AtomicBool::new(false);
    let (spec_json, named) = std::thread::scope(|scope| {
        let naming = scope.spawn(|| name::name(&pool_name, &merged, &drop_hash_input));
        let spec_json = name::SpecJson::new(&merged);
        drop_hash_input.store(spec_json.len() > MAX_RENDERED_CONFIG_SIZE, Ordering::Relaxed);
        (spec_json, naming.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    let named = named.map_err(|e| RenderError::Generate(e.to_string()))?;
    let name = named.name;

    if let Some(current) = inputs.current {
        check_reconcilable(current, &merged, &selected, inputs.storage_overrides)?;
    }

    let mut warnings = Vec::new();
    let mut annotations = BTreeMap::from([
        (GENERATED_BY_CONTROLLER_VERSION_ANNOTATION.to_string(), inputs.version.hash.clone()),
        (
            RELEASE_IMAGE_VERSION_ANNOTATION.to_string(),
            cc_annotation(inputs.controller_config, RELEASE_IMAGE_VERSION_ANNOTATION),
        ),
    ]);
    if merged.os_image_url != base.os_image {
        annotations.insert(OS_IMAGE_URL_OVERRIDDEN_ANNOTATION.to_string(), "true".to_string());
        if !merged.os_image_url.contains("@sha256:") {
            warnings.push(format!(
                "osImageURL {} is overridden by a tag, not a digest: nodes may end up on different images",
                merged.os_image_url
            ));
        }
        if streams::named_stream(inputs.pool).is_some() {
            return Err(RenderError::Generate(streams::OVERRIDE_WITH_STREAM.to_string()));
        }
    } else if stream_name.as_deref().is_some_and(streams::is_rhel10_stream) {
        let failed = |e: String| {
            RenderError::Stream(format!("failed to check runc in generated MachineConfig for pool {pool_name}: {e}"))
        };
        if streams::sets_runc(&merged.config, &name).map_err(failed)? {
            return Err(RenderError::Stream(streams::runc_on_rhel10(&pool_name)));
        }
    }
    let owner = OwnerReference {
        api_version: MCFG_API_VERSION.to_string(),
        kind: "MachineConfigPool".to_string(),
        name: pool_name.clone(),
        uid: inputs.pool.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let object_json_head = go_object_json_head(&name, &annotations, &owner);
    let size = object_json_head.len() + spec_json.len() + OBJECT_JSON_END.len();
    if size > MAX_RENDERED_CONFIG_SIZE {
        return Err(RenderError::TooLarge { name, size });
    }
    if size * 100 > MAX_RENDERED_CONFIG_SIZE * RENDERED_CONFIG_SIZE_WARN_PERCENT {
        warnings.push(format!(
            "rendered MachineConfig {name} is {size} bytes, over 80% of the {MAX_RENDERED_CONFIG_SIZE}-byte limit"
        ));
    }
    let spec_json_text = spec_json.to_text();
    let object_json = format!("{object_json_head}{spec_json_text}{OBJECT_JSON_END}");
    let serialized = name::Serialized {
        config_json: spec_json.config_json,
        spec_json: spec_json_text,
        hash_input: named.hash_input.expect("the hash input of a spec within the size limit is never dropped"),
    };

    let config: serde_json::Value =
        serde_json::from_str(&serialized.config_json).expect("the Go JSON writer emits valid JSON");
    let mut machine_config = MachineConfig::new(
        &name,
        MachineConfigSpec {
            os_image_url: merged.os_image_url.clone(),
            base_os_extensions_container_image: merged.base_os_extensions_container_image.clone(),
            config: Some(config),
            kernel_arguments: Some(merged.kernel_arguments.clone()),
            extensions: Some(merged.extensions.clone()),
            fips: merged.fips,
            kernel_type: merged.kernel_type.clone(),
        },
    );
    // `MachineConfig::new` adds the CRD's labels; the original's rendered configs carry none.
    machine_config.metadata.labels = None;
    machine_config.metadata.annotations = Some(annotations);
    machine_config.metadata.owner_references = Some(vec![owner]);
    Ok(Rendered {
        machine_config,
        merge_order: merged.order,
        serialized,
        object_json,
        warnings,
        base_os_image: base.os_image,
    })
}

/// The guards that stop an old controller and a new one from rendering each other's inputs.
fn check_versions(
    cc: &ControllerConfig,
    selected: &[&MachineConfig],
    version: &ControllerVersion,
) -> Result<(), RenderError> {
    match cc.metadata.annotations.as_ref().and_then(|a| a.get(GENERATED_BY_VERSION_ANNOTATION)) {
        None => {
            return Err(RenderError::Generate(format!(
                "Ignoring controller config generated without {GENERATED_BY_VERSION_ANNOTATION} annotation (my version: {})",
                version.raw
            )));
        }
        Some(generated) if *generated != version.raw => {
            return Err(RenderError::Generate(format!(
                "Ignoring controller config generated from {generated} (my version: {})",
                version.raw
            )));
        }
        Some(_) => {}
    }
    for mc in selected {
        let generated =
            mc.metadata.annotations.as_ref().and_then(|a| a.get(GENERATED_BY_CONTROLLER_VERSION_ANNOTATION));
        if let Some(generated) = generated.filter(|g| !g.is_empty() && **g != version.hash) {
            return Err(RenderError::Generate(format!(
                "Ignoring MC {} generated by older version {generated} (my version: {})",
                merge::mc_name(mc),
                version.hash
            )));
        }
    }
    Ok(())
}

fn cc_annotation(cc: &ControllerConfig, key: &str) -> String {
    cc.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned().unwrap_or_default()
}

/// Refuses a render the pool's nodes could not apply in place, naming the MachineConfig that
/// introduces the change when one alone does.
fn check_reconcilable(
    current: &MachineConfig,
    merged: &Merged,
    selected: &[&MachineConfig],
    overrides: StorageOverrides,
) -> Result<(), RenderError> {
    let current_name = current.metadata.name.clone().unwrap_or_default();
    let parse = |mc: &MachineConfig| match &mc.spec.config {
        Some(raw) => mco_ignition::parse_and_convert(raw).map_err(|e| e.to_string()),
        None => Ok(mco_ignition::v3::Config::new(mco_ignition::v3::MAX_VERSION)),
    };
    let old = parse(current)
        .map_err(|e| RenderError::Unreconcilable(format!("parsing current config {current_name:?}: {e}")))?;
    let Err(full) = reconcile::check(&old, current.spec.fips, &merged.config, merged.fips, overrides) else {
        return Ok(());
    };
    let mut component_errors = Vec::new();
    for mc in selected {
        let Ok(alone) = parse(mc) else { continue };
        if let Err(e) = reconcile::check(&old, current.spec.fips, &alone, mc.spec.fips, overrides) {
            if e == full {
                return Err(RenderError::Unreconcilable(format!(
                    "reconciliation failed between current config {current_name:?} and base config {:?}: {e}",
                    merge::mc_name(mc)
                )));
            }
            component_errors.push(e);
        }
    }
    Err(RenderError::Unreconcilable(format!(
        "render reconciliation error: {full}; component errors: {}",
        component_errors.join("; ")
    )))
}

/// The metadata Go serializes for a rendered config, in its field order.
#[derive(Serialize)]
struct GoMetadata<'a> {
    name: &'a str,
    annotations: &'a BTreeMap<String, String>,
    #[serde(rename = "ownerReferences")]
    owner_references: [GoOwner<'a>; 1],
}

#[derive(Serialize)]
struct GoOwner<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
    controller: bool,
    #[serde(rename = "blockOwnerDeletion")]
    block_owner_deletion: bool,
}

/// How the rendered object's JSON ends after the spec.
const OBJECT_JSON_END: &str = "}";

/// Go `json.Marshal` of the rendered object (empty TypeMeta, metadata in Go field order) up to
/// its spec, which follows, then [`OBJECT_JSON_END`].
fn go_object_json_head(name: &str, annotations: &BTreeMap<String, String>, owner: &OwnerReference) -> String {
    let metadata = GoMetadata {
        name,
        annotations,
        owner_references: [GoOwner {
            api_version: &owner.api_version,
            kind: &owner.kind,
            name: &owner.name,
            uid: &owner.uid,
            controller: owner.controller.unwrap_or_default(),
            block_owner_deletion: owner.block_owner_deletion.unwrap_or_default(),
        }],
    };
    format!("{{\"metadata\":{},\"spec\":", name::to_string(&metadata, Escaping::Modern))
}
