//! Spec 2.2 → 3.x: the original's de-duplication followed by ign-converter's translation.

use std::collections::HashSet;

use crate::{v2, v3};

/// Why a spec 2 config cannot become a spec 3 config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Spec2Error {
    #[error("unexpected user with name: {0}. Only core user is supported")]
    NotCoreUser(String),
    #[error("failed to convert Ignition config spec v2 to v3: unable to convert Ignition spec v2 config to v3: {0}")]
    Untranslatable(String),
}

/// Removes the duplicate files, units and users spec 2 allows and spec 3 forbids, keeping the
/// last definition of each, as the original's `removeIgnDuplicateFilesUnitsUsers` does:
/// kept files and units come out in reverse order; a dropped unit's drop-ins that the kept
/// definition lacks are appended to it; all users must be `core` and are folded into one whose
/// SSH keys are the union (last user's first), de-duplicated in order.
pub fn dedupe(mut config: v2::Config) -> Result<v2::Config, Spec2Error> {
    let mut seen_paths = HashSet::new();
    let files = std::mem::take(&mut config.storage.files);
    config.storage.files = files.into_iter().rev().filter(|f| seen_paths.insert(f.path.clone())).collect();

    let mut kept: Vec<v2::Unit> = Vec::new();
    for unit in std::mem::take(&mut config.systemd.units).into_iter().rev() {
        match kept.iter_mut().find(|k| k.name == unit.name) {
            Some(newer) => {
                for dropin in unit.dropins {
                    if !newer.dropins.iter().any(|d| d.name == dropin.name) {
                        newer.dropins.push(dropin);
                    }
                }
            }
            None => kept.push(unit),
        }
    }
    config.systemd.units = kept;

    let mut users = std::mem::take(&mut config.passwd.users);
    if let Some(mut core) = users.pop() {
        if core.name != "core" {
            return Err(Spec2Error::NotCoreUser(core.name));
        }
        for older in users.into_iter().rev() {
            if older.name != "core" {
                return Err(Spec2Error::NotCoreUser(older.name));
            }
            core.ssh_authorized_keys.extend(older.ssh_authorized_keys);
        }
        let mut seen_keys = HashSet::new();
        core.ssh_authorized_keys.retain(|k| seen_keys.insert(k.clone()));
        config.passwd.users = vec![core];
    }
    Ok(config)
}

/// Translates a (de-duplicated) spec 2.2 config to spec 3, the way ign-converter's
/// v2.3 → v3.0 translation does with the filesystem map `{"root": "/"}`. The result carries
/// `version` and must still pass spec 3 validation.
pub fn translate(config: &v2::Config, version: &str) -> Result<v3::Config, Spec2Error> {
    check_translatable(config)?;
    let untranslatable = |msg: &str| Spec2Error::Untranslatable(msg.to_string());
    let ign = &config.ignition;
    let mut out = v3::Config::new(version);
    out.ignition.config.merge = ign.config.append.iter().map(config_reference).collect();
    out.ignition.config.replace = ign.config.replace.as_ref().map(config_reference).unwrap_or_default();
    out.ignition.security.tls.certificate_authorities =
        ign.security.tls.certificate_authorities.iter().map(config_reference).collect();
    out.ignition.timeouts =
        v3::Timeouts { http_response_headers: ign.timeouts.http_response_headers, http_total: ign.timeouts.http_total };

    out.passwd.users = config.passwd.users.iter().map(user).collect();
    out.passwd.groups = config
        .passwd
        .groups
        .iter()
        .map(|g| v3::PasswdGroup {
            gid: g.gid,
            name: g.name.clone(),
            password_hash: non_empty(&g.password_hash),
            system: true_or_none(g.system),
            ..Default::default()
        })
        .collect();
    out.systemd.units = config.systemd.units.iter().map(unit).collect();

    let storage = &config.storage;
    out.storage.disks = storage.disks.iter().map(disk).collect();
    out.storage.raid = storage
        .raid
        .iter()
        .map(|r| v3::Raid {
            devices: r.devices.clone(),
            level: Some(r.level.clone()),
            name: r.name.clone(),
            options: r.options.clone(),
            spares: (r.spares != 0).then_some(r.spares),
        })
        .collect();
    // The root filesystem is implied in spec 3; check_translatable refused every other one.
    if storage.filesystems.iter().any(|fs| fs.name != "root") {
        return Err(untranslatable("only the root filesystem can be translated"));
    }
    out.storage.files = storage.files.iter().map(file).collect();
    out.storage.directories = storage
        .directories
        .iter()
        .map(|d| {
            let (group, overwrite, path, user) = node(&d.group, d.overwrite, &d.path, &d.user);
            v3::Directory { group, overwrite, path, user, mode: d.mode }
        })
        .collect();
    out.storage.links = storage
        .links
        .iter()
        .map(|l| {
            let (group, overwrite, path, user) = node(&l.group, l.overwrite, &l.path, &l.user);
            v3::Link { group, overwrite, path, user, hard: true_or_none(l.hard), target: Some(l.target.clone()) }
        })
        .collect();
    Ok(out)
}

