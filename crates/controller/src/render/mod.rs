//! The render controller (upstream `pkg/controller/render`): every MachineConfigPool gets a
//! `rendered-<pool>-<hash>` MachineConfig merged from the MachineConfigs its selector picks, and
//! `spec.configuration` pointing at it. What to do is decided here, without IO ([`plan`],
//! [`pools_for_machine_config`]); [`controller`] reads the cluster and carries it out.

pub mod controller;
pub mod os_image;

use std::borrow::Borrow;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::reflector::ObjectRef;
use mco_api::constants::{CONTROLLER_CONFIG_NAME, MCFG_API_VERSION};
use mco_api::machineconfiguration::{
    ControllerConfigStatusCondition, MachineConfigPoolStatusConfiguration, controller_config_condition,
};
use mco_api::{ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool};
use mco_render::{ControllerVersion, Inputs, RenderError, Selection, StorageOverrides, Streams};

/// What one pool needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The pool's selector is `{}`: nothing is rendered and nothing is degraded, only warned about.
    SelectingAll,
    /// The input is bad: `RenderDegraded=True` with this error (the controller adds the
    /// `Failed to render configuration for pool <pool>: ` prefix).
    Degraded(String),
    /// The rendered config must exist and the pool must target it; `RenderDegraded=False`.
    Target(Box<Target>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Created when absent (its name is a hash of its spec, so an existing one is the same).
    pub rendered: MachineConfig,
    /// The new `spec.configuration`, or `None` when the pool already has it.
    pub configuration: Option<MachineConfigPoolStatusConfiguration>,
    /// Release and controller version, for the `RenderedConfigGenerated` event.
    pub release_version: String,
    /// The rendered OS image is not the base (the pool's stream's, or the ControllerConfig's): a
    /// MachineConfig sets `osImageURL` (upstream's `os_image_url_override`).
    pub os_image_url_overridden: bool,
    /// The base OS image the config was rendered from, trusted as the release's.
    pub base_os_image: String,
    pub warnings: Vec<String>,
}

/// Why a pool cannot be rendered yet. Not a problem of the pool: retried without degrading it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("ControllerConfig {CONTROLLER_CONFIG_NAME} not found")]
    NoControllerConfig,
    #[error(
        "status for ControllerConfig {CONTROLLER_CONFIG_NAME} is being reported for {observed}, expecting it for {generation}"
    )]
    StaleStatus { observed: i64, generation: i64 },
    #[error("ControllerConfig has not completed: completed({completed}) running({running}) failing({failing})")]
    NotCompleted { completed: bool, running: bool, failing: bool },
    /// A ContainerRuntimeConfig or KubeletConfig selecting the pool is not synced (upstream's message).
    #[error("{0}")]
    GeneratingControllers(String),
    /// The OSImageStream is not this controller's yet (another version's, or not filled in).
    #[error("{0}")]
    Streams(String),
}

/// The objects whose controllers generate MachineConfigs, which a pool's render waits for.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfigObjects<'a> {
    pub runtime_configs: &'a [ContainerRuntimeConfig],
    pub kubelet_configs: &'a [KubeletConfig],
}

