//! Whether a node running one rendered config can move to another in place
//! (`IsRenderedConfigReconcilable`): only files, units, the core user's SSH keys and password,
//! and OS-level fields may change; everything else needs a reprovisioned machine.

use mco_ignition::v3::{Config, PasswdUser};

/// Storage sections an administrator allowed to change (MachineConfiguration
/// `irreconcilableValidationOverrides.storage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageOverrides {
    pub disks: bool,
    pub filesystems: bool,
    pub raid: bool,
}

impl StorageOverrides {
    /// The overrides of the cluster's MachineConfiguration (none without one).
    pub fn from_configuration(configuration: Option<&mco_api::MachineConfiguration>) -> StorageOverrides {
        use mco_api::operator::IrreconcilableValidationOverridesStorage as Storage;
        let allowed = configuration
            .and_then(|c| c.spec.irreconcilable_validation_overrides.as_ref())
            .and_then(|o| o.storage.as_deref())
            .unwrap_or_default();
        StorageOverrides {
            disks: allowed.contains(&Storage::Disks),
            filesystems: allowed.contains(&Storage::FileSystems),
            raid: allowed.contains(&Storage::Raid),
        }
    }
}

/// `Err` names the first change that cannot be applied in place.
pub fn check(
    old: &Config,
    old_fips: bool,
    new: &Config,
    new_fips: bool,
    overrides: StorageOverrides,
) -> Result<(), String> {
    let report = mco_ignition::validate::validate(new);
    if !report.is_ok() {
        return Err(format!("new Ignition config is invalid: {report}"));
    }
    if old.passwd != new.passwd {
        if old.passwd.groups != new.passwd.groups {
            return Err("ignition Passwd Groups section contains changes".into());
        }
        if let Some(user) = new.passwd.users.iter().find(|u| u.name != "core") {
            return Err(format!(
                "ignition passwd user section contains unsupported changes: user {:?} is not core",
                user.name
            ));
        }
        if let Some(core) = new.passwd.users.last() {
            check_core_user(core)?;
        }
    }
    if old.kernel_arguments != new.kernel_arguments {
        return Err("ignition kargs section contains changes".into());
    }
    let (o, n) = (&old.storage, &new.storage);
    if !overrides.disks && o.disks != n.disks {
        return Err("ignition disks section contains changes".into());
    }
    if !overrides.filesystems && o.filesystems != n.filesystems {
        return Err("ignition filesystems section contains changes".into());
    }
    if !overrides.raid && o.raid != n.raid {
        return Err("ignition raid section contains changes".into());
    }
    if o.directories != n.directories {
        return Err("ignition directories section contains changes".into());
    }
    if o.links != n.links && !n.links.is_empty() {
        return Err("ignition links section contains changes".into());
    }
    for f in &n.files {
        if !f.append.is_empty() {
            return Err(format!("ignition file {} includes append: unsupported", f.path));
        }
        if f.path == "/run/machine-config-daemon-force" {
            return Err(format!("ignition file {} is reserved for the daemon's force file", f.path));
        }
    }
    if old_fips != new_fips {
        return Err(format!(
            "detected change to FIPS flag ({old_fips} -> {new_fips}); FIPS can only be set at install time"
        ));
    }
    Ok(())
}

