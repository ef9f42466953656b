//! What the kubelet config and container runtime config controllers share: which pools a
//! config object selects, the generated MachineConfig's name, content wrapper, owner and
//! finalizer, and the clean-up of generated MachineConfigs of other controller versions.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use mco_api::constants::{GENERATED_BY_CONTROLLER_VERSION_ANNOTATION, MC_NAME_SUFFIX_ANNOTATION};
use mco_api::{ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool};
use mco_ignition::v3::{self, File};

use crate::name::{self, ManagedKey};

/// A KubeletConfig or ContainerRuntimeConfig: an object that selects pools and generates one
/// MachineConfig for each.
pub(crate) trait PoolConfig {
    /// The kind, for the owner reference.
    const KIND: &'static str;
    /// What the generated names end with: `99-<pool>-generated-<WORD>[-<n>]`.
    const WORD: &'static str;
    /// The error when a pool has ten of them already.
    const TOO_MANY: &'static str;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    fn pool_selector(&self) -> Option<&LabelSelector>;
}

impl PoolConfig for KubeletConfig {
    const KIND: &'static str = "KubeletConfig";
    const WORD: &'static str = "kubelet";
    const TOO_MANY: &'static str = "max number of supported kubelet config (10) has been reached. Please delete old kubelet configs before retrying";
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn pool_selector(&self) -> Option<&LabelSelector> {
        self.spec.machine_config_pool_selector.as_ref()
    }
}

impl PoolConfig for ContainerRuntimeConfig {
    const KIND: &'static str = "ContainerRuntimeConfig";
    const WORD: &'static str = "containerruntime";
    const TOO_MANY: &'static str =
        "max number of supported ctrcfgs (10) has been reached. Please delete old ctrcfgs before retrying";
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn pool_selector(&self) -> Option<&LabelSelector> {
        self.spec.machine_config_pool_selector.as_ref()
    }
}

/// What the original's controllers read besides the object being synced.
#[derive(Debug)]
pub struct Cluster<'a, C> {
    /// ControllerConfig `machine-config-controller` (cluster DNS IP, infrastructure).
    pub controller_config: &'a ControllerConfig,
    pub pools: &'a [MachineConfigPool],
    /// Every object of the synced one's kind, the synced one among them (for name suffixes).
    pub configs: &'a [C],
    /// The MachineConfigs that exist.
    pub machine_configs: &'a [MachineConfig],
    /// The controller's version hash, written on generated MachineConfigs.
    pub controller_version: &'a str,
}

impl<C> Clone for Cluster<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for Cluster<'_, C> {}

impl<'a, C> Cluster<'a, C> {
    /// The platform of the ControllerConfig's infrastructure (`""` when it has none).
    pub(crate) fn platform(&self) -> &'a str {
        let infra = self.controller_config.spec.infra.as_ref();
        infra.and_then(|i| i["status"]["platformStatus"]["type"].as_str()).unwrap_or_default()
    }
}

/// What syncing one KubeletConfig or ContainerRuntimeConfig writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sync {
    /// MachineConfigs to create or (when they exist) replace, in pool order.
    pub machine_configs: Vec<MachineConfig>,
    /// MachineConfigs to delete: a pre-4.7 name taken over, generated MachineConfigs of other
    /// controller versions.
    pub deletions: Vec<String>,
    /// The `mc-name-suffix` annotation to set on the config object, when it has none yet.
    pub name_suffix: Option<String>,
    /// The config object's finalizers afterwards (the generated MachineConfigs' names), when
    /// they change.
    pub finalizers: Option<Vec<String>>,
    /// `Ok`, or why the sync stopped; what was computed before stays to be written.
    pub outcome: Result<(), Failure>,
    /// The sync found the generated MachineConfig up to date and stopped without touching the
    /// status (the ContainerRuntimeConfig controller does this).
    pub up_to_date: bool,
}