/// The refusals of ign-converter's `Check2_3` that can still happen after de-duplication.
fn check_translatable(config: &v2::Config) -> Result<(), Spec2Error> {
    let fail = |msg: String| Err(Spec2Error::Untranslatable(msg));
    if !config.networkd.units.is_empty() {
        return fail("networkd units are not supported in spec 3; use files in /etc/systemd/network".into());
    }
    if config.passwd.users.iter().any(|u| u.create.is_some()) {
        return fail("Invalid input config: passwd.users.create is deprecated".into());
    }
    for fs in &config.storage.filesystems {
        if fs.name != "root" {
            return fail(format!(
                "Filesystem {:?} is not in the filesystem map; only \"root\" can be translated",
                fs.name
            ));
        }
        if fs.mount.as_ref().is_some_and(|m| m.create.is_some()) {
            return fail("Invalid input config: storage.filesystems.mount.create is deprecated".into());
        }
    }
    let sized_partition = config.storage.disks.iter().flat_map(|d| &d.partitions).any(|p| p.size != 0 || p.start != 0);
    if sized_partition {
        // 2.3 replaced sector sizes with sizeMiB/startMiB; ign-converter refuses the deprecated form.
        return fail("Invalid input config: partition size and start (in sectors) are deprecated".into());
    }
    let nodes = config
        .storage
        .files
        .iter()
        .map(|f| ("File", &f.filesystem, &f.path))
        .chain(config.storage.directories.iter().map(|d| ("Directory", &d.filesystem, &d.path)))
        .chain(config.storage.links.iter().map(|l| ("Link", &l.filesystem, &l.path)));
    let mut seen: Vec<(String, &str)> = Vec::new();
    for (kind, filesystem, path) in nodes {
        if filesystem != "root" {
            return fail(format!("{kind} {path:?} is on filesystem {filesystem:?}; only \"root\" can be translated"));
        }
        let joined = clean_path(path);
        if let Some((_, first)) = seen.iter().find(|(p, _)| *p == joined) {
            return fail(format!("Config has duplicate entries: {first}: {joined} and {kind}: {joined}"));
        }
        seen.push((joined, kind));
    }
    let links: Vec<String> = config.storage.links.iter().map(|l| clean_path(&l.path)).collect();
    for (path, kind) in &seen {
        if let Some(link) = links.iter().find(|l| path.starts_with(&format!("{l}/"))) {
            return fail(format!("{kind}: {path} is under link {link} defined in the config"));
        }
    }
    let mut unit_names = HashSet::new();
    for u in &config.systemd.units {
        if !unit_names.insert(&u.name) {
            return fail(format!("Config has duplicate unit {}", u.name));
        }
        let mut dropins = HashSet::new();
        if let Some(d) = u.dropins.iter().find(|d| !dropins.insert(&d.name)) {
            return fail(format!("Config has duplicate dropin {} in unit {}", d.name, u.name));
        }
    }
    Ok(())
}

/// Go's `path.Join("/", p)` (and `filepath.Clean` of an absolute path): absolute and lexically
/// cleaned, no empty, `.` or `..` components, no trailing slash.
pub fn clean_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn true_or_none(b: bool) -> Option<bool> {
    b.then_some(true)
}

fn config_reference(r: &v2::ConfigReference) -> v3::Resource {
    v3::Resource {
        source: Some(r.source.clone()),
        verification: v3::Verification { hash: r.verification.hash.clone() },
        ..Default::default()
    }
}

fn owner(o: &Option<v2::NodeOwner>) -> v3::NodeOwner {
    o.as_ref().map(|o| v3::NodeOwner { id: o.id, name: non_empty(&o.name) }).unwrap_or_default()
}

