//! The generated MachineConfig of each pool (`syncImageConfig`, `RunImageBootstrap`):
//! `99-<pool>-generated-registries`, holding the pool's registries files as an Ignition 3.5
//! config, owned by the Image config. Every built-in pool gets one whenever the Image config
//! exists, with no files when nothing is configured; none is ever deleted here (they go with the
//! Image config, their owner).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use mco_api::constants::GENERATED_BY_CONTROLLER_VERSION_ANNOTATION;
use mco_api::image_config::{Image, RegistrySources};
use mco_api::{MachineConfig, MachineConfigPool};
use mco_ignition::v3;
use serde_json::Value;

use crate::error::{BootstrapError, SettingsWarning, SyncError};
use crate::files::{BaseFiles, GeneratedFile, registries_files};
use crate::settings::{BlockedAndAllowed, blocked_and_allowed};
use crate::{MirrorRules, RegistrySettings};

/// The label that marks the pools the operator ships (`master`, `worker`, `arbiter`); only these
/// get a registries MachineConfig from the controller (custom pools inherit worker's).
pub const BUILT_IN_POOL_LABEL: &str = "machineconfiguration.openshift.io/mco-built-in";

/// What the sync reads besides the image configuration.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'a> {
    pub pools: &'a [MachineConfigPool],
    /// The MachineConfigs that exist (for the generated ones and their pre-4.7 names).
    pub machine_configs: &'a [MachineConfig],
    /// The controller's version hash, written on generated MachineConfigs.
    pub controller_version: &'a str,
    /// The template files (the same for every role), for a pool none of whose MachineConfigs
    /// writes them ([`BaseFiles::of_pool`]).
    pub base: &'a BaseFiles,
}

/// The image configuration as the controller lists it.
#[derive(Debug, Clone, Copy)]
pub struct ImageInputs<'a> {
    /// The Image config `cluster`; without it nothing is done.
    pub image: Option<&'a Image>,
    /// The ClusterVersion's `status.desired.image`; without a ClusterVersion nothing is done.
    pub release_image: Option<&'a str>,
    pub mirrors: MirrorRules<'a>,
}

/// What one sync writes.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageConfigSync {
    /// The blocked and allowed lists derived, when a sync happened.
    pub blocked_and_allowed: Option<BlockedAndAllowed>,
    /// MachineConfigs to create or (when they exist) replace, in pool name order. Up-to-date ones
    /// (same config, same controller version) are left out.
    pub machine_configs: Vec<MachineConfig>,
    /// Pre-4.7 generated MachineConfigs to delete, their config having moved to the new name.
    pub deletions: Vec<String>,
    /// `Ok`, or why the sync stopped; what was computed before stays to be written.
    pub outcome: Result<(), SyncError>,
}

/// `99-<pool>-generated-registries`.
pub fn machine_config_name(pool: &str) -> String {
    format!("99-{pool}-generated-registries")
}

/// The names of `pool`'s generated registries MachineConfig, now and before 4.7.
pub(crate) fn generated_names(pool: &MachineConfigPool) -> [String; 2] {
    [machine_config_name(pool_name(pool)), deprecated_machine_config_name(pool)]
}

/// The name before 4.7: `99-<pool>-<pool uid>-registries`.
fn deprecated_machine_config_name(pool: &MachineConfigPool) -> String {
    let uid = pool.metadata.uid.as_deref().unwrap_or_default();
    format!("99-{}-{uid}-registries", pool_name(pool))
}

fn pool_name(pool: &MachineConfigPool) -> &str {
    pool.metadata.name.as_deref().unwrap_or_default()
}