/// Why a sync failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct Failure {
    /// The message of the config object's condition.
    pub message: String,
    /// The error the original's sync returns (and logs).
    pub error: String,
    /// Whether the original retries: an invalid KubeletConfig waits for a change instead.
    pub retry: bool,
}

impl Failure {
    /// A failure whose condition says `Error: <error>`.
    pub(crate) fn plain(error: String) -> Self {
        Failure { message: format!("Error: {error}"), error, retry: true }
    }

    /// A failure whose condition says `<context>: <error>`.
    pub(crate) fn context(context: &str) -> impl FnOnce(String) -> Self {
        move |error| Failure { message: format!("{context}: {error}"), error, retry: true }
    }
}

/// The pools `cfg` selects, by name; `none` is the error when there are none.
pub(crate) fn pools_for<'a, C: PoolConfig>(
    cfg: &C,
    pools: &'a [MachineConfigPool],
    none: String,
) -> Result<Vec<&'a MachineConfigPool>, Failure> {
    let mut selected = Vec::new();
    for pool in pools {
        if name::selects(cfg, pool).map_err(Failure::plain)? {
            selected.push(pool);
        }
    }
    if selected.is_empty() {
        return Err(Failure::plain(none));
    }
    selected.sort_by_key(|p| p.metadata.name.clone());
    Ok(selected)
}

/// Why upstream's template rendering refuses a ControllerConfig's platform, if it does.
pub(crate) fn platform_error(platform: &str) -> Option<&'static str> {
    match platform {
        "" => Some("cannot generate MachineConfigs when no platformStatus.type is set"),
        "_base" => Some("platform _base unsupported"),
        _ => None,
    }
}

/// A sync's writes as they accumulate, pool by pool.
pub(crate) struct Writer<'a, C> {
    cfg: &'a C,
    all: &'a [C],
    existing: BTreeMap<&'a str, &'a MachineConfig>,
    controller_version: &'a str,
    written: BTreeSet<String>,
    pub sync: Sync,
}

impl<'a, C: PoolConfig> Writer<'a, C> {
    pub fn new(cluster: &Cluster<'a, C>, cfg: &'a C) -> Self {
        Writer {
            cfg,
            all: cluster.configs,
            existing: cluster
                .machine_configs
                .iter()
                .filter_map(|mc| Some((mc.metadata.name.as_deref()?, mc)))
                .collect(),
            controller_version: cluster.controller_version,
            written: BTreeSet::new(),
            sync: Sync {
                machine_configs: Vec::new(),
                deletions: Vec::new(),
                name_suffix: None,
                finalizers: None,
                outcome: Ok(()),
                up_to_date: false,
            },
        }
    }

    /// The name `cfg` writes for `pool` and the MachineConfig there now, if any; a pre-4.7
    /// MachineConfig is copied (its config only) to the new name and deleted.
    pub fn target(&mut self, pool: &MachineConfigPool) -> Result<(ManagedKey, Option<MachineConfig>), String> {
        let existing = &self.existing;
        let key = name::managed_key(pool, self.cfg, self.all, &|n| existing.contains_key(n))?;
        let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
        let current = match &key.renamed_from {
            Some(old) => {
                self.sync.deletions.push(old.clone());
                Some(MachineConfig::for_pool(&key.name, pool_name, self.existing[old.as_str()].spec.config.clone()))
            }
            None => self.existing.get(key.name.as_str()).map(|mc| (*mc).clone()),
        };
        Ok((key, current))
    }

    /// Whether `mc` was generated by this controller version.
    pub fn current_version(&self, mc: &MachineConfig) -> bool {
        let version = mc.metadata.annotations.as_ref().and_then(|a| a.get(GENERATED_BY_CONTROLLER_VERSION_ANNOTATION));
        version.map(String::as_str) == Some(self.controller_version)
    }