/// Decides what `pool` needs, given every MachineConfig of the cluster; waits for the
/// ControllerConfig and for the controllers generating MachineConfigs from `config_objects`.
pub fn plan(
    pool: &MachineConfigPool,
    machine_configs: &[MachineConfig],
    controller_config: Option<&ControllerConfig>,
    config_objects: ConfigObjects,
    version: &ControllerVersion,
    storage_overrides: StorageOverrides,
    streams: Streams,
) -> Result<Plan, NotReady> {
    // Upstream checks the selector before the ControllerConfig.
    if Selection::new(pool.spec.machine_config_selector.as_ref()).is_ok_and(|s| s == Selection::Everything) {
        return Ok(Plan::SelectingAll);
    }
    let controller_config = controller_config.ok_or(NotReady::NoControllerConfig)?;
    check_completed(controller_config)?;
    mco_kubeletconfig::generating_controllers_completed(
        pool,
        config_objects.runtime_configs,
        config_objects.kubelet_configs,
    )
    .map_err(NotReady::GeneratingControllers)?;

    let current_name = pool.spec.configuration.as_ref().and_then(|c| c.name.as_deref());
    let current =
        current_name.and_then(|name| machine_configs.iter().find(|mc| mc.metadata.name.as_deref() == Some(name)));
    let rendered = match mco_render::render(Inputs {
        pool,
        machine_configs,
        controller_config,
        version,
        current,
        storage_overrides,
        streams,
        offline: false,
    }) {
        Ok(rendered) => rendered,
        Err(RenderError::SelectingAll) => return Ok(Plan::SelectingAll),
        Err(RenderError::StreamNotReady(why)) => return Err(NotReady::Streams(why)),
        Err(e) => return Ok(Plan::Degraded(e.to_string())),
    };

    let name = rendered.machine_config.metadata.name.clone();
    // `source` lists the selected MachineConfigs in name order (upstream sorts its list by name
    // and builds the references from it; only the merge itself puts worker configs first).
    let mut sources = rendered.merge_order.clone();
    sources.sort();
    let mut configuration = pool.spec.configuration.clone().unwrap_or_default();
    let before = configuration.clone();
    configuration.name = name;
    configuration.source = Some(
        sources
            .into_iter()
            .map(|name| ObjectReference {
                kind: Some("MachineConfig".to_string()),
                name: Some(name),
                api_version: Some(MCFG_API_VERSION.to_string()),
                ..Default::default()
            })
            .collect(),
    );
    let release_version = controller_config
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(mco_api::constants::RELEASE_IMAGE_VERSION_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    let os_image_url_overridden = rendered.machine_config.spec.os_image_url != rendered.base_os_image;
    Ok(Plan::Target(Box::new(Target {
        rendered: rendered.machine_config,
        os_image_url_overridden,
        base_os_image: rendered.base_os_image,
        configuration: (configuration != before).then_some(configuration),
        release_version,
        warnings: rendered.warnings,
    })))
}

/// Upstream renders only from a ControllerConfig the template controller has finished with.
fn check_completed(cc: &ControllerConfig) -> Result<(), NotReady> {
    let status = cc.status.clone().unwrap_or_default();
    let generation = cc.metadata.generation.unwrap_or_default();
    let observed = status.observed_generation.unwrap_or_default();
    if generation != observed {
        return Err(NotReady::StaleStatus { observed, generation });
    }
    let conditions = status.conditions.unwrap_or_default();
    let is_true = |type_: &str| {
        conditions.iter().any(|c: &ControllerConfigStatusCondition| c.type_ == type_ && c.status == "True")
    };
    let completed = is_true(controller_config_condition::TEMPLATE_CONTROLLER_COMPLETED);
    let running = is_true(controller_config_condition::TEMPLATE_CONTROLLER_RUNNING);
    let failing = is_true(controller_config_condition::TEMPLATE_CONTROLLER_FAILING);
    if completed && !running && !failing { Ok(()) } else { Err(NotReady::NotCompleted { completed, running, failing }) }
}

/// The pools a MachineConfig event concerns: its controlling pool if it has one (a rendered
/// config), else every pool whose non-empty selector matches its labels, as upstream's
/// `resolveControllerRef` falls through (a generated config is controlled by its KubeletConfig or
/// ContainerRuntimeConfig). Without labels it concerns none (upstream logs an error).
pub fn pools_for_machine_config(
    pools: &[impl Borrow<MachineConfigPool>],
    mc: &MachineConfig,
) -> Vec<ObjectRef<MachineConfigPool>> {
    let pools = pools.iter().map(Borrow::borrow);
    let controller = mc.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    let owning_pool = controller.and_then(|owner| {
        pools.clone().find(|p| {
            owner.kind == "MachineConfigPool"
                && p.metadata.name.as_deref() == Some(&owner.name)
                && p.metadata.uid.as_deref() == Some(&owner.uid)
        })
    });
    if let Some(pool) = owning_pool {
        return vec![ObjectRef::from_obj(pool)];
    }
    let Some(labels) = mc.metadata.labels.as_ref() else {
        return Vec::new();
    };
    pools
        .filter(|p| {
            matches!(
                Selection::new(p.spec.machine_config_selector.as_ref()),
                Ok(ref s @ Selection::Requirements(_)) if s.matches(Some(labels))
            )
        })
        .map(ObjectRef::from_obj)
        .collect()
}

#[cfg(test)]
mod tests;
