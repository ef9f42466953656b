//! The cluster's image configuration → each pool's container registries files, exactly as the
//! original's container runtime config controller writes them
//! (`pkg/controller/container-runtime-config`: `syncImageConfig`, `registriesConfigIgnition`,
//! `updateRegistriesConfig`, `updatePolicyJSON`, `updateSearchRegistriesConfig`,
//! `getValidBlockedAndAllowedRegistries`, `validateRegistriesConfScopes`, `RunImageBootstrap`, and
//! what they call in openshift/runtime-utils and containers/image). Pure: no IO.
//!
//! Inputs are the Image config `cluster` (`spec.registrySources`), the ImageDigestMirrorSets,
//! ImageTagMirrorSets and ImageContentSourcePolicies, the release image, and the pools' template
//! files ([`BaseFiles::from_templates`]). Outputs:
//!
//! * `/etc/containers/registries.conf` ([`update_registries_conf`]): mirrors merged per source
//!   (digest mirrors `pull-from-mirror = "digest-only"`, tag mirrors `"tag-only"`,
//!   `NeverContactSource` as `blocked`), insecure and blocked scopes spread to nested entries,
//!   in BurntSushi/toml's encoding.
//! * `/etc/containers/policy.json` ([`update_policy_json`]): allowed or blocked registries, in Go's
//!   indented JSON.
//! * `/etc/containers/registries.conf.d/01-image-searchRegistries.conf`
//!   ([`search_registries_dropin`]).
//! * Per built-in pool, the MachineConfig `99-<pool>-generated-registries` holding them
//!   ([`sync_image_config`]; [`bootstrap_image_config`] for a new cluster).
//!
//! The release payload's registry is never blocked unless the payload has a mirror outside the
//! blocked scopes ([`blocked_and_allowed`]). Refusals are [`RegistriesError`]s with the original's
//! messages; problems the original only logs are [`SettingsWarning`]s.
//!
//! Not covered: ClusterImagePolicy and ImagePolicy (sigstore verification: their policy.json
//! scopes, per-namespace policies and `registries.d` file), and CRIOCredentialProviderConfig.
//!
//! The bytes are the original's: `testdata/cases` holds its outputs, produced by running its code
//! (`testdata/README.md`).

mod conf;
mod edit;
mod error;
mod files;
mod lookup;
mod policy;
mod reference;
mod scope;
mod settings;
mod sync;
mod validate;

use mco_api::image_config::{ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet};

pub use error::{BootstrapError, IgnitionError, RegistriesError, ScopeList, SettingsWarning, SyncError};
pub use files::{
    BaseFiles, GeneratedFile, POLICY_JSON_PATH, REGISTRIES_CONF_PATH, SEARCH_REGISTRIES_DROPIN_PATH, registries_files,
    search_registries_dropin, update_registries_conf,
};
pub use policy::update_policy_json;
pub use scope::{is_valid_registries_conf_scope, scope_is_nested_inside_scope};
pub use settings::{BlockedAndAllowed, blocked_and_allowed};
pub use sync::{
    BUILT_IN_POOL_LABEL, Bootstrap, Cluster, ImageConfigSync, ImageInputs, bootstrap_image_config, ignition_config,
    machine_config_name, sync_image_config,
};

/// The cluster's mirror objects, in the order they are listed.
#[derive(Debug, Clone, Copy, Default)]
pub struct MirrorRules<'a> {
    pub image_digest_mirror_sets: &'a [ImageDigestMirrorSet],
    pub image_tag_mirror_sets: &'a [ImageTagMirrorSet],
    pub image_content_source_policies: &'a [ImageContentSourcePolicy],
}

impl MirrorRules<'_> {
    /// No mirror objects at all (objects without entries still count, as in the original).
    pub fn is_empty(&self) -> bool {
        self.image_digest_mirror_sets.is_empty()
            && self.image_tag_mirror_sets.is_empty()
            && self.image_content_source_policies.is_empty()
    }
}

/// What a pool's files are made of (the arguments of `registriesConfigIgnition`). Lists are
/// `None` where Go's are nil: an empty `insecure` or `search` list still writes its file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistrySettings {
    /// `spec.registrySources.insecureRegistries`.
    pub insecure: Option<Vec<String>>,
    /// [`BlockedAndAllowed::registries_blocked`].
    pub registries_blocked: Option<Vec<String>>,
    /// [`BlockedAndAllowed::policy_blocked`].
    pub policy_blocked: Option<Vec<String>>,
    /// [`BlockedAndAllowed::allowed`].
    pub allowed: Option<Vec<String>>,
    /// `spec.registrySources.containerRuntimeSearchRegistries`.
    pub search: Option<Vec<String>>,
    /// The release image (for the allowed-and-blocked exception of policy.json).
    pub release_image: String,
}