fn node(
    group: &Option<v2::NodeOwner>,
    overwrite: Option<bool>,
    path: &str,
    user: &Option<v2::NodeOwner>,
) -> (v3::NodeOwner, Option<bool>, String, v3::NodeOwner) {
    (owner(group), overwrite, clean_path(path), owner(user))
}

fn file(f: &v2::File) -> v3::File {
    // Spec 2 files overwrite by default; an appended file must not overwrite in spec 3.
    let overwrite = if f.append { Some(false) } else { Some(f.overwrite.unwrap_or(true)) };
    let (group, overwrite, path, user) = node(&f.group, overwrite, &f.path, &f.user);
    let contents = v3::Resource {
        compression: non_empty(&f.contents.compression),
        source: Some(f.contents.source.clone()),
        verification: v3::Verification { hash: f.contents.verification.hash.clone() },
        ..Default::default()
    };
    let (append, contents) = if f.append { (vec![contents], v3::Resource::default()) } else { (vec![], contents) };
    v3::File { group, overwrite, path, user, append, contents, mode: f.mode }
}

fn user(u: &v2::PasswdUser) -> v3::PasswdUser {
    v3::PasswdUser {
        gecos: non_empty(&u.gecos),
        groups: u.groups.clone(),
        home_dir: non_empty(&u.home_dir),
        name: u.name.clone(),
        no_create_home: true_or_none(u.no_create_home),
        no_log_init: true_or_none(u.no_log_init),
        no_user_group: true_or_none(u.no_user_group),
        password_hash: u.password_hash.clone(),
        primary_group: non_empty(&u.primary_group),
        ssh_authorized_keys: u.ssh_authorized_keys.clone(),
        shell: non_empty(&u.shell),
        system: true_or_none(u.system),
        uid: u.uid,
        ..Default::default()
    }
}

fn unit(u: &v2::Unit) -> v3::Unit {
    // `enabled` wins over the deprecated `enable`, as ign-converter decides.
    let enabled = match u.enabled {
        Some(false) => Some(false),
        Some(true) => Some(true),
        None => true_or_none(u.enable),
    };
    v3::Unit {
        contents: non_empty(&u.contents),
        dropins: u
            .dropins
            .iter()
            .map(|d| v3::Dropin { contents: non_empty(&d.contents), name: d.name.clone() })
            .collect(),
        enabled,
        mask: true_or_none(u.mask),
        name: u.name.clone(),
    }
}