fn check_core_user(core: &PasswdUser) -> Result<(), String> {
    let only_supported = PasswdUser {
        name: core.name.clone(),
        ssh_authorized_keys: core.ssh_authorized_keys.clone(),
        password_hash: core.password_hash.clone(),
        ..Default::default()
    };
    if *core != only_supported {
        return Err("ignition passwd user section contains unsupported changes: only sshAuthorizedKeys and passwordHash of user core can change".into());
    }
    if core.ssh_authorized_keys.is_empty() && core.password_hash.is_none() {
        return Err("ignition passwd user section contains unsupported changes: user must be core and have 1 or more sshKeys or a passwordHash".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cfg(extra: Value) -> Config {
        let mut base = json!({"ignition": {"version": "3.5.0"}});
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn storage_overrides_from_the_machine_configuration() {
        let with = |storage: Value| {
            let configuration: mco_api::MachineConfiguration = serde_json::from_value(json!({
                "apiVersion": "operator.openshift.io/v1",
                "kind": "MachineConfiguration",
                "metadata": {"name": "cluster"},
                "spec": {"irreconcilableValidationOverrides": {"storage": storage}},
            }))
            .unwrap();
            StorageOverrides::from_configuration(Some(&configuration))
        };
        assert_eq!(StorageOverrides::from_configuration(None), StorageOverrides::default());
        assert_eq!(with(json!([])), StorageOverrides::default());
        assert_eq!(with(json!(["Raid"])), StorageOverrides { raid: true, ..Default::default() });
        assert_eq!(
            with(json!(["Disks", "FileSystems"])),
            StorageOverrides { disks: true, filesystems: true, raid: false }
        );
    }

    #[test]
    fn reconcilability_table() {
        let none = StorageOverrides::default();
        let base = json!({"storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,a"}}], "links": [{"path": "/etc/l", "target": "/t"}]}});
        let cases: Vec<(&str, Value, bool, StorageOverrides, Option<&str>)> = vec![
            (
                "file contents change",
                json!({"storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,b"}}], "links": [{"path": "/etc/l", "target": "/t"}]}}),
                false,
                none,
                None,
            ),
            (
                "new unit",
                json!({"storage": {"links": [{"path": "/etc/l", "target": "/t"}]}, "systemd": {"units": [{"name": "x.service", "contents": "[Unit]"}]}}),
                false,
                none,
                None,
            ),
            (
                "core ssh keys",
                json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k"]}]}}),
                false,
                none,
                None,
            ),
            ("removing all links is allowed", json!({}), false, none, None),
            (
                "links change",
                json!({"storage": {"links": [{"path": "/etc/l", "target": "/u"}]}}),
                false,
                none,
                Some("links section"),
            ),
            (
                "other user",
                json!({"passwd": {"users": [{"name": "admin", "sshAuthorizedKeys": ["k"]}]}}),
                false,
                none,
                Some("is not core"),
            ),
            (
                "core without keys",
                json!({"passwd": {"users": [{"name": "core"}]}}),
                false,
                none,
                Some("1 or more sshKeys"),
            ),
            (
                "core with shell",
                json!({"passwd": {"users": [{"name": "core", "shell": "/bin/zsh", "sshAuthorizedKeys": ["k"]}]}}),
                false,
                none,
                Some("only sshAuthorizedKeys and passwordHash"),
            ),
            ("groups", json!({"passwd": {"groups": [{"name": "g"}]}}), false, none, Some("Groups section")),
            ("kargs", json!({"kernelArguments": {"shouldExist": ["a"]}}), false, none, Some("kargs section")),
            (
                "directories",
                json!({"storage": {"directories": [{"path": "/d"}]}}),
                false,
                none,
                Some("directories section"),
            ),
            ("disks", json!({"storage": {"disks": [{"device": "/dev/sdb"}]}}), false, none, Some("disks section")),
            (
                "disks overridden",
                json!({"storage": {"disks": [{"device": "/dev/sdb"}]}}),
                false,
                StorageOverrides { disks: true, ..none },
                None,
            ),
            (
                "filesystems",
                json!({"storage": {"filesystems": [{"device": "/dev/sdb", "format": "xfs"}]}}),
                false,
                none,
                Some("filesystems section"),
            ),
            (
                "raid",
                json!({"storage": {"raid": [{"name": "md", "level": "raid1", "devices": ["/dev/a", "/dev/b"]}]}}),
                false,
                none,
                Some("raid section"),
            ),
            (
                "append",
                json!({"storage": {"files": [{"path": "/etc/b", "append": [{"source": "data:,x"}]}]}}),
                false,
                none,
                Some("append"),
            ),
            (
                "force file",
                json!({"storage": {"files": [{"path": "/run/machine-config-daemon-force", "contents": {"source": "data:,"}}]}}),
                false,
                none,
                Some("force file"),
            ),
            ("fips", json!({}), true, none, Some("FIPS")),
            ("invalid new config", json!({"storage": {"files": [{"path": "rel"}]}}), false, none, Some("invalid")),
        ];
        for (name, new, new_fips, overrides, want) in cases {
            let got = check(&cfg(base.clone()), false, &cfg(new), new_fips, overrides);
            match want {
                None => assert_eq!(got, Ok(()), "{name}"),
                Some(w) => assert!(got.as_ref().is_err_and(|e| e.contains(w)), "{name}: {got:?}"),
            }
        }
    }
}