/// `syncImageConfig`: the generated MachineConfig of every built-in pool, pools in name order
/// (the original's order is its cache's; each pool's result depends on nothing but the pool).
pub fn sync_image_config(inputs: &ImageInputs, cluster: &Cluster) -> ImageConfigSync {
    let mut sync = ImageConfigSync {
        blocked_and_allowed: None,
        machine_configs: Vec::new(),
        deletions: Vec::new(),
        outcome: Ok(()),
    };
    let (Some(image), Some(release_image)) = (inputs.image, inputs.release_image) else { return sync };
    let lists = match blocked_and_allowed(&image.spec, release_image, &inputs.mirrors) {
        Ok(lists) => lists,
        // Its only error is the release image's.
        Err(_) => {
            sync.outcome = Err(SyncError::ReleaseImage);
            return sync;
        }
    };
    let settings = settings(image.spec.registry_sources.as_ref(), &lists, release_image, lists.allowed.clone());
    sync.blocked_and_allowed = Some(lists);
    let existing: BTreeMap<&str, &MachineConfig> =
        cluster.machine_configs.iter().filter_map(|mc| Some((mc.metadata.name.as_deref()?, mc))).collect();
    let mut pools: Vec<&MachineConfigPool> = cluster
        .pools
        .iter()
        .filter(|p| p.metadata.labels.as_ref().and_then(|l| l.get(BUILT_IN_POOL_LABEL)).is_some_and(|v| v.is_empty()))
        .collect();
    pools.sort_by_key(|p| pool_name(p));
    for pool in pools {
        let name = machine_config_name(pool_name(pool));
        // `GetManagedKey`: a pre-4.7 MachineConfig is copied to the new name and deleted first.
        let current = match existing.get(name.as_str()) {
            Some(mc) => Some((*mc).clone()),
            None => {
                let deprecated = deprecated_machine_config_name(pool);
                existing.get(deprecated.as_str()).map(|old| {
                    sync.deletions.push(deprecated.clone());
                    MachineConfig::for_pool(&name, pool_name(pool), old.spec.config.clone())
                })
            }
        };
        let base = BaseFiles::of_pool(pool, cluster.machine_configs, cluster.base);
        let files = match registries_files(&base, &settings, &inputs.mirrors) {
            Ok(files) => files,
            Err(error) => {
                // The copy under the new name was created before the failure.
                if let Some(copy) = current.filter(|_| !existing.contains_key(name.as_str())) {
                    sync.machine_configs.push(copy);
                }
                sync.outcome = Err(SyncError::Generate(error));
                return sync;
            }
        };
        let config = ignition_config(&files);
        let up_to_date = current.as_ref().is_some_and(|mc| {
            config_bytes(mc.spec.config.as_ref()) == Some(config.clone())
                && mc.metadata.annotations.as_ref().and_then(|a| a.get(GENERATED_BY_CONTROLLER_VERSION_ANNOTATION))
                    == Some(&cluster.controller_version.to_string())
        });
        if up_to_date {
            continue;
        }
        let mut mc = current.unwrap_or_else(|| MachineConfig::for_pool(&name, pool_name(pool), None));
        mc.spec.config = Some(serde_json::from_slice(&config).expect("Go's JSON is JSON"));
        mc.metadata.annotations = Some(BTreeMap::from([(
            GENERATED_BY_CONTROLLER_VERSION_ANNOTATION.to_string(),
            cluster.controller_version.to_string(),
        )]));
        mc.metadata.owner_references = Some(vec![image_owner(
            image.metadata.name.clone().unwrap_or_default(),
            image.metadata.uid.clone().unwrap_or_default(),
        )]);
        sync.machine_configs.push(mc);
    }
    sync
}

/// What the bootstrap generates.
#[derive(Debug, Clone, PartialEq)]
pub struct Bootstrap {
    /// One per pool, in the order given.
    pub machine_configs: Vec<MachineConfig>,
    pub warning: Option<SettingsWarning>,
}