fn disk(d: &v2::Disk) -> v3::Disk {
    v3::Disk {
        device: d.device.clone(),
        partitions: d
            .partitions
            .iter()
            .map(|p| v3::Partition {
                guid: non_empty(&p.guid),
                label: non_empty(&p.label),
                number: p.number,
                type_guid: non_empty(&p.type_guid),
                ..Default::default()
            })
            .collect(),
        wipe_table: true_or_none(d.wipe_table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v2(value: serde_json::Value) -> v2::Config {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn dedupe_keeps_last_file_and_unit_in_reverse_order_and_merges_dropins() {
        let cfg = v2(json!({
            "ignition": {"version": "2.2.0"},
            "storage": {"files": [
                {"filesystem": "root", "path": "/a", "contents": {"source": "data:,1"}},
                {"filesystem": "root", "path": "/b", "contents": {"source": "data:,b"}},
                {"filesystem": "root", "path": "/a", "contents": {"source": "data:,2"}}
            ]},
            "systemd": {"units": [
                {"name": "x.service", "contents": "old", "enabled": true, "dropins": [{"name": "a.conf", "contents": "A"}, {"name": "b.conf", "contents": "B-old"}]},
                {"name": "x.service", "contents": "new", "dropins": [{"name": "b.conf", "contents": "B-new"}]}
            ]},
            "passwd": {"users": [
                {"name": "core", "sshAuthorizedKeys": ["k1", "k2"]},
                {"name": "core", "sshAuthorizedKeys": ["k3", "k1"], "passwordHash": "h"}
            ]}
        }));
        let out = dedupe(cfg).unwrap();
        let files: Vec<_> = out.storage.files.iter().map(|f| (f.path.as_str(), f.contents.source.as_str())).collect();
        assert_eq!(files, vec![("/a", "data:,2"), ("/b", "data:,b")]);
        assert_eq!(out.systemd.units.len(), 1);
        let unit = &out.systemd.units[0];
        assert_eq!(unit.contents, "new");
        assert_eq!(unit.enabled, None, "the earlier definition's enabled is lost, as upstream");
        let dropins: Vec<_> = unit.dropins.iter().map(|d| (d.name.as_str(), d.contents.as_str())).collect();
        assert_eq!(dropins, vec![("b.conf", "B-new"), ("a.conf", "A")]);
        assert_eq!(out.passwd.users.len(), 1);
        assert_eq!(out.passwd.users[0].ssh_authorized_keys, vec!["k3", "k1", "k2"]);
        assert_eq!(out.passwd.users[0].password_hash.as_deref(), Some("h"));
    }

    #[test]
    fn dedupe_refuses_users_other_than_core() {
        for users in [json!([{"name": "admin"}]), json!([{"name": "bob"}, {"name": "core"}])] {
            let cfg = v2(json!({"passwd": {"users": users}}));
            let err = dedupe(cfg).unwrap_err().to_string();
            assert!(err.starts_with("unexpected user with name: "), "{err}");
            assert!(err.ends_with(". Only core user is supported"));
        }
    }

    #[test]
    fn translate_follows_ign_converter() {
        let cfg = v2(json!({
            "ignition": {"version": "2.2.0", "config": {"append": [{"source": "https://x/y.ign"}]}},
            "storage": {"files": [
                {"filesystem": "root", "path": "/etc//a/./b", "mode": 420, "user": {"name": "root"}, "contents": {"source": "data:,x"}},
                {"filesystem": "root", "path": "/etc/c", "overwrite": false, "contents": {"source": "data:,y", "compression": "gzip"}},
                {"filesystem": "root", "path": "/etc/d", "append": true, "contents": {"source": "data:,z"}}
            ]},
            "systemd": {"units": [
                {"name": "a.service", "enable": true, "contents": "[Unit]"},
                {"name": "b.service", "enable": true, "enabled": false, "mask": true}
            ]}
        }));
        let out = translate(&cfg, "3.5.0").unwrap();
        let got = serde_json::to_value(&out).unwrap();
        assert_eq!(
            got,
            json!({
                "ignition": {"config": {"merge": [{"source": "https://x/y.ign"}]}, "version": "3.5.0"},
                "storage": {"files": [
                    {"overwrite": true, "path": "/etc/a/b", "user": {"name": "root"}, "contents": {"source": "data:,x"}, "mode": 420},
                    {"overwrite": false, "path": "/etc/c", "contents": {"compression": "gzip", "source": "data:,y"}},
                    {"overwrite": false, "path": "/etc/d", "append": [{"source": "data:,z"}]}
                ]},
                "systemd": {"units": [
                    {"contents": "[Unit]", "enabled": true, "name": "a.service"},
                    {"enabled": false, "mask": true, "name": "b.service"}
                ]}
            })
        );
    }

    #[test]
    fn translate_refuses_what_spec_3_cannot_express() {
        let cases = [
            json!({"networkd": {"units": [{"name": "a.network"}]}}),
            json!({"storage": {"files": [{"filesystem": "oem", "path": "/a"}]}}),
            json!({"storage": {"files": [{"path": "/a"}]}}),
            json!({"storage": {"filesystems": [{"name": "data", "mount": {"device": "/dev/sdb", "format": "xfs"}}]}}),
            json!({"storage": {"files": [{"filesystem": "root", "path": "/a"}], "directories": [{"filesystem": "root", "path": "/a"}]}}),
            json!({"storage": {"links": [{"filesystem": "root", "path": "/l", "target": "/t"}], "files": [{"filesystem": "root", "path": "/l/f"}]}}),
            json!({"passwd": {"users": [{"name": "core", "create": {}}]}}),
        ];
        for case in cases {
            let err = translate(&v2(case.clone()), "3.5.0").unwrap_err();
            assert!(matches!(err, Spec2Error::Untranslatable(_)), "{case}");
        }
    }

    #[test]
    fn clean_path_is_go_path_join() {
        for (input, want) in
            [("/a/b", "/a/b"), ("a", "/a"), ("/a//b/", "/a/b"), ("/a/../b", "/b"), ("/../x", "/x"), ("", "/")]
        {
            assert_eq!(clean_path(input), want, "{input}");
        }
    }
}
