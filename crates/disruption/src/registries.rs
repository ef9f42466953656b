//! Whether a change of `/etc/containers/registries.conf` is safe without draining the node
//! (`isSafeContainerRegistryConfChanges`): only additions that cannot change which image a
//! running pod resolves to are safe: mirrors used for pulls by digest only, new registries whose
//! mirrors are all digest-only, and new unqualified-search registries at the end of the list.

use std::collections::BTreeMap;

use mco_ignition::v3;
use serde::Deserialize;

use crate::policy::REGISTRIES_CONF;

/// The file cannot be read from a config.
#[derive(Debug, thiserror::Error)]
pub enum RegistriesError {
    #[error("{REGISTRIES_CONF} in the {which} config: {source}")]
    Contents {
        which: &'static str,
        #[source]
        source: mco_ignition::dataurl::ContentsError,
    },
    #[error("{REGISTRIES_CONF} in the {which} config is not valid TOML: {source}")]
    Toml {
        which: &'static str,
        #[source]
        source: toml::de::Error,
    },
}

const DIGEST_ONLY: &str = "digest-only";

/// containers-registries.conf(5) version 2, the fields the safety rules look at.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct RegistriesConf {
    unqualified_search_registries: Vec<String>,
    #[serde(rename = "registry")]
    registries: Vec<Registry>,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct Registry {
    prefix: String,
    location: String,
    insecure: bool,
    blocked: bool,
    mirror_by_digest_only: bool,
    #[serde(rename = "mirror")]
    mirrors: Vec<Mirror>,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct Mirror {
    location: String,
    insecure: bool,
    pull_from_mirror: String,
}

impl Registry {
    /// What identifies a registry entry: its prefix, or its location when it has none.
    fn scope(&self) -> &str {
        if self.prefix.is_empty() { &self.location } else { &self.prefix }
    }

    fn mirror(&self, location: &str) -> Option<&Mirror> {
        self.mirrors.iter().find(|m| m.location == location)
    }
}

fn read(config: &v3::Config, which: &'static str) -> Result<RegistriesConf, RegistriesError> {
    let Some(file) = config.storage.files.iter().find(|f| f.path == REGISTRIES_CONF) else {
        return Ok(RegistriesConf::default());
    };
    let data = mco_ignition::dataurl::decode_contents(&file.contents)
        .map_err(|source| RegistriesError::Contents { which, source })?;
    toml::from_str(&String::from_utf8_lossy(&data)).map_err(|source| RegistriesError::Toml { which, source })
}

/// `None` when the change is safe, else why it is not.
pub fn unsafe_change(old: &v3::Config, new: &v3::Config) -> Result<Option<String>, RegistriesError> {
    Ok(unsafe_conf_change(&read(old, "old")?, &read(new, "new")?))
}

fn unsafe_conf_change(old: &RegistriesConf, new: &RegistriesConf) -> Option<String> {
    if !new.unqualified_search_registries.starts_with(&old.unqualified_search_registries) {
        return Some("unqualified-search-registries were removed or reordered".into());
    }
    let by_scope = |conf: &RegistriesConf| -> BTreeMap<String, Registry> {
        conf.registries.iter().map(|r| (r.scope().to_string(), r.clone())).collect()
    };
    let (old, new) = (by_scope(old), by_scope(new));
    if let Some(scope) = old.keys().find(|scope| !new.contains_key(*scope)) {
        return Some(format!("registry {scope} was removed"));
    }
    for (scope, reg) in &new {
        let Some(before) = old.get(scope) else {
            let all_digest_only = if reg.mirrors.is_empty() {
                reg.mirror_by_digest_only
            } else {
                reg.mirrors.iter().all(|m| m.pull_from_mirror == DIGEST_ONLY)
            };
            if !all_digest_only {
                return Some(format!(
                    "registry {scope} was added with mirrors not limited to pull-from-mirror = \"digest-only\""
                ));
            }
            continue;
        };
        if before == reg {
            continue;
        }
        for (field, was, is) in [
            ("prefix", before.prefix.clone(), reg.prefix.clone()),
            ("location", before.location.clone(), reg.location.clone()),
            ("blocked", before.blocked.to_string(), reg.blocked.to_string()),
            ("insecure", before.insecure.to_string(), reg.insecure.to_string()),
        ] {
            if was != is {
                return Some(format!("{field} of registry {scope} changed from {was:?} to {is:?}"));
            }
        }
        if let Some(gone) = before.mirrors.iter().find(|m| reg.mirror(&m.location).is_none()) {
            return Some(format!("mirror {} of registry {scope} was removed", gone.location));
        }
        for mirror in &reg.mirrors {
            match before.mirror(&mirror.location) {
                Some(old_mirror)
                    if mirror.pull_from_mirror != old_mirror.pull_from_mirror
                        && mirror.pull_from_mirror != DIGEST_ONLY =>
                {
                    return Some(format!(
                        "pull-from-mirror of mirror {} of registry {scope} changed from {:?} to {:?}",
                        mirror.location, old_mirror.pull_from_mirror, mirror.pull_from_mirror
                    ));
                }
                Some(_) => {}
                None if mirror.pull_from_mirror != DIGEST_ONLY && !reg.mirror_by_digest_only => {
                    return Some(format!(
                        "mirror {} was added to registry {scope} with pull-from-mirror {:?}",
                        mirror.location, mirror.pull_from_mirror
                    ));
                }
                None => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(old: &str, new: &str) -> Option<String> {
        unsafe_conf_change(&toml::from_str(old).unwrap(), &toml::from_str(new).unwrap())
    }

    const BASE: &str = r#"
unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]
[[registry]]
prefix = ""
location = "quay.io/openshift"
[[registry.mirror]]
location = "mirror.local/openshift"
pull-from-mirror = "digest-only"
"#;

    #[test]
    fn safe_changes() {
        let cases = [
            ("unchanged", BASE.to_string()),
            ("search registry appended", BASE.replace(r#""docker.io"]"#, r#""docker.io", "example.com"]"#)),
            (
                "digest-only mirror added",
                format!(
                    "{BASE}[[registry.mirror]]\nlocation = \"second.local/os\"\npull-from-mirror = \"digest-only\"\n"
                ),
            ),
            (
                "registry added with digest-only mirrors",
                format!(
                    "{BASE}[[registry]]\nlocation = \"a.io\"\n[[registry.mirror]]\nlocation = \"m.local/a\"\npull-from-mirror = \"digest-only\"\n"
                ),
            ),
            (
                "registry added, mirror-by-digest-only, no mirrors",
                format!("{BASE}[[registry]]\nlocation = \"b.io\"\nmirror-by-digest-only = true\n"),
            ),
        ];
        for (what, new) in cases {
            assert_eq!(verdict(BASE, &new), None, "{what}");
        }
    }

    #[test]
    fn unsafe_changes() {
        let cases = [
            (
                "search registries reordered",
                BASE.replace(
                    r#"["registry.access.redhat.com", "docker.io"]"#,
                    r#"["docker.io", "registry.access.redhat.com"]"#,
                ),
                "unqualified-search-registries were removed or reordered",
            ),
            (
                "search registry removed",
                BASE.replace(r#", "docker.io""#, ""),
                "unqualified-search-registries were removed or reordered",
            ),
            (
                "registry removed",
                "unqualified-search-registries = [\"registry.access.redhat.com\", \"docker.io\"]\n".to_string(),
                "registry quay.io/openshift was removed",
            ),
            (
                "blocked",
                BASE.replace("prefix = \"\"", "prefix = \"\"\nblocked = true"),
                "blocked of registry quay.io/openshift changed from \"false\" to \"true\"",
            ),
            (
                "insecure",
                BASE.replace("prefix = \"\"", "prefix = \"\"\ninsecure = true"),
                "insecure of registry quay.io/openshift changed from \"false\" to \"true\"",
            ),
            (
                "mirror removed",
                BASE.replace("mirror.local/openshift", "other.local/openshift"),
                "mirror mirror.local/openshift of registry quay.io/openshift was removed",
            ),
            (
                "pull-from-mirror loosened",
                BASE.replace("\"digest-only\"", "\"all\""),
                "pull-from-mirror of mirror mirror.local/openshift of registry quay.io/openshift changed from \"digest-only\" to \"all\"",
            ),
            (
                "mirror added for tags",
                format!("{BASE}[[registry.mirror]]\nlocation = \"x.local/os\"\n"),
                "mirror x.local/os was added to registry quay.io/openshift with pull-from-mirror \"\"",
            ),
            (
                "registry added without digest-only",
                format!("{BASE}[[registry]]\nlocation = \"b.io\"\n"),
                "registry b.io was added with mirrors not limited to pull-from-mirror = \"digest-only\"",
            ),
        ];
        for (what, new, why) in cases {
            assert_eq!(verdict(BASE, &new).as_deref(), Some(why), "{what}");
        }
    }

    #[test]
    fn mirror_may_tighten_to_digest_only() {
        let tags = BASE.replace("\"digest-only\"", "\"tag-only\"");
        assert_eq!(verdict(&tags, BASE), None);
    }

    #[test]
    fn prefix_identifies_a_registry() {
        let with_prefix = |location: &str| format!("[[registry]]\nprefix = \"quay.io/x\"\nlocation = \"{location}\"\n");
        assert_eq!(
            verdict(&with_prefix("a.io/x"), &with_prefix("b.io/x")).as_deref(),
            Some("location of registry quay.io/x changed from \"a.io/x\" to \"b.io/x\"")
        );
    }
}
