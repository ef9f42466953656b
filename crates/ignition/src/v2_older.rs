//! Spec 2.0 and 2.1 configs, read the way the original reads them: Ignition's `v2_2.Parse` parses
//! them with their own version's types (keys of later versions are ignored) and brings them to
//! 2.2 with `TranslateFromV2_0` and `TranslateFromV2_1`. Those translators fill in values the
//! older specs cannot express (every file gets a mode and an owner), and the values reach the
//! rendered config, so its name depends on them.

use serde_json::Value;

use crate::v2;

/// Keys spec 2.1 added to 2.0, as dotted paths where `*` is every element of a list.
const ADDED_IN_2_1: &[&str] = &[
    "ignition.timeouts",
    "storage.directories",
    "storage.links",
    "storage.files.*.user.name",
    "storage.files.*.group.name",
    "storage.filesystems.*.mount.label",
    "storage.filesystems.*.mount.uuid",
    "storage.filesystems.*.mount.options",
    "storage.filesystems.*.mount.wipeFilesystem",
    "storage.disks.*.partitions.*.guid",
    "systemd.units.*.enabled",
    // 2.0 knows these only under `create`.
    "passwd.users.*.uid",
    "passwd.users.*.gecos",
    "passwd.users.*.homeDir",
    "passwd.users.*.noCreateHome",
    "passwd.users.*.primaryGroup",
    "passwd.users.*.groups",
    "passwd.users.*.noUserGroup",
    "passwd.users.*.system",
    "passwd.users.*.noLogInit",
    "passwd.users.*.shell",
];

/// Keys spec 2.2 added to 2.1.
const ADDED_IN_2_2: &[&str] = &[
    "ignition.security",
    "storage.files.*.overwrite",
    "storage.files.*.append",
    "storage.directories.*.overwrite",
    "storage.links.*.overwrite",
    "storage.raid.*.options",
    "networkd.units.*.dropins",
];

/// The keys a spec 2.`minor` config cannot have, in the config's JSON: removed, each with an
/// `unused key $.path` warning, as Go's decoder ignores fields its types lack.
pub(crate) fn drop_later_keys(value: &mut Value, minor: u64, warnings: &mut Vec<String>) {
    let later: &[&[&str]] = match minor {
        0 => &[ADDED_IN_2_1, ADDED_IN_2_2],
        1 => &[ADDED_IN_2_2],
        _ => &[],
    };
    for path in later.iter().flat_map(|keys| keys.iter()) {
        let segments: Vec<&str> = path.split('.').collect();
        remove_path(value, &segments, "$", warnings);
    }
}

fn remove_path(value: &mut Value, segments: &[&str], at: &str, warnings: &mut Vec<String>) {
    let Some((first, rest)) = segments.split_first() else { return };
    match (value, *first) {
        (Value::Array(items), "*") => {
            for (i, item) in items.iter_mut().enumerate() {
                remove_path(item, rest, &format!("{at}.{i}"), warnings);
            }
        }
        (Value::Object(map), key) => {
            if !rest.is_empty() {
                if let Some(child) = map.get_mut(key) {
                    remove_path(child, rest, &format!("{at}.{key}"), warnings);
                }
            } else if map.remove(key).is_some() {
                warnings.push(format!("unused key {at}.{key}"));
            }
        }
        _ => {}
    }
}