/// `RunImageBootstrap`: the MachineConfigs the sync would write, for every pool given, before the
/// cluster exists. Unlike the sync: no controller version annotation (so that the first sync
/// rewrites them), an owner reference without name and uid, the ControllerConfig's release image
/// (only parsed when there is an Image config), and the allowed registries listed twice (which
/// changes no output).
pub fn bootstrap_image_config(
    pools: &[MachineConfigPool],
    release_image: &str,
    image: Option<&Image>,
    mirrors: &MirrorRules,
    base: &BaseFiles,
) -> Result<Bootstrap, BootstrapError> {
    let (settings, warning) = match image {
        None => (RegistrySettings { release_image: release_image.to_string(), ..Default::default() }, None),
        Some(image) => {
            // Its only error is the release image's.
            let lists =
                blocked_and_allowed(&image.spec, release_image, mirrors).map_err(|_| BootstrapError::ReleaseImage)?;
            let sources = image.spec.registry_sources.as_ref();
            let mut allowed = lists.allowed.clone();
            for scope in sources.and_then(|s| s.allowed_registries.as_ref()).into_iter().flatten() {
                allowed.get_or_insert_with(Vec::new).push(scope.clone());
            }
            (settings(sources, &lists, release_image, allowed), lists.warning)
        }
    };
    let mut machine_configs = Vec::new();
    for pool in pools {
        let files = registries_files(base, &settings, mirrors).map_err(BootstrapError::from)?;
        let config = ignition_config(&files);
        let name = machine_config_name(pool_name(pool));
        let mut mc =
            MachineConfig::for_pool(&name, pool_name(pool), Some(serde_json::from_slice(&config).expect("JSON")));
        mc.metadata.owner_references = Some(vec![image_owner(String::new(), String::new())]);
        machine_configs.push(mc);
    }
    Ok(Bootstrap { machine_configs, warning })
}

/// The arguments of `registriesConfigIgnition`.
fn settings(
    sources: Option<&RegistrySources>,
    lists: &BlockedAndAllowed,
    release_image: &str,
    allowed: Option<Vec<String>>,
) -> RegistrySettings {
    RegistrySettings {
        insecure: sources.and_then(|s| s.insecure_registries.clone()),
        registries_blocked: lists.registries_blocked.clone(),
        policy_blocked: lists.policy_blocked.clone(),
        allowed,
        search: sources.and_then(|s| s.container_runtime_search_registries.clone()),
        release_image: release_image.to_string(),
    }
}

/// `ownerReferenceImageConfig`: neither controller nor blocking deletion.
fn image_owner(name: String, uid: String) -> OwnerReference {
    OwnerReference {
        api_version: "config.openshift.io/v1".into(),
        kind: "Image".into(),
        name,
        uid,
        ..Default::default()
    }
}

/// A MachineConfig's config as the bytes the original compares (clarketm/json, as stored).
fn config_bytes(config: Option<&Value>) -> Option<Vec<u8>> {
    config.map(|c| mco_goser::to_go_json(c, mco_goser::Escaping::Legacy).expect("JSON serializes"))
}

/// The Ignition 3.5 config of `files`, as clarketm/json writes it: each file overwriting, mode
/// 0644, contents a base64 data URL (`dataurl.EncodeBytes`) with empty compression.
pub fn ignition_config(files: &[GeneratedFile]) -> Vec<u8> {
    let mut ignition = v3::Config::new("3.5.0");
    ignition.storage.files =
        files.iter().map(|file| v3::overwriting_file(file.path, file.contents.as_bytes())).collect();
    mco_goser::to_go_json(&ignition, mco_goser::Escaping::Legacy).expect("an Ignition config always serializes")
}

#[cfg(test)]
mod tests {
    use mco_api::image_config::ImageSpec;

    use super::*;
    use crate::error::{IgnitionError, RegistriesError};

