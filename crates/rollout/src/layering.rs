//! On-cluster layering in the node controller (§3.2–3.4, layered parts): a pool with a
//! MachineOSConfig moves its nodes to a built image, and only once the build of the pool's
//! rendered config has succeeded and been published on the MachineOSConfig
//! (`canLayeredContinue`).

use std::borrow::Borrow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use mco_api::constants::CURRENT_MACHINE_OS_BUILD_ANNOTATION;
use mco_api::machineconfiguration::machine_os_build_condition::{FAILED, SUCCEEDED};
use mco_api::{MachineOSBuild, MachineOSConfig};

/// A layered pool as the node controller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layered {
    /// `mosc.status.currentImagePullSpec` (empty before the first build): the image the nodes run
    /// once updated.
    pub image: String,
    pub build: BuildState,
}

/// Whether a layered pool's nodes may move now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildState {
    /// The build of the pool's rendered config succeeded and is the MachineOSConfig's image.
    Ready,
    /// Not yet (status only), with why.
    Waiting(String),
    /// The build failed: the pool's sync fails until a new build.
    Failed { build: String },
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
    let state = match build {
        None => BuildState::Waiting(format!("no MachineOSBuild of MachineOSConfig {} yet", name(&config.metadata))),
        Some(build) if condition_true(build, FAILED) => BuildState::Failed { build: name(&build.metadata).to_string() },
        Some(build) if !condition_true(build, SUCCEEDED) => {
            BuildState::Waiting(format!("MachineOSBuild {} has not succeeded yet", name(&build.metadata)))
        }
        Some(_) if image.is_empty() => {
            BuildState::Waiting(format!("MachineOSConfig {} has no current image yet", name(&config.metadata)))
        }
        Some(build) => {
            let digested = build.status.as_ref().and_then(|s| s.digested_image_push_spec.as_deref());
            if digested == Some(image.as_str()) {
                BuildState::Ready
            } else {
                BuildState::Waiting(format!(
                    "MachineOSBuild {} is not yet the current image of MachineOSConfig {}",
                    name(&build.metadata),
                    name(&config.metadata)
                ))
            }
        }
    };
    Layered { image, build: state }
}

#[cfg(test)]
mod tests {
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
        let cases = [
            ("no build", config(None, Some(image)), None, "Waiting"),
            ("building", config(None, Some(image)), Some(build("b", "r", &["Building"], None)), "Waiting"),
            ("failed", config(None, Some(image)), Some(build("b", "r", &[FAILED], None)), "Failed"),
            (
                "succeeded, no image on the config",
                config(None, None),
                Some(build("b", "r", &[SUCCEEDED], Some(image))),
                "Waiting",
            ),
            (
                "succeeded, config shows an older image",
                config(None, Some("registry/os@sha256:0")),
                Some(build("b", "r", &[SUCCEEDED], Some(image))),
                "Waiting",
            ),
            (
                "succeeded and published",
                config(None, Some(image)),
                Some(build("b", "r", &[SUCCEEDED], Some(image))),
                "Ready",
            ),
        ];
        for (what, config, build, want) in cases {
            let got = layered(&config, build.as_ref());
            let kind = match got.build {
                BuildState::Ready => "Ready",
                BuildState::Waiting(_) => "Waiting",
                BuildState::Failed { .. } => "Failed",
            };
            assert_eq!(kind, want, "{what}: {got:?}");
        }
        assert_eq!(
            layered(&config(None, Some(image)), Some(&build("b", "r", &[FAILED], None))).build,
            BuildState::Failed { build: "b".into() }
        );
    }
}