/// The values `TranslateFromV2_0` (for `minor` 0) and `TranslateFromV2_1` (for 0 and 1) set
/// that a 2.2 config would leave out.
pub(crate) fn translation_defaults(config: &mut v2::Config, minor: u64) {
    if minor >= 2 {
        return;
    }
    if minor == 0 {
        // 2.0 owners are plain numbers (`FileUser{Id int}`), always translated to a set id.
        let id_only = |owner: &Option<v2::NodeOwner>| {
            Some(v2::NodeOwner { id: Some(owner.as_ref().and_then(|o| o.id).unwrap_or(0)), name: String::new() })
        };
        for file in &mut config.storage.files {
            file.user = id_only(&file.user);
            file.group = id_only(&file.group);
        }
        // 2.0's passwordHash is a string; the translator turns "" into no hash.
        for user in &mut config.passwd.users {
            if user.password_hash.as_deref() == Some("") {
                user.password_hash = None;
            }
        }
    }
    // 2.1 owners are structs and modes plain ints; 2.2 makes them pointers, always set.
    for file in &mut config.storage.files {
        file.user.get_or_insert_default();
        file.group.get_or_insert_default();
        file.mode.get_or_insert(0);
    }
    for dir in &mut config.storage.directories {
        dir.user.get_or_insert_default();
        dir.group.get_or_insert_default();
        dir.mode.get_or_insert(0);
    }
    for link in &mut config.storage.links {
        link.user.get_or_insert_default();
        link.group.get_or_insert_default();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::{AnyConfig, parse_value};

    /// The spec 2.2 JSON a config of `version` is read as, and the keys dropped on the way.
    fn read(version: &str, rest: Value) -> (Value, Vec<String>) {
        let mut config = rest;
        config["ignition"] = json!({"version": version});
        let parsed = parse_value(&config).unwrap();
        let AnyConfig::V2(v2) = parsed.config else { panic!("not spec 2") };
        (serde_json::to_value(v2).unwrap(), parsed.warnings)
    }

    #[test]
    fn every_node_gets_the_translators_owner_and_mode() {
        let file = json!({"storage": {"files": [{"filesystem": "root", "path": "/f"}]}});
        let dir = json!({"storage": {"directories": [{"filesystem": "root", "path": "/d"}]}});
        let link = json!({"storage": {"links": [{"filesystem": "root", "path": "/l", "target": "/t"}]}});
        let owned = json!({"storage": {"files": [{"filesystem": "root", "path": "/f", "mode": 420,
            "user": {"id": 7, "name": "core"}, "group": {"name": "wheel"}}]}});
        let cases = [
            // (version, config, JSON pointer, value read)
            ("2.0.0", &file, "/storage/files/0/mode", json!(0)),
            ("2.0.0", &file, "/storage/files/0/user", json!({"id": 0})),
            ("2.0.0", &file, "/storage/files/0/group", json!({"id": 0})),
            ("2.0.0", &owned, "/storage/files/0/user", json!({"id": 7})),
            ("2.0.0", &owned, "/storage/files/0/group", json!({"id": 0})),
            ("2.0.0", &owned, "/storage/files/0/mode", json!(420)),
            ("2.1.0", &file, "/storage/files/0/mode", json!(0)),
            ("2.1.0", &file, "/storage/files/0/user", json!({})),
            ("2.1.0", &owned, "/storage/files/0/user", json!({"id": 7, "name": "core"})),
            ("2.1.0", &owned, "/storage/files/0/group", json!({"name": "wheel"})),
            ("2.1.0", &dir, "/storage/directories/0/mode", json!(0)),
            ("2.1.0", &dir, "/storage/directories/0/group", json!({})),
            ("2.1.0", &link, "/storage/links/0/user", json!({})),
            ("2.1.0", &link, "/storage/links/0/mode", Value::Null),
            ("2.2.0", &file, "/storage/files/0/mode", Value::Null),
            ("2.2.0", &file, "/storage/files/0/user", Value::Null),
            ("2.2.0", &dir, "/storage/directories/0/mode", Value::Null),
        ];
        for (version, config, pointer, want) in cases {
            let (read, _) = read(version, config.clone());
            assert_eq!(read.pointer(pointer).cloned().unwrap_or(Value::Null), want, "{version} {pointer} of {config}");
        }
    }

    #[test]
    fn keys_of_later_versions_are_dropped_with_a_warning() {
        let config = json!({
            "storage": {
                "files": [{"filesystem": "root", "path": "/f", "overwrite": true, "append": true}],
                "directories": [{"filesystem": "root", "path": "/d", "overwrite": true}],
                "raid": [{"name": "md0", "level": "raid1", "options": ["x"]}],
            },
            "systemd": {"units": [{"name": "a.service", "enabled": true}]},
            "networkd": {"units": [{"name": "a.network", "dropins": [{"name": "x.conf"}]}]},
            "passwd": {"users": [{"name": "core", "uid": 1000, "shell": "/bin/sh", "passwordHash": ""}]},
        });
        let cases: [(&str, &[&str]); 3] = [
            (
                "2.0.0",
                &[
                    "$.networkd.units.0.dropins",
                    "$.passwd.users.0.shell",
                    "$.passwd.users.0.uid",
                    "$.storage.directories",
                    "$.storage.files.0.append",
                    "$.storage.files.0.overwrite",
                    "$.storage.raid.0.options",
                    "$.systemd.units.0.enabled",
                ],
            ),
            (
                "2.1.0",
                &[
                    "$.networkd.units.0.dropins",
                    "$.storage.directories.0.overwrite",
                    "$.storage.files.0.append",
                    "$.storage.files.0.overwrite",
                    "$.storage.raid.0.options",
                ],
            ),
            ("2.2.0", &[]),
        ];
        for (version, dropped) in cases {
            let (read, mut warnings) = read(version, config.clone());
            warnings.sort();
            let want: Vec<String> = dropped.iter().map(|k| format!("unused key {k}")).collect();
            assert_eq!(warnings, want, "{version}");
            // 2.0's passwordHash is a plain string: "" is no hash; 2.1 keeps the empty hash.
            let hash = read.pointer("/passwd/users/0/passwordHash").cloned();
            assert_eq!(hash, (version != "2.0.0").then(|| json!("")), "{version}");
        }
    }
}
