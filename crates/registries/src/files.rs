//! A pool's registries files (`registriesConfigIgnition`): registries.conf when there are insecure
//! or blocked registries or mirror rules, policy.json when there are blocked or allowed ones, the
//! search registries drop-in when the Image config lists search registries (even an empty list).

use crate::conf::RegistriesConf;
use crate::edit::edit_registries_conf;
use crate::error::{IgnitionError, RegistriesError};
use crate::policy::update_policy_json;
use crate::validate::validate_scopes_and_mirrors;
use crate::{MirrorRules, RegistrySettings};

/// Where the files go on the node.
pub const REGISTRIES_CONF_PATH: &str = "/etc/containers/registries.conf";
pub const POLICY_JSON_PATH: &str = "/etc/containers/policy.json";
pub const SEARCH_REGISTRIES_DROPIN_PATH: &str = "/etc/containers/registries.conf.d/01-image-searchRegistries.conf";

/// The files the pools' templates carry, which the generated ones replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseFiles {
    /// The template's `/etc/containers/registries.conf`.
    pub registries_conf: String,
    /// The template's `/etc/containers/policy.json`.
    pub policy_json: String,
}

impl BaseFiles {
    /// The files of the original's templates (`templates/<role>/01-<role>-container-runtime/
    /// _base/files/{container-registries,policy}.yaml`, the same for every role).
    pub fn from_templates() -> Self {
        let inline = |template: &str| {
            let file = mco_goser::yaml_documents(template).expect("the templates are YAML").remove(0);
            file["contents"]["inline"].as_str().expect("the templates have inline contents").to_string()
        };
        BaseFiles {
            registries_conf: inline(include_str!("../templates/container-registries.yaml")),
            policy_json: inline(include_str!("../templates/policy.yaml")),
        }
    }
}

/// A file to write on the node, with its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    pub path: &'static str,
    pub contents: String,
}

/// `updateRegistriesConfig`: `base` with the insecure and blocked scopes and the mirror rules,
/// after checking them all, in BurntSushi/toml's encoding.
pub fn update_registries_conf(
    base: &str,
    insecure: &[String],
    blocked: &[String],
    mirrors: &MirrorRules,
) -> Result<String, RegistriesError> {
    let mut conf = RegistriesConf::parse(base)?;
    let (digest, tag) = (mirrors.digest_sets(), mirrors.tag_sets());
    validate_scopes_and_mirrors(insecure, blocked, &[], &digest, &tag)?;
    edit_registries_conf(&mut conf, insecure, blocked, &digest, &tag)?;
    Ok(conf.to_toml())
}

/// `updateSearchRegistriesConfig`: the drop-in that sets `unqualified-search-registries`.
pub fn search_registries_dropin(search: &[String]) -> String {
    RegistriesConf { unqualified_search_registries: Some(search.to_vec()), ..Default::default() }.to_toml()
}

/// The files of one pool, in the order of its Ignition config.
pub fn registries_files(
    base: &BaseFiles,
    settings: &RegistrySettings,
    mirrors: &MirrorRules,
) -> Result<Vec<GeneratedFile>, IgnitionError> {
    let mut files = Vec::new();
    let list = |l: &Option<Vec<String>>| l.clone().unwrap_or_default();
    if settings.insecure.is_some() || settings.registries_blocked.is_some() || !mirrors.is_empty() {
        let contents = update_registries_conf(
            &base.registries_conf,
            &list(&settings.insecure),
            &list(&settings.registries_blocked),
            mirrors,
        )
        .map_err(IgnitionError::RegistriesConf)?;
        files.push(GeneratedFile { path: REGISTRIES_CONF_PATH, contents });
    }
    if settings.policy_blocked.is_some() || settings.allowed.is_some() {
        let contents = update_policy_json(
            &base.policy_json,
            &list(&settings.policy_blocked),
            &list(&settings.allowed),
            &settings.release_image,
        )
        .map_err(IgnitionError::PolicyJson)?;
        files.push(GeneratedFile { path: POLICY_JSON_PATH, contents });
    }
    if let Some(search) = &settings.search {
        files.push(GeneratedFile { path: SEARCH_REGISTRIES_DROPIN_PATH, contents: search_registries_dropin(search) });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_bases() {
        let base = BaseFiles::from_templates();
        assert_eq!(
            base.registries_conf,
            "unqualified-search-registries = ['registry.access.redhat.com', 'docker.io']\n"
        );
        assert!(base.policy_json.contains("\"docker-daemon\""));
    }

    #[test]
    fn which_files_are_written() {
        let base = BaseFiles::from_templates();
        let some = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        // (settings, paths)
        let cases: Vec<(RegistrySettings, Vec<&str>)> = vec![
            (RegistrySettings::default(), vec![]),
            (RegistrySettings { insecure: some(&[]), ..Default::default() }, vec![REGISTRIES_CONF_PATH]),
            (
                RegistrySettings { registries_blocked: some(&["b.io"]), ..Default::default() },
                vec![REGISTRIES_CONF_PATH],
            ),
            (RegistrySettings { policy_blocked: some(&["b.io"]), ..Default::default() }, vec![POLICY_JSON_PATH]),
            (RegistrySettings { allowed: some(&["a.io"]), ..Default::default() }, vec![POLICY_JSON_PATH]),
            (RegistrySettings { search: some(&[]), ..Default::default() }, vec![SEARCH_REGISTRIES_DROPIN_PATH]),
        ];
        for (settings, want) in cases {
            let files = registries_files(&base, &settings, &MirrorRules::default()).unwrap();
            assert_eq!(files.iter().map(|f| f.path).collect::<Vec<_>>(), want, "{settings:?}");
        }
    }
}
