//! On-cluster layering in the node controller: a pool with a
//! MachineOSConfig moves its nodes to a built image, and only once the build of the pool's
//! rendered config has succeeded and been published on the MachineOSConfig
//! (`canLayeredContinue`).

use std::borrow::Borrow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use mco_api::constants::CURRENT_MACHINE_OS_BUILD_ANNOTATION;
use mco_api::machineconfiguration::machine_os_build_condition::{BUILDING, FAILED, PREPARED, SUCCEEDED};
use mco_api::{MachineConfigPool, MachineOSBuild, MachineOSConfig};

/// A layered pool as the node controller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layered {
    /// `mosc.status.currentImagePullSpec` (empty before the first build): the image the nodes run
    /// once updated.
    pub image: String,
    pub build: BuildState,
}

/// Where the build of a layered pool's rendered config is; the nodes move only when [`Ready`](Self::Ready).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildState {
    /// No MachineOSBuild of the rendered config yet (`config`: the MachineOSConfig).
    NotStarted { config: String },
    /// The build is prepared or building.
    Running { build: String },
    /// The build failed: the pool's sync fails until a new build.
    Failed { build: String },
    /// The build has no outcome and is not running (no conditions yet, or interrupted).
    Stalled { build: String },
    /// The build succeeded but its image is not (yet) the MachineOSConfig's current image.
    Unpublished { build: String, config: String },
    /// The build succeeded and is the MachineOSConfig's current image.
    Ready,
    /// Nothing is built: a plain pool whose OS image tag the controller resolved again on request
    /// ([`mco_api::constants::RESOLVED_OS_IMAGE_ANNOTATION`]) moves its nodes to that digest like a built image.
    Resolved,
}

impl BuildState {
    /// Why the pool's nodes wait (status only), or `None` when they may move or the build failed.
    pub fn waiting(&self) -> Option<String> {
        match self {
            BuildState::NotStarted { config } => Some(format!("no MachineOSBuild of MachineOSConfig {config} yet")),
            BuildState::Running { build } | BuildState::Stalled { build } => {
                Some(format!("MachineOSBuild {build} has not succeeded yet"))
            }
            BuildState::Unpublished { build, config } => {
                Some(format!("MachineOSBuild {build} is not yet the current image of MachineOSConfig {config}"))
            }
            BuildState::Failed { .. } | BuildState::Ready | BuildState::Resolved => None,
        }
    }

    /// Upstream's `isLayeredPoolBuilding`: a build that keeps the pool from being updated, whatever
    /// its nodes say (running, failed, or succeeded and not yet published). No build at all does not.
    pub fn holds_the_pool(&self) -> bool {
        matches!(self, BuildState::Running { .. } | BuildState::Failed { .. } | BuildState::Unpublished { .. })
    }
}

/// A plain pool's image target: the digest its OS image tag was resolved to again on request, for
/// the config the pool targets.
pub fn resolved(pool: &MachineConfigPool) -> Option<Layered> {
    let image = pool.resolved_target_os_image()?;
    Some(Layered { image: image.to_string(), build: BuildState::Resolved })
}

/// The MachineOSConfig of `pool` (`spec.machineConfigPool.name`), if the pool is layered.
pub fn config_for_pool<'a>(pool: &str, configs: &'a [impl Borrow<MachineOSConfig>]) -> Option<&'a MachineOSConfig> {
    configs.iter().map(Borrow::borrow).find(|c| c.spec.machine_config_pool.name == pool)
}

fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// The pool's MachineOSBuild for its rendered config `target`: the one the MachineOSConfig's
/// `current-machine-os-build` annotation names when it builds `target`, else any build of this
/// MachineOSConfig and `target`. Also whether the annotation is stale (it names a build of another
/// rendered config) and is to be removed.
pub fn choose_build<'a>(
    config: &MachineOSConfig,
    builds: &'a [impl Borrow<MachineOSBuild>],
    target: &str,
) -> (Option<&'a MachineOSBuild>, bool) {
    let builds_target = |b: &&MachineOSBuild| b.spec.machine_config.name == target;
    let annotated = config
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CURRENT_MACHINE_OS_BUILD_ANNOTATION))
        .and_then(|wanted| builds.iter().map(Borrow::borrow).find(|b| name(&b.metadata) == wanted));
    if let Some(build) = annotated.filter(builds_target) {
        return (Some(build), false);
    }
    let any = builds
        .iter()
        .map(Borrow::borrow)
        .filter(|b| b.spec.machine_os_config.name == name(&config.metadata))
        .find(builds_target);
    (any, annotated.is_some())
}

fn condition_true(build: &MachineOSBuild, kind: &str) -> bool {
    let conditions: &[Condition] = build.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    conditions.iter().any(|c| c.type_ == kind && c.status == "True")
}

/// `canLayeredContinue`: the pool's nodes move once `build` succeeded and its image is the
/// MachineOSConfig's current image.
pub fn layered(config: &MachineOSConfig, build: Option<&MachineOSBuild>) -> Layered {
    let image = config.status.as_ref().and_then(|s| s.current_image_pull_spec.clone()).unwrap_or_default();
    let config_name = name(&config.metadata).to_string();
    let Some(build) = build else { return Layered { image, build: BuildState::NotStarted { config: config_name } } };
    let build_name = name(&build.metadata).to_string();
    let state = if condition_true(build, FAILED) {
        BuildState::Failed { build: build_name }
    } else if condition_true(build, SUCCEEDED) {
        let digested = build.status.as_ref().and_then(|s| s.digested_image_push_spec.as_deref());
        if !image.is_empty() && digested == Some(image.as_str()) {
            BuildState::Ready
        } else {
            BuildState::Unpublished { build: build_name, config: config_name }
        }
    } else if condition_true(build, BUILDING) || condition_true(build, PREPARED) {
        BuildState::Running { build: build_name }
    } else {
        BuildState::Stalled { build: build_name }
    };
    Layered { image, build: state }
}