    const RELEASE: &str = "quay.io/ocp/release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn pool(name: &str, built_in: Option<&str>) -> MachineConfigPool {
        let mut pool = MachineConfigPool::default();
        pool.metadata.name = Some(name.into());
        pool.metadata.uid = Some(format!("{name}-uid"));
        pool.metadata.labels = built_in.map(|v| BTreeMap::from([(BUILT_IN_POOL_LABEL.to_string(), v.to_string())]));
        pool
    }

    fn image(sources: RegistrySources) -> Image {
        let mut image = Image::new("cluster", ImageSpec { registry_sources: Some(sources), ..Default::default() });
        image.metadata.uid = Some("image-uid".into());
        image
    }

    fn names(sync: &ImageConfigSync) -> Vec<&str> {
        sync.machine_configs.iter().map(|mc| mc.metadata.name.as_deref().unwrap()).collect()
    }

    #[test]
    fn which_pools_get_a_machine_config() {
        let base = BaseFiles::from_templates();
        let pools = [pool("worker", Some("")), pool("master", Some("")), pool("infra", None), pool("odd", Some("x"))];
        let image = image(RegistrySources::default());
        let cluster = Cluster { pools: &pools, machine_configs: &[], controller_version: "v1", base: &base };
        // (Image config, release image, MachineConfigs written)
        let cases: [(Option<&Image>, Option<&str>, Vec<&str>); 3] = [
            (Some(&image), Some(RELEASE), vec!["99-master-generated-registries", "99-worker-generated-registries"]),
            (None, Some(RELEASE), vec![]),
            (Some(&image), None, vec![]),
        ];
        for (image, release_image, want) in cases {
            let inputs = ImageInputs { image, release_image, mirrors: MirrorRules::default() };
            let sync = sync_image_config(&inputs, &cluster);
            assert_eq!(names(&sync), want, "{release_image:?}");
            assert_eq!(sync.outcome, Ok(()));
        }
    }

    #[test]
    fn an_up_to_date_machine_config_is_left_alone() {
        let base = BaseFiles::from_templates();
        let pools = [pool("worker", Some(""))];
        let image = image(RegistrySources::default());
        let inputs = ImageInputs { image: Some(&image), release_image: Some(RELEASE), mirrors: MirrorRules::default() };
        let first = sync_image_config(
            &inputs,
            &Cluster { pools: &pools, machine_configs: &[], controller_version: "v1", base: &base },
        );
        let existing = first.machine_configs;
        for (version, written) in [("v1", 0), ("v2", 1)] {
            let cluster =
                Cluster { pools: &pools, machine_configs: &existing, controller_version: version, base: &base };
            assert_eq!(sync_image_config(&inputs, &cluster).machine_configs.len(), written, "{version}");
        }
    }

    #[test]
    fn a_failure_after_a_rename_keeps_the_rename() {
        let base = BaseFiles::from_templates();
        let pools = [pool("worker", Some(""))];
        let old = MachineConfig::for_pool(
            "99-worker-worker-uid-registries",
            "worker",
            Some(serde_json::json!({"ignition": {"version": "3.2.0"}})),
        );
        let image = image(RegistrySources { insecure_registries: Some(vec!["*.a/b".into()]), ..Default::default() });
        let inputs = ImageInputs { image: Some(&image), release_image: Some(RELEASE), mirrors: MirrorRules::default() };
        let cluster = Cluster {
            pools: &pools,
            machine_configs: std::slice::from_ref(&old),
            controller_version: "v1",
            base: &base,
        };
        let sync = sync_image_config(&inputs, &cluster);
        assert_eq!(names(&sync), ["99-worker-generated-registries"]);
        assert_eq!(sync.machine_configs[0].spec.config, old.spec.config);
        assert_eq!(sync.deletions, ["99-worker-worker-uid-registries"]);
        assert!(matches!(
            sync.outcome,
            Err(SyncError::Generate(IgnitionError::RegistriesConf(RegistriesError::InvalidScope { .. })))
        ));
    }

    #[test]
    fn a_bad_release_image_stops_the_sync_not_a_bootstrap_without_image() {
        let base = BaseFiles::from_templates();
        let pools = [pool("worker", Some(""))];
        let image = image(RegistrySources::default());
        let inputs =
            ImageInputs { image: Some(&image), release_image: Some("release"), mirrors: MirrorRules::default() };
        let cluster = Cluster { pools: &pools, machine_configs: &[], controller_version: "v1", base: &base };
        let sync = sync_image_config(&inputs, &cluster);
        assert_eq!((sync.machine_configs.len(), sync.outcome), (0, Err(SyncError::ReleaseImage)));
        let bootstrap = bootstrap_image_config(&pools, "release", Some(&image), &MirrorRules::default(), &base);
        assert_eq!(bootstrap, Err(BootstrapError::ReleaseImage));
        let bootstrap = bootstrap_image_config(&pools, "release", None, &MirrorRules::default(), &base).unwrap();
        assert_eq!(bootstrap.machine_configs.len(), 1);
    }

    #[test]
    fn ignition_of_no_files_is_the_bare_config() {
        assert_eq!(ignition_config(&[]), br#"{"ignition":{"version":"3.5.0"}}"#);
    }
}
