//! The Ignition 3 config merge (child wins), as `ignition/v2/config/merge` does it.
//!
//! Rules: structs merge field by field; plain values take the child's value; optional values take
//! the child's value when it has one; keyed lists merge entries with the same key field by field
//! and append the child's new entries; files, directories and links share one key space (the
//! path), so a parent entry replaced by the child in a *different* one of those lists is dropped;
//! string lists are keyed by value (an ordered set union); `append`-like lists are concatenated.

use std::collections::{HashMap, HashSet};

use crate::v3::*;

/// Merges `child` over `parent`.
pub fn merge(parent: Config, child: Config) -> Config {
    Config {
        ignition: ignition(parent.ignition, child.ignition),
        kernel_arguments: KernelArguments {
            should_exist: union(parent.kernel_arguments.should_exist, child.kernel_arguments.should_exist),
            should_not_exist: union(parent.kernel_arguments.should_not_exist, child.kernel_arguments.should_not_exist),
        },
        passwd: Passwd {
            groups: keyed(parent.passwd.groups, child.passwd.groups, |g| g.name.clone(), group),
            users: keyed(parent.passwd.users, child.passwd.users, |u| u.name.clone(), user),
        },
        storage: storage(parent.storage, child.storage),
        systemd: Systemd { units: keyed(parent.systemd.units, child.systemd.units, |u| u.name.clone(), unit) },
    }
}

fn ignition(p: Ignition, c: Ignition) -> Ignition {
    Ignition {
        config: IgnitionConfig {
            merge: keyed(p.config.merge, c.config.merge, resource_key, resource),
            replace: resource(p.config.replace, c.config.replace),
        },
        proxy: Proxy {
            http_proxy: c.proxy.http_proxy.or(p.proxy.http_proxy),
            https_proxy: c.proxy.https_proxy.or(p.proxy.https_proxy),
            no_proxy: union(p.proxy.no_proxy, c.proxy.no_proxy),
        },
        security: Security {
            tls: Tls {
                certificate_authorities: keyed(
                    p.security.tls.certificate_authorities,
                    c.security.tls.certificate_authorities,
                    resource_key,
                    resource,
                ),
            },
        },
        timeouts: Timeouts {
            http_response_headers: c.timeouts.http_response_headers.or(p.timeouts.http_response_headers),
            http_total: c.timeouts.http_total.or(p.timeouts.http_total),
        },
        version: c.version,
    }
}

