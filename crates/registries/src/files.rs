//! A pool's registries files (`registriesConfigIgnition`): registries.conf when there are insecure
//! or blocked registries or mirror rules, policy.json when there are blocked or allowed ones, the
//! search registries drop-in when the Image config lists search registries (even an empty list).

use mco_api::{MachineConfig, MachineConfigPool};
use mco_render::select::Selection;

use crate::conf::RegistriesConf;
use crate::edit::edit_registries_conf;
use crate::error::{IgnitionError, RegistriesError};
use crate::policy::update_policy_json;
use crate::sync::generated_names;
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

impl BaseFiles {
    /// What `pool`'s own MachineConfigs write to the two files (the last by name of those it
    /// selects, as the render merges them; its generated registries MachineConfigs left out), each
    /// file falling back to `template`'s. Upstream always starts from its templates, which are
    /// what a pool's `01-<role>-container-runtime` writes on OpenShift; mco has no templates, so a
    /// pool's base is what its own configs say (the lab's insecure registry stays insecure when a
    /// mirror is added). A config that does not parse is skipped: the render refuses it anyway.
    pub fn of_pool(pool: &MachineConfigPool, machine_configs: &[MachineConfig], template: &BaseFiles) -> BaseFiles {
        let mut base = template.clone();
        let Ok(selection) = Selection::new(pool.spec.machine_config_selector.as_ref()) else { return base };
        if !matches!(selection, Selection::Requirements(_)) {
            return base;
        }
        let generated = generated_names(pool);
        let mut selected: Vec<&MachineConfig> = machine_configs
            .iter()
            .filter(|mc| selection.matches(mc.metadata.labels.as_ref()))
            .filter(|mc| !generated.iter().any(|g| mc.metadata.name.as_deref() == Some(g)))
            .collect();
        selected.sort_by_key(|mc| mc.metadata.name.clone());
        for mc in selected {
            let Ok(Some(config)) = mco_render::merge::validate_machine_config(mc) else { continue };
            for file in &config.storage.files {
                let slot = match file.path.as_str() {
                    REGISTRIES_CONF_PATH => &mut base.registries_conf,
                    POLICY_JSON_PATH => &mut base.policy_json,
                    _ => continue,
                };
                let text = mco_ignition::dataurl::decode_contents(&file.contents).ok().map(String::from_utf8);
                if let Some(Ok(text)) = text {
                    *slot = text;
                }
            }
        }
        base
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

    /// A pool's base: its own configs' files by name order, the generated ones left out, the
    /// template for what none writes.
    #[test]
    fn a_pools_base_is_what_its_own_configs_write() {
        use std::collections::BTreeMap;
        let template = BaseFiles::from_templates();
        let mut pool = MachineConfigPool::default();
        pool.metadata.name = Some("worker".into());
        pool.metadata.uid = Some("uid".into());
        pool.spec.machine_config_selector = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some(BTreeMap::from([("machineconfiguration.openshift.io/role".into(), "worker".into())])),
            ..Default::default()
        });
        let mc = |name: &str, role: &str, files: &[(&str, &str)]| {
            let files: Vec<_> =
                files.iter().map(|(path, text)| mco_ignition::v3::overwriting_file(path, text.as_bytes())).collect();
            let config = serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {"files": files}});
            MachineConfig::for_pool(name, role, Some(config))
        };
        let broken = MachineConfig::for_pool("50-worker-broken", "worker", Some(serde_json::json!({"ignition": {}})));
        // (MachineConfigs, registries.conf, policy.json)
        let cases: Vec<(Vec<MachineConfig>, &str, &str)> = vec![
            (vec![], &template.registries_conf, &template.policy_json),
            (vec![mc("00-worker", "worker", &[(REGISTRIES_CONF_PATH, "own\n")])], "own\n", &template.policy_json),
            (
                vec![
                    mc("01-worker", "worker", &[(REGISTRIES_CONF_PATH, "later\n"), (POLICY_JSON_PATH, "{}")]),
                    mc("00-worker", "worker", &[(REGISTRIES_CONF_PATH, "earlier\n")]),
                ],
                "later\n",
                "{}",
            ),
            (
                vec![
                    mc("00-worker", "worker", &[(REGISTRIES_CONF_PATH, "own\n")]),
                    mc("99-worker-generated-registries", "worker", &[(REGISTRIES_CONF_PATH, "generated\n")]),
                    mc("99-worker-uid-registries", "worker", &[(REGISTRIES_CONF_PATH, "old generated\n")]),
                    mc("00-master", "master", &[(REGISTRIES_CONF_PATH, "master's\n")]),
                    broken,
                ],
                "own\n",
                &template.policy_json,
            ),
        ];
        for (mcs, registries_conf, policy_json) in cases {
            let names: Vec<_> = mcs.iter().map(|mc| mc.metadata.name.clone().unwrap()).collect();
            let base = BaseFiles::of_pool(&pool, &mcs, &template);
            assert_eq!(
                (base.registries_conf.as_str(), base.policy_json.as_str()),
                (registries_conf, policy_json),
                "{names:?}"
            );
        }
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