    /// Writes `files` to the MachineConfig `name` of `pool` (the existing `current` one or a new
    /// one), records the name suffix and the finalizer; `drop_foreign` drops finalizers that are
    /// not of this kind first.
    pub fn write(
        &mut self,
        pool: &str,
        name: &str,
        current: Option<MachineConfig>,
        files: Vec<File>,
        drop_foreign: bool,
    ) {
        let meta = self.cfg.meta();
        if !meta.annotations.as_ref().is_some_and(|a| a.contains_key(MC_NAME_SUFFIX_ANNOTATION)) {
            self.sync.name_suffix = Some(name::suffix_of(name));
        }
        let mut mc = current.unwrap_or_else(|| MachineConfig::for_pool(name, pool, None));
        let mut ignition = v3::Config::new("3.5.0");
        ignition.storage.files = files;
        let bytes = mco_goser::to_go_json(&ignition, mco_goser::Escaping::Legacy)
            .expect("an Ignition config always serializes");
        mc.spec.config = Some(serde_json::from_slice(&bytes).expect("Go's JSON is JSON"));
        mc.metadata.annotations = Some(BTreeMap::from([(
            GENERATED_BY_CONTROLLER_VERSION_ANNOTATION.to_string(),
            self.controller_version.to_string(),
        )]));
        mc.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "machineconfiguration.openshift.io/v1".into(),
            kind: C::KIND.into(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        self.sync.machine_configs.push(mc);
        let before = self.sync.finalizers.take().or_else(|| meta.finalizers.clone());
        self.sync.finalizers = Some(with_finalizer(before, name, drop_foreign.then_some(C::WORD)));
        self.written.insert(name.to_string());
    }

    /// Ends a sync that got through every pool: generated MachineConfigs (names with `marker`
    /// that `keep` does not spare) of other controller versions are deleted.
    pub fn finish(mut self, marker: &str, keep: impl Fn(&str) -> bool) -> Sync {
        let stale: Vec<String> = self
            .existing
            .iter()
            .filter(|(name, mc)| {
                name.contains(marker)
                    && !keep(name)
                    && !self.written.contains(**name)
                    && !self.sync.deletions.iter().any(|d| d == *name)
                    && !self.current_version(mc)
            })
            .map(|(name, _)| name.to_string())
            .collect();
        self.sync.deletions.extend(stale);
        self.sync
    }
}

/// The finalizers with `name` added; with `own_word`, finalizers without it (older uids) are
/// dropped first, as the kubelet config controller does.
fn with_finalizer(finalizers: Option<Vec<String>>, name: &str, own_word: Option<&str>) -> Vec<String> {
    let mut finalizers = finalizers.unwrap_or_default();
    if own_word.is_some_and(|word| finalizers.iter().any(|f| !f.contains(word))) {
        finalizers.clear();
    }
    if !finalizers.iter().any(|f| f == name) {
        finalizers.push(name.to_string());
    }
    finalizers
}

pub(crate) use mco_ignition::v3::overwriting_file;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizers_name_the_generated_machine_configs() {
        // (finalizers before, MachineConfig written, drop other kinds, finalizers after)
        type Case<'a> = (Option<Vec<String>>, &'a str, bool, &'a [&'a str]);
        let owned = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let w = "99-worker-generated-kubelet";
        let cases: &[Case] = &[
            (None, w, true, &[w]),
            (owned(&[w]), w, true, &[w]),
            (owned(&["99-master-generated-kubelet"]), w, true, &["99-master-generated-kubelet", w]),
            // The kubelet config controller drops finalizers of another kind (older uids)...
            (owned(&["7c1b5b0e", "99-master-generated-kubelet"]), w, true, &[w]),
            // ...the container runtime config controller keeps them.
            (
                owned(&["keep-me"]),
                "99-worker-generated-containerruntime",
                false,
                &["keep-me", "99-worker-generated-containerruntime"],
            ),
        ];
        for (before, name, drop, after) in cases {
            let own = drop.then_some(if name.ends_with("kubelet") { "kubelet" } else { "containerruntime" });
            assert_eq!(with_finalizer(before.clone(), name, own), *after, "{before:?}");
        }
    }
}