fn storage(p: Storage, c: Storage) -> Storage {
    let child_paths = NodeKinds::of(&c);
    Storage {
        directories: nodes(p.directories, c.directories, &child_paths, Kind::Directory, directory),
        disks: keyed(p.disks, c.disks, |d| d.device.clone(), disk),
        files: nodes(p.files, c.files, &child_paths, Kind::File, file),
        filesystems: keyed(p.filesystems, c.filesystems, |f| f.device.clone(), filesystem),
        links: nodes(p.links, c.links, &child_paths, Kind::Link, link),
        luks: keyed(p.luks, c.luks, |l| l.name.clone(), luks),
        raid: keyed(p.raid, c.raid, |r| r.name.clone(), raid),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Directory,
    Link,
}

trait HasPath {
    fn path(&self) -> &str;
}

impl HasPath for File {
    fn path(&self) -> &str {
        &self.path
    }
}
impl HasPath for Directory {
    fn path(&self) -> &str {
        &self.path
    }
}
impl HasPath for Link {
    fn path(&self) -> &str {
        &self.path
    }
}

/// Which node list of the child holds each path. Files, directories and links share one key
/// space; when a path is in several lists, Go's lookup keeps the last list it saw: links, then
/// files, then directories.
struct NodeKinds(HashMap<String, Kind>);

impl NodeKinds {
    fn of(s: &Storage) -> Self {
        let directories = s.directories.iter().map(|d| (d.path.clone(), Kind::Directory));
        let files = s.files.iter().map(|f| (f.path.clone(), Kind::File));
        let links = s.links.iter().map(|l| (l.path.clone(), Kind::Link));
        NodeKinds(directories.chain(files).chain(links).collect())
    }

    fn kind_of(&self, path: &str) -> Option<Kind> {
        self.0.get(path).copied()
    }
}

/// A node list merged across the shared path key space: a parent node whose path the child has in
/// the same list merges with it, one the child has in another list is dropped, and child nodes
/// whose path the parent had are not appended again.
fn nodes<T: HasPath>(
    parent: Vec<T>,
    child: Vec<T>,
    child_paths: &NodeKinds,
    kind: Kind,
    merge_item: fn(T, T) -> T,
) -> Vec<T> {
    if child_paths.0.is_empty() {
        return parent;
    }
    let mut child: Vec<Option<T>> = child.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(parent.len() + child.len());
    // Parent paths the child also has (in any list): the only ones that can hold back a child
    // node, and few, so they are collected instead of indexing the whole parent.
    let mut in_parent: HashSet<String> = HashSet::new();
    for p in parent {
        match child_paths.kind_of(p.path()) {
            Some(k) => {
                in_parent.insert(p.path().to_string());
                if k == kind {
                    let slot = child.iter().rposition(|c| c.as_ref().is_some_and(|c| c.path() == p.path()));
                    let c = slot.and_then(|i| child[i].take()).expect("child path indexed above");
                    out.push(merge_item(p, c));
                }
                // Replaced by a different kind of node in the child: dropped.
            }
            None => out.push(p),
        }
    }
    out.extend(child.into_iter().flatten().filter(|c| !in_parent.contains(c.path())));
    out
}

/// A keyed list: same-key entries merge, new child entries are appended.
fn keyed<T>(parent: Vec<T>, child: Vec<T>, key: fn(&T) -> String, merge_item: fn(T, T) -> T) -> Vec<T> {
    if child.is_empty() {
        return parent;
    }
    let parent_keys: HashSet<String> = parent.iter().map(key).collect();
    let mut child: Vec<Option<T>> = child.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(parent.len() + child.len());
    for p in parent {
        let k = key(&p);
        match child.iter().rposition(|c| c.as_ref().is_some_and(|c| key(c) == k)) {
            Some(i) => {
                let c = child[i].take().expect("position found above");
                out.push(merge_item(p, c));
            }
            None => out.push(p),
        }
    }
    out.extend(child.into_iter().flatten().filter(|c| !parent_keys.contains(&key(c))));
    out
}

/// A list of strings keyed by value: the parent's entries, then the child's new ones.
fn union(mut parent: Vec<String>, child: Vec<String>) -> Vec<String> {
    let seen: HashSet<String> = parent.iter().cloned().collect();
    parent.extend(child.into_iter().filter(|c| !seen.contains(c)));
    parent
}

fn concat<T>(mut parent: Vec<T>, child: Vec<T>) -> Vec<T> {
    parent.extend(child);
    parent
}

fn resource_key(r: &Resource) -> String {
    r.source.clone().unwrap_or_default()
}

fn resource(p: Resource, c: Resource) -> Resource {
    Resource {
        compression: c.compression.or(p.compression),
        http_headers: headers(p.http_headers, c.http_headers),
        source: c.source.or(p.source),
        verification: Verification { hash: c.verification.hash.or(p.verification.hash) },
    }
}

/// Headers merge by name; a child header without a value removes the parent's.
fn headers(parent: Vec<HttpHeader>, child: Vec<HttpHeader>) -> Vec<HttpHeader> {
    let removed: HashSet<String> = child.iter().filter(|h| h.value.is_none()).map(|h| h.name.clone()).collect();
    let parent_names: HashSet<String> = parent.iter().map(|h| h.name.clone()).collect();
    let kept = parent.into_iter().filter(|h| !removed.contains(&h.name)).collect();
    let child = child.into_iter().filter(|h| !(h.value.is_none() && parent_names.contains(&h.name))).collect();
    keyed(kept, child, |h| h.name.clone(), |p, c| HttpHeader { name: c.name, value: c.value.or(p.value) })
}

fn owner(p: NodeOwner, c: NodeOwner) -> NodeOwner {
    NodeOwner { id: c.id.or(p.id), name: c.name.or(p.name) }
}

fn file(p: File, c: File) -> File {
    File {
        group: owner(p.group, c.group),
        overwrite: c.overwrite.or(p.overwrite),
        path: c.path,
        user: owner(p.user, c.user),
        append: concat(p.append, c.append),
        contents: resource(p.contents, c.contents),
        mode: c.mode.or(p.mode),
    }
}

fn directory(p: Directory, c: Directory) -> Directory {
    Directory {
        group: owner(p.group, c.group),
        overwrite: c.overwrite.or(p.overwrite),
        path: c.path,
        user: owner(p.user, c.user),
        mode: c.mode.or(p.mode),
    }
}

fn link(p: Link, c: Link) -> Link {
    Link {
        group: owner(p.group, c.group),
        overwrite: c.overwrite.or(p.overwrite),
        path: c.path,
        user: owner(p.user, c.user),
        hard: c.hard.or(p.hard),
        target: c.target.or(p.target),
    }
}

fn group(p: PasswdGroup, c: PasswdGroup) -> PasswdGroup {
    PasswdGroup {
        gid: c.gid.or(p.gid),
        name: c.name,
        password_hash: c.password_hash.or(p.password_hash),
        should_exist: c.should_exist.or(p.should_exist),
        system: c.system.or(p.system),
    }
}

fn user(p: PasswdUser, c: PasswdUser) -> PasswdUser {
    PasswdUser {
        gecos: c.gecos.or(p.gecos),
        groups: union(p.groups, c.groups),
        home_dir: c.home_dir.or(p.home_dir),
        name: c.name,
        no_create_home: c.no_create_home.or(p.no_create_home),
        no_log_init: c.no_log_init.or(p.no_log_init),
        no_user_group: c.no_user_group.or(p.no_user_group),
        password_hash: c.password_hash.or(p.password_hash),
        primary_group: c.primary_group.or(p.primary_group),
        ssh_authorized_keys: union(p.ssh_authorized_keys, c.ssh_authorized_keys),
        shell: c.shell.or(p.shell),
        should_exist: c.should_exist.or(p.should_exist),
        system: c.system.or(p.system),
        uid: c.uid.or(p.uid),
    }
}

fn unit(p: Unit, c: Unit) -> Unit {
    Unit {
        contents: c.contents.or(p.contents),
        dropins: keyed(
            p.dropins,
            c.dropins,
            |d| d.name.clone(),
            |p, c| Dropin { contents: c.contents.or(p.contents), name: c.name },
        ),
        enabled: c.enabled.or(p.enabled),
        mask: c.mask.or(p.mask),
        name: c.name,
    }
}

fn disk(p: Disk, c: Disk) -> Disk {
    Disk {
        device: c.device,
        partitions: keyed(p.partitions, c.partitions, partition_key, partition),
        wipe_table: c.wipe_table.or(p.wipe_table),
    }
}

fn partition_key(p: &Partition) -> String {
    if p.number != 0 {
        format!("number:{}", p.number)
    } else if let Some(label) = &p.label {
        format!("label:{label}")
    } else {
        String::new()
    }
}

fn partition(p: Partition, c: Partition) -> Partition {
    Partition {
        guid: c.guid.or(p.guid),
        label: c.label.or(p.label),
        number: c.number,
        resize: c.resize.or(p.resize),
        should_exist: c.should_exist.or(p.should_exist),
        size_mib: c.size_mib.or(p.size_mib),
        start_mib: c.start_mib.or(p.start_mib),
        type_guid: c.type_guid.or(p.type_guid),
        wipe_partition_entry: c.wipe_partition_entry.or(p.wipe_partition_entry),
    }
}

fn filesystem(p: Filesystem, c: Filesystem) -> Filesystem {
    Filesystem {
        device: c.device,
        format: c.format.or(p.format),
        label: c.label.or(p.label),
        mount_options: concat(p.mount_options, c.mount_options),
        options: concat(p.options, c.options),
        path: c.path.or(p.path),
        uuid: c.uuid.or(p.uuid),
        wipe_filesystem: c.wipe_filesystem.or(p.wipe_filesystem),
    }
}

fn luks(p: Luks, c: Luks) -> Luks {
    Luks {
        cex: Cex { enabled: c.cex.enabled.or(p.cex.enabled) },
        clevis: Clevis {
            custom: ClevisCustom {
                config: c.clevis.custom.config.or(p.clevis.custom.config),
                needs_network: c.clevis.custom.needs_network.or(p.clevis.custom.needs_network),
                pin: c.clevis.custom.pin.or(p.clevis.custom.pin),
            },
            tang: keyed(
                p.clevis.tang,
                c.clevis.tang,
                |t| t.url.clone(),
                |p, c| Tang {
                    advertisement: c.advertisement.or(p.advertisement),
                    thumbprint: c.thumbprint.or(p.thumbprint),
                    url: c.url,
                },
            ),
            threshold: c.clevis.threshold.or(p.clevis.threshold),
            tpm2: c.clevis.tpm2.or(p.clevis.tpm2),
        },
        device: c.device.or(p.device),
        discard: c.discard.or(p.discard),
        key_file: resource(p.key_file, c.key_file),
        label: c.label.or(p.label),
        name: c.name,
        open_options: union(p.open_options, c.open_options),
        options: concat(p.options, c.options),
        uuid: c.uuid.or(p.uuid),
        wipe_volume: c.wipe_volume.or(p.wipe_volume),
    }
}

fn raid(p: Raid, c: Raid) -> Raid {
    Raid {
        devices: union(p.devices, c.devices),
        level: c.level.or(p.level),
        name: c.name,
        options: concat(p.options, c.options),
        spares: c.spares.or(p.spares),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cfg(v: Value) -> Config {
        serde_json::from_value(v).unwrap()
    }

    fn merged(parent: Value, child: Value) -> Value {
        serde_json::to_value(merge(cfg(parent), cfg(child))).unwrap()
    }

    #[test]
    fn merge_table() {
        let v = |extra: Value| {
            let mut base = json!({"ignition": {"version": "3.5.0"}});
            base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            base
        };
        let cases: Vec<(&str, Value, Value, Value)> = vec![
            (
                "same file merges field by field, child wins, absent child fields keep the parent's",
                v(
                    json!({"storage": {"files": [{"path": "/a", "mode": 420, "overwrite": false, "user": {"id": 1}, "contents": {"source": "data:,p"}}]}}),
                ),
                v(
                    json!({"storage": {"files": [{"path": "/a", "user": {"name": "core"}, "contents": {"source": "data:,c"}}]}}),
                ),
                v(
                    json!({"storage": {"files": [{"overwrite": false, "path": "/a", "user": {"id": 1, "name": "core"}, "contents": {"source": "data:,c"}, "mode": 420}]}}),
                ),
            ),
            (
                "new child entries are appended after the parent's",
                v(json!({"storage": {"files": [{"path": "/b"}, {"path": "/a"}]}})),
                v(json!({"storage": {"files": [{"path": "/c"}, {"path": "/a", "mode": 384}]}})),
                v(json!({"storage": {"files": [{"path": "/b"}, {"path": "/a", "mode": 384}, {"path": "/c"}]}})),
            ),
            (
                "a file replaced by a link in the child is dropped",
                v(json!({"storage": {"files": [{"path": "/a"}, {"path": "/b"}]}})),
                v(json!({"storage": {"links": [{"path": "/a", "target": "/t"}]}})),
                v(json!({"storage": {"files": [{"path": "/b"}], "links": [{"path": "/a", "target": "/t"}]}})),
            ),
            (
                "a directory replaced by a file is dropped",
                v(json!({"storage": {"directories": [{"path": "/d", "mode": 493}]}})),
                v(json!({"storage": {"files": [{"path": "/d"}]}})),
                v(json!({"storage": {"files": [{"path": "/d"}]}})),
            ),
            (
                "append lists are concatenated",
                v(json!({"storage": {"files": [{"path": "/a", "append": [{"source": "data:,1"}]}]}})),
                v(
                    json!({"storage": {"files": [{"path": "/a", "append": [{"source": "data:,1"}, {"source": "data:,2"}]}]}}),
                ),
                v(
                    json!({"storage": {"files": [{"path": "/a", "append": [{"source": "data:,1"}, {"source": "data:,1"}, {"source": "data:,2"}]}]}}),
                ),
            ),
            (
                "ssh keys and kernel arguments are ordered set unions",
                v(
                    json!({"kernelArguments": {"shouldExist": ["a", "b"]}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"]}]}}),
                ),
                v(
                    json!({"kernelArguments": {"shouldExist": ["c", "a"], "shouldNotExist": ["z"]}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k3", "k1"]}]}}),
                ),
                v(
                    json!({"kernelArguments": {"shouldExist": ["a", "b", "c"], "shouldNotExist": ["z"]}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2", "k3"]}]}}),
                ),
            ),
            (
                "units and dropins merge by name",
                v(
                    json!({"systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "x", "dropins": [{"name": "1.conf", "contents": "p"}]}]}}),
                ),
                v(
                    json!({"systemd": {"units": [{"name": "a.service", "mask": true, "dropins": [{"name": "2.conf", "contents": "c"}, {"name": "1.conf", "contents": "q"}]}]}}),
                ),
                v(
                    json!({"systemd": {"units": [{"contents": "x", "dropins": [{"contents": "q", "name": "1.conf"}, {"contents": "c", "name": "2.conf"}], "enabled": true, "mask": true, "name": "a.service"}]}}),
                ),
            ),
            (
                "a child header without a value removes the parent's",
                v(
                    json!({"storage": {"files": [{"path": "/a", "contents": {"source": "https://x", "httpHeaders": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}}]}}),
                ),
                v(
                    json!({"storage": {"files": [{"path": "/a", "contents": {"httpHeaders": [{"name": "A"}, {"name": "B", "value": "3"}]}}]}}),
                ),
                v(
                    json!({"storage": {"files": [{"path": "/a", "contents": {"httpHeaders": [{"name": "B", "value": "3"}], "source": "https://x"}}]}}),
                ),
            ),
        ];
        for (name, parent, child, want) in cases {
            assert_eq!(merged(parent, child), want, "{name}");
        }
    }
}