#[cfg(test)]
mod tests {
    use mco_api::machineconfiguration::machine_os_build_condition::INTERRUPTED;
    use serde_json::json;

    use super::*;

    fn config(annotation: Option<&str>, image: Option<&str>) -> MachineOSConfig {
        let mut annotations = serde_json::Map::new();
        if let Some(a) = annotation {
            annotations.insert(CURRENT_MACHINE_OS_BUILD_ANNOTATION.into(), json!(a));
        }
        serde_json::from_value(json!({
            "metadata": {"name": "layered", "annotations": annotations},
            "spec": {"machineConfigPool": {"name": "layered"}, "imageBuilder": {"imageBuilderType": "Job"},
                     "renderedImagePushSecret": {"name": "push"}, "renderedImagePushSpec": "registry/os:latest"},
            "status": {"currentImagePullSpec": image},
        }))
        .unwrap()
    }

    /// A build of `rendered` with its conditions set to True.
    fn build(name: &str, rendered: &str, conditions: &[&str], digest: Option<&str>) -> MachineOSBuild {
        let conditions: Vec<_> = conditions
            .iter()
            .map(|c| json!({"type": c, "status": "True", "reason": c, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"machineConfig": {"name": rendered}, "machineOSConfig": {"name": "layered"},
                     "renderedImagePushSpec": format!("registry/os:{name}")},
            "status": {"conditions": conditions, "digestedImagePushSpec": digest},
        }))
        .unwrap()
    }

    #[test]
    fn the_pool_config() {
        let configs = [config(None, None)];
        assert!(config_for_pool("layered", &configs).is_some());
        assert!(config_for_pool("worker", &configs).is_none());
    }

    #[test]
    fn choosing_the_build() {
        let builds = [build("old", "rendered-1", &[SUCCEEDED], None), build("new", "rendered-2", &[], None)];
        let chosen = |annotation, target| {
            let (build, stale) = choose_build(&config(annotation, None), &builds, target);
            (build.map(|b| name(&b.metadata).to_string()), stale)
        };
        let cases = [
            ("annotation names the target's build", Some("new"), "rendered-2", (Some("new"), false)),
            ("annotation stale: another config's build", Some("old"), "rendered-2", (Some("new"), true)),
            ("no annotation", None, "rendered-2", (Some("new"), false)),
            ("annotation names no build", Some("gone"), "rendered-2", (Some("new"), false)),
            ("no build of the target", None, "rendered-3", (None, false)),
        ];
        for (what, annotation, target, (want, stale)) in cases {
            assert_eq!(chosen(annotation, target), (want.map(str::to_string), stale), "{what}");
        }
    }

    #[test]
    fn can_layered_continue() {
        let image = "registry/os@sha256:1";
        let published = config(None, Some(image));
        let cases = [
            ("no build", published.clone(), None, BuildState::NotStarted { config: "layered".into() }),
            ("prepared", published.clone(), Some(build("b", "r", &[PREPARED], None)), running()),
            ("building", published.clone(), Some(build("b", "r", &[BUILDING], None)), running()),
            ("no conditions yet", published.clone(), Some(build("b", "r", &[], None)), stalled()),
            ("interrupted", published.clone(), Some(build("b", "r", &[INTERRUPTED], None)), stalled()),
            (
                "failed",
                published.clone(),
                Some(build("b", "r", &[FAILED], None)),
                BuildState::Failed { build: "b".into() },
            ),
            (
                "succeeded, no image on the config",
                config(None, None),
                Some(build("b", "r", &[SUCCEEDED], Some(image))),
                unpublished(),
            ),
            (
                "succeeded, config shows an older image",
                config(None, Some("registry/os@sha256:0")),
                Some(build("b", "r", &[SUCCEEDED], Some(image))),
                unpublished(),
            ),
            (
                "succeeded and published",
                published.clone(),
                Some(build("b", "r", &[SUCCEEDED], Some(image))),
                BuildState::Ready,
            ),
        ];
        for (what, config, build, want) in cases {
            assert_eq!(layered(&config, build.as_ref()).build, want, "{what}");
        }
    }

    fn running() -> BuildState {
        BuildState::Running { build: "b".into() }
    }

    fn stalled() -> BuildState {
        BuildState::Stalled { build: "b".into() }
    }

    fn unpublished() -> BuildState {
        BuildState::Unpublished { build: "b".into(), config: "layered".into() }
    }

    #[test]
    fn what_each_build_state_means_for_the_pool() {
        let (b, c) = (|| "b".to_string(), || "c".to_string());
        let cases = [
            (BuildState::NotStarted { config: c() }, Some("no MachineOSBuild of MachineOSConfig c yet"), false),
            (BuildState::Running { build: b() }, Some("MachineOSBuild b has not succeeded yet"), true),
            (BuildState::Stalled { build: b() }, Some("MachineOSBuild b has not succeeded yet"), false),
            (BuildState::Failed { build: b() }, None, true),
            (
                BuildState::Unpublished { build: b(), config: c() },
                Some("MachineOSBuild b is not yet the current image of MachineOSConfig c"),
                true,
            ),
            (BuildState::Ready, None, false),
        ];
        for (state, waiting, holds) in cases {
            assert_eq!(state.waiting().as_deref(), waiting, "{state:?}");
            assert_eq!(state.holds_the_pool(), holds, "{state:?}");
        }
    }
}
