//! Conversion of a config from the internal spec 3.5.0 down to an older spec version, for
//! machines whose Ignition reads only that version (the original's `ignition_converter.go`,
//! which chains ign-converter's translators 3.5→3.4→3.3→3.2→3.1 and 3.2→2.2).
//!
//! Every 3.x version is a subset of 3.5, so going down means checking that the config uses
//! nothing the target lacks, then clearing the fields the target does not have. A check fires
//! when the *target* predates the feature, which is what the chained single steps amount to;
//! unlike the chain, every offending field is reported at once, not only the first.
//! Spec 2.2 is then built field by field, as ign-converter's `v32tov22` does.
//!
//! The input is assumed to be valid (see [`crate::validate`]): the original's translators
//! validate again before and after each step; here only what differs between versions is
//! checked, so that serving a large config does not re-decode every file.

use std::fmt;
use std::str::FromStr;

use crate::parse::AnyConfig;
use crate::{v2, v3};

/// The spec versions (major.minor) the original parses and converts, in order. Joined with
/// commas this is the list its version errors print ([`crate::parse::SUPPORTED_VERSIONS`]).
/// 3.0 is listed although nothing converts *to* it: configs are only read in 3.0.
pub const SUPPORTED_VERSIONS: [&str; 7] = ["2.2", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5"];

/// The supported version with the same major and minor as `version` (patch and pre-release
/// ignored, e.g. 3.2.1 → 3.2.0), as the original's `GetSupportedMinorVersion`; `None` when the
/// minor version is not in [`SUPPORTED_VERSIONS`].
pub fn supported_minor_version(version: &semver::Version) -> Option<semver::Version> {
    let minor = format!("{}.{}", version.major, version.minor);
    SUPPORTED_VERSIONS.contains(&minor.as_str()).then(|| semver::Version::new(version.major, version.minor, 0))
}

/// A spec version a config can be converted to. Ordered from oldest to newest, so `t < Target::V3_3`
/// reads "the target predates 3.3". There is no 3.0: the original has no path from 3.5 to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    V2_2,
    V3_1,
    V3_2,
    V3_3,
    V3_4,
    V3_5,
}

impl Target {
    /// Every target, oldest first.
    pub const ALL: [Target; 6] = [Target::V2_2, Target::V3_1, Target::V3_2, Target::V3_3, Target::V3_4, Target::V3_5];

    /// The full version string a converted config carries in `ignition.version`, e.g. `3.2.0`.
    pub const fn version(self) -> &'static str {
        match self {
            Target::V2_2 => "2.2.0",
            Target::V3_1 => "3.1.0",
            Target::V3_2 => "3.2.0",
            Target::V3_3 => "3.3.0",
            Target::V3_4 => "3.4.0",
            Target::V3_5 => "3.5.0",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version())
    }
}

/// Accepts `X.Y` or `X.Y.0` for each target (`3.2`, `3.2.0`, `2.2`, `2.2.0`, …); anything else,
/// 3.0 included, is [`ConvertError::UnsupportedTarget`].
impl FromStr for Target {
    type Err = ConvertError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Target::ALL
            .into_iter()
            .find(|t| s == t.version() || t.version().strip_suffix(".0") == Some(s))
            .ok_or_else(|| ConvertError::UnsupportedTarget(s.to_string()))
    }
}

/// One field that the target spec cannot express, e.g. `$.kernelArguments is not supported in
/// spec 3.2.0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// JSONPath-like location in the input config, as validation reports use (`$.storage.luks.0.cex`).
    pub path: String,
    /// What is wrong, phrased to follow the path.
    pub problem: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.path, self.problem)
    }
}

/// Why a config could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The requested version is not one a config can be converted to.
    #[error(
        "conversion to Ignition spec version {0:?} is not supported; supported target versions: {targets}",
        targets = target_list()
    )]
    UnsupportedTarget(String),
    /// The config uses fields the target spec lacks; every one of them is listed.
    #[error("cannot convert Ignition config from {from} to {to}: {}", join(.fields))]
    Unsupported { from: String, to: Target, fields: Vec<Unsupported> },
}

fn target_list() -> String {
    Target::ALL.map(Target::version).join(", ")
}

fn join(fields: &[Unsupported]) -> String {
    fields.iter().map(Unsupported::to_string).collect::<Vec<_>>().join("; ")
}

/// Converts a config to `target`. The input is read as spec 3.5 whatever its
/// `ignition.version` says (every 3.x config is a 3.5 config); the result is
/// [`AnyConfig::V3`] with `ignition.version` set to the target, or [`AnyConfig::V2`] for 2.2.
/// Converting to 3.5 only sets the version.
///
/// Going below 3.4 clears the setuid/setgid/sticky bits of file and directory modes, as the
/// original's 3.4→3.3 step does; fields whose value means "default" in the newer spec
/// (`discard: false`, `shouldExist: true`, `resize: false`, `cex.enabled: false`, an empty tang
/// `advertisement`) are dropped silently. Everything else the target lacks is refused.
pub fn convert(config: &v3::Config, target: Target) -> Result<AnyConfig, ConvertError> {
    let fields = check(config, target);
    if !fields.is_empty() {
        let declared = &config.ignition.version;
        let from = match semver::Version::parse(declared) {
            Ok(v) if v.major == 3 => declared.clone(),
            _ => v3::MAX_VERSION.to_string(),
        };
        return Err(ConvertError::Unsupported { from, to: target, fields });
    }
    let down = downgrade(config, target);
    Ok(if target == Target::V2_2 { AnyConfig::V2(to_v2(&down)) } else { AnyConfig::V3(down) })
}

/// Collects the refusals for converting `config` to `target`.
struct Checker {
    target: Target,
    found: Vec<Unsupported>,
}

impl Checker {
    fn refuse(&mut self, path: String, problem: String) {
        self.found.push(Unsupported { path, problem });
    }

    /// Refuses `path` when the feature is `used` and the target predates `since`, the first
    /// target version that has it (3.1 stands for "any spec 3", there being no 3.0 target).
    fn needs(&mut self, since: Target, used: bool, path: impl FnOnce() -> String) {
        if used && self.target < since {
            let problem = format!("is not supported in spec {}", self.target);
            self.refuse(path(), problem);
        }
    }

    /// The checks every fetched resource gets. `compression_since` is when the resource gained
    /// a `compression` field (file contents always had one).
    fn resource(&mut self, at: &str, res: &v3::Resource, compression_since: Target) {
        self.needs(compression_since, res.compression.is_some(), || format!("{at}.compression"));
        self.needs(Target::V3_1, !res.http_headers.is_empty(), || format!("{at}.httpHeaders"));
        let scheme = res.source.as_deref().and_then(|s| s.split_once(':')).map(|(s, _)| s.to_ascii_lowercase());
        // gs: URLs came with 3.2, S3 access point ARNs with 3.4.
        let needed = match scheme.as_deref() {
            Some("gs") => Some(("gs", Target::V3_2)),
            Some("arn") => Some(("arn", Target::V3_4)),
            _ => None,
        };
        if let Some((scheme, since)) = needed
            && self.target < since
        {
            let problem = format!("uses the {scheme}: URL scheme, which spec {} does not support", self.target);
            self.refuse(format!("{at}.source"), problem);
        }
        if self.target == Target::V2_2
            && let Some(hash) = &res.verification.hash
        {
            let function = hash.split_once('-').map_or(hash.as_str(), |(f, _)| f);
            if function != "sha512" {
                let problem = format!("uses a {function} hash, which spec 2.2.0 does not support (only sha512)");
                self.refuse(format!("{at}.verification.hash"), problem);
            }
        }
    }
}

/// The spec 2.2 filesystem formats.
const V2_FORMATS: [&str; 5] = ["ext4", "btrfs", "xfs", "swap", "vfat"];

fn check(config: &v3::Config, target: Target) -> Vec<Unsupported> {
    use Target::{V2_2, V3_1, V3_2, V3_3, V3_4, V3_5};
    let mut c = Checker { target, found: Vec::new() };
    let ign = &config.ignition;
    for (i, res) in ign.config.merge.iter().enumerate() {
        c.resource(&format!("$.ignition.config.merge.{i}"), res, V3_1);
    }
    c.resource("$.ignition.config.replace", &ign.config.replace, V3_1);
    for (i, res) in ign.security.tls.certificate_authorities.iter().enumerate() {
        c.resource(&format!("$.ignition.security.tls.certificateAuthorities.{i}"), res, V3_1);
    }
    let proxy = &ign.proxy;
    let proxied = proxy.http_proxy.is_some() || proxy.https_proxy.is_some() || !proxy.no_proxy.is_empty();
    c.needs(V3_1, proxied, || "$.ignition.proxy".to_string());

    let kargs = &config.kernel_arguments;
    c.needs(V3_3, !kargs.should_exist.is_empty() || !kargs.should_not_exist.is_empty(), || {
        "$.kernelArguments".to_string()
    });

    for (i, u) in config.passwd.users.iter().enumerate() {
        c.needs(V3_2, u.should_exist == Some(false), || format!("$.passwd.users.{i}.shouldExist"));
    }
    for (i, g) in config.passwd.groups.iter().enumerate() {
        c.needs(V3_2, g.should_exist == Some(false), || format!("$.passwd.groups.{i}.shouldExist"));
    }

    let storage = &config.storage;
    for (i, disk) in storage.disks.iter().enumerate() {
        for (j, p) in disk.partitions.iter().enumerate() {
            let at = format!("$.storage.disks.{i}.partitions.{j}");
            c.needs(V3_2, p.resize == Some(true), || format!("{at}.resize"));
            // Spec 2.2 sizes partitions in sectors and cannot delete or wipe entries.
            c.needs(V3_1, p.size_mib.is_some(), || format!("{at}.sizeMiB"));
            c.needs(V3_1, p.start_mib.is_some(), || format!("{at}.startMiB"));
            c.needs(V3_1, p.should_exist == Some(false), || format!("{at}.shouldExist"));
            c.needs(V3_1, p.wipe_partition_entry == Some(true), || format!("{at}.wipePartitionEntry"));
        }
    }
    for (i, f) in storage.files.iter().enumerate() {
        c.resource(&format!("$.storage.files.{i}.contents"), &f.contents, V2_2);
        for (j, res) in f.append.iter().enumerate() {
            c.resource(&format!("$.storage.files.{i}.append.{j}"), res, V2_2);
        }
    }
    for (i, fs) in storage.filesystems.iter().enumerate() {
        let at = format!("$.storage.filesystems.{i}");
        c.needs(V3_1, !fs.mount_options.is_empty(), || format!("{at}.mountOptions"));
        match fs.format.as_deref().filter(|f| !f.is_empty()) {
            Some("none") if target < V3_3 => {
                c.refuse(format!("{at}.format"), format!("\"none\" is not supported in spec {target}"))
            }
            Some(format) if target == V2_2 && !V2_FORMATS.contains(&format) => c.refuse(
                format!("{at}.format"),
                format!("{format:?} is not supported in spec 2.2.0 (one of {})", V2_FORMATS.join(", ")),
            ),
            None if target == V2_2 => c.refuse(format!("{at}.format"), "is required in spec 2.2.0".to_string()),
            _ => {}
        }
    }
    if target < V3_2 {
        c.needs(V3_2, !storage.luks.is_empty(), || "$.storage.luks".to_string());
    } else {
        for (i, luks) in storage.luks.iter().enumerate() {
            let at = format!("$.storage.luks.{i}");
            c.needs(V3_5, luks.cex.enabled == Some(true), || format!("{at}.cex"));
            c.needs(V3_4, luks.discard == Some(true), || format!("{at}.discard"));
            c.needs(V3_4, !luks.open_options.is_empty(), || format!("{at}.openOptions"));
            for (j, tang) in luks.clevis.tang.iter().enumerate() {
                let offline = tang.advertisement.as_deref().is_some_and(|a| !a.is_empty());
                c.needs(V3_4, offline, || format!("{at}.clevis.tang.{j}.advertisement"));
            }
            c.resource(&format!("{at}.keyFile"), &luks.key_file, V2_2);
        }
    }
    c.found
}

/// The config with its version set to `target` and the fields `target` lacks cleared (the
/// checks have made sure that only values meaning "default" are lost), modes masked below 3.4.
fn downgrade(config: &v3::Config, target: Target) -> v3::Config {
    let mut out = config.clone();
    out.ignition.version = target.version().to_string();
    if target < Target::V3_5 {
        for luks in &mut out.storage.luks {
            luks.cex = v3::Cex::default();
        }
    }
    if target < Target::V3_4 {
        for luks in &mut out.storage.luks {
            luks.discard = None;
            for tang in &mut luks.clevis.tang {
                tang.advertisement = None;
            }
        }
        // Special mode bits arrived with 3.4; older Ignition never applied them.
        let mask = |mode: Option<i64>| mode.map(|m| m & !0o7000);
        for f in &mut out.storage.files {
            f.mode = mask(f.mode);
        }
        for d in &mut out.storage.directories {
            d.mode = mask(d.mode);
        }
    }
    if target < Target::V3_2 {
        for u in &mut out.passwd.users {
            u.should_exist = None;
        }
        for g in &mut out.passwd.groups {
            g.should_exist = None;
        }
        for p in out.storage.disks.iter_mut().flat_map(|d| &mut d.partitions) {
            p.resize = None;
        }
    }
    out
}

/// Builds the spec 2.2 config from a checked, downgraded config, as ign-converter's `v32tov22`.
fn to_v2(config: &v3::Config) -> v2::Config {
    let ign = &config.ignition;
    let storage = &config.storage;
    let mount_points: Vec<&str> =
        storage.filesystems.iter().filter_map(|fs| fs.path.as_deref()).filter(|p| !p.is_empty()).collect();
    let mut unnamed = 0;
    let filesystems = storage
        .filesystems
        .iter()
        .map(|fs| {
            // Spec 2 names filesystems; a spec 3 one is named by its mount point, or numbered.
            let name = match fs.path.as_deref().filter(|p| !p.is_empty()) {
                Some(path) => path.to_string(),
                None => {
                    unnamed += 1;
                    unnamed.to_string()
                }
            };
            let mount = v2::Mount {
                create: None,
                device: fs.device.clone(),
                format: fs.format.clone().unwrap_or_default(),
                label: fs.label.clone(),
                options: fs.options.clone(),
                uuid: fs.uuid.clone(),
                wipe_filesystem: fs.wipe_filesystem.unwrap_or(false),
            };
            v2::Filesystem { mount: Some(mount), name, path: None }
        })
        .collect();
    v2::Config {
        ignition: v2::Ignition {
            config: v2::IgnitionConfig {
                append: ign.config.merge.iter().map(config_reference).collect(),
                replace: ign.config.replace.source.is_some().then(|| config_reference(&ign.config.replace)),
            },
            security: v2::Security {
                tls: v2::Tls {
                    certificate_authorities: ign
                        .security
                        .tls
                        .certificate_authorities
                        .iter()
                        .map(config_reference)
                        .collect(),
                },
            },
            timeouts: v2::Timeouts {
                http_response_headers: ign.timeouts.http_response_headers,
                http_total: ign.timeouts.http_total,
            },
            version: v2::VERSION.to_string(),
        },
        networkd: v2::Networkd::default(),
        passwd: v2::Passwd {
            groups: config.passwd.groups.iter().map(group).collect(),
            users: config.passwd.users.iter().map(user).collect(),
        },
        storage: v2::Storage {
            directories: storage
                .directories
                .iter()
                .map(|d| {
                    let (filesystem, path) = place(&d.path, &mount_points);
                    v2::Directory {
                        filesystem,
                        group: owner(&d.group),
                        overwrite: d.overwrite,
                        path,
                        user: owner(&d.user),
                        mode: d.mode,
                    }
                })
                .collect(),
            disks: storage.disks.iter().map(disk).collect(),
            files: storage.files.iter().flat_map(|f| files(f, &mount_points)).collect(),
            filesystems,
            links: storage
                .links
                .iter()
                .map(|l| {
                    let (filesystem, path) = place(&l.path, &mount_points);
                    v2::Link {
                        filesystem,
                        group: owner(&l.group),
                        overwrite: l.overwrite,
                        path,
                        user: owner(&l.user),
                        hard: l.hard.unwrap_or(false),
                        target: l.target.clone().unwrap_or_default(),
                    }
                })
                .collect(),
            raid: storage
                .raid
                .iter()
                .map(|r| v2::Raid {
                    devices: r.devices.clone(),
                    level: r.level.clone().unwrap_or_default(),
                    name: r.name.clone(),
                    options: r.options.clone(),
                    spares: r.spares.unwrap_or(0),
                })
                .collect(),
        },
        systemd: v2::Systemd { units: config.systemd.units.iter().map(unit).collect() },
    }
}

/// The spec 2 filesystem and path of a node: the filesystem mounted at the longest mount point
/// containing the path (first one on a tie), with the path made relative to it, else `root`.
fn place(path: &str, mount_points: &[&str]) -> (String, String) {
    let mut best: Option<(&str, usize)> = None;
    for mount in mount_points {
        let base = mount.trim_end_matches('/');
        let inside = path.strip_prefix(base).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        if inside && best.is_none_or(|(_, len)| base.len() > len) {
            best = Some((mount, base.len()));
        }
    }
    match best {
        None => ("root".to_string(), path.to_string()),
        Some((mount, len)) => {
            let rest = &path[len..];
            (mount.to_string(), if rest.is_empty() { "/" } else { rest }.to_string())
        }
    }
}

/// One spec 3 file becomes a spec 2 file with its contents (when it has a source) followed by
/// one `append: true` file per appended fragment. Spec 3 files do not overwrite by default and
/// spec 2 files do, so an unset `overwrite` becomes `false`; appended fragments never
/// overwrite. A file with neither contents nor fragments produces nothing, as upstream.
fn files(f: &v3::File, mount_points: &[&str]) -> Vec<v2::File> {
    let (filesystem, path) = place(&f.path, mount_points);
    let base = v2::File {
        filesystem,
        group: owner(&f.group),
        overwrite: Some(f.overwrite.unwrap_or(false)),
        path,
        user: owner(&f.user),
        append: false,
        contents: v2::FileContents::default(),
        mode: f.mode,
    };
    let mut out = Vec::with_capacity(1 + f.append.len());
    if f.contents.source.is_some() {
        out.push(v2::File { contents: file_contents(&f.contents), ..base.clone() });
    }
    for fragment in &f.append {
        out.push(v2::File { overwrite: Some(false), append: true, contents: file_contents(fragment), ..base.clone() });
    }
    out
}

fn file_contents(res: &v3::Resource) -> v2::FileContents {
    v2::FileContents {
        compression: res.compression.clone().unwrap_or_default(),
        source: res.source.clone().unwrap_or_default(),
        verification: v2::Verification { hash: res.verification.hash.clone() },
    }
}

fn config_reference(res: &v3::Resource) -> v2::ConfigReference {
    v2::ConfigReference {
        source: res.source.clone().unwrap_or_default(),
        verification: v2::Verification { hash: res.verification.hash.clone() },
    }
}

fn owner(o: &v3::NodeOwner) -> Option<v2::NodeOwner> {
    (*o != v3::NodeOwner::default()).then(|| v2::NodeOwner { id: o.id, name: o.name.clone().unwrap_or_default() })
}

fn user(u: &v3::PasswdUser) -> v2::PasswdUser {
    v2::PasswdUser {
        create: None,
        gecos: u.gecos.clone().unwrap_or_default(),
        groups: u.groups.clone(),
        home_dir: u.home_dir.clone().unwrap_or_default(),
        name: u.name.clone(),
        no_create_home: u.no_create_home.unwrap_or(false),
        no_log_init: u.no_log_init.unwrap_or(false),
        no_user_group: u.no_user_group.unwrap_or(false),
        password_hash: u.password_hash.clone(),
        primary_group: u.primary_group.clone().unwrap_or_default(),
        ssh_authorized_keys: u.ssh_authorized_keys.clone(),
        shell: u.shell.clone().unwrap_or_default(),
        system: u.system.unwrap_or(false),
        uid: u.uid,
    }
}

fn group(g: &v3::PasswdGroup) -> v2::PasswdGroup {
    v2::PasswdGroup {
        gid: g.gid,
        name: g.name.clone(),
        password_hash: g.password_hash.clone().unwrap_or_default(),
        system: g.system.unwrap_or(false),
    }
}

fn unit(u: &v3::Unit) -> v2::Unit {
    v2::Unit {
        contents: u.contents.clone().unwrap_or_default(),
        dropins: u
            .dropins
            .iter()
            .map(|d| v2::Dropin { contents: d.contents.clone().unwrap_or_default(), name: d.name.clone() })
            .collect(),
        enable: false,
        enabled: u.enabled,
        mask: u.mask.unwrap_or(false),
        name: u.name.clone(),
    }
}

fn disk(d: &v3::Disk) -> v2::Disk {
    v2::Disk {
        device: d.device.clone(),
        partitions: d
            .partitions
            .iter()
            .map(|p| v2::Partition {
                guid: p.guid.clone().unwrap_or_default(),
                label: p.label.clone().unwrap_or_default(),
                number: p.number,
                size: 0,
                start: 0,
                type_guid: p.type_guid.clone().unwrap_or_default(),
            })
            .collect(),
        wipe_table: d.wipe_table.unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const SHA512: &str = "sha512-cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e";

    /// A 3.5 config with `body` merged into its top level.
    fn v35(body: Value) -> v3::Config {
        let mut value = json!({"ignition": {"version": "3.5.0"}});
        for (k, v) in body.as_object().expect("test body is an object") {
            match (value.get_mut(k), v) {
                (Some(Value::Object(have)), Value::Object(more)) => have.extend(more.clone()),
                _ => {
                    value[k] = v.clone();
                }
            }
        }
        serde_json::from_value(value).expect("test config deserializes")
    }

    fn json_of(config: &AnyConfig) -> Value {
        match config {
            AnyConfig::V2(c) => serde_json::to_value(c),
            AnyConfig::V3(c) => serde_json::to_value(c),
        }
        .expect("config serializes")
    }

    fn luks(extra: Value) -> Value {
        let mut l = json!({"name": "root", "device": "/dev/sda4"});
        l.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        json!({"storage": {"luks": [l]}})
    }

    fn file_with(resource_field: &str, resource: Value) -> Value {
        json!({"storage": {"files": [{"path": "/etc/f", resource_field: resource}]}})
    }

    fn partition(extra: Value) -> Value {
        json!({"storage": {"disks": [{"device": "/dev/sdb", "partitions": [extra]}]}})
    }

    /// Found by the `ignition` fuzz target: a config with a user other than core converts down to
    /// spec 2 (an old machine's Ignition creates any user), but the original reads a spec 2
    /// config back only with the core user, so the round trip is refused, naming the user.
    #[test]
    fn another_user_converts_down_but_is_refused_reading_spec_2_back() {
        let config = json!({"ignition": {"version": "3.4.0"}, "passwd": {"users": [{"name": ":ore"}]}});
        let internal = crate::to_internal(crate::parse(config.to_string().as_bytes()).unwrap().config).unwrap();
        let AnyConfig::V2(down) = convert(&internal, Target::V2_2).unwrap() else { panic!("not spec 2") };
        let bytes = mco_goser::to_go_json(&down, mco_goser::Escaping::Modern).unwrap();
        let err = crate::to_internal(crate::parse(&bytes).unwrap().config).unwrap_err().to_string();
        assert_eq!(err, "unexpected user with name: :ore. Only core user is supported");
    }

    #[test]
    fn supported_versions_match_the_parse_error_list() {
        assert_eq!(SUPPORTED_VERSIONS.join(","), crate::parse::SUPPORTED_VERSIONS);
        for t in Target::ALL {
            let v = semver::Version::parse(t.version()).unwrap();
            assert_eq!(supported_minor_version(&v), Some(v.clone()));
        }
    }

    #[test]
    fn supported_minor_version_ignores_patch_and_prerelease() {
        let cases = [
            ("3.2.1", Some("3.2.0")),
            ("3.2.0-experimental", Some("3.2.0")),
            ("3.0.0", Some("3.0.0")),
            ("2.2.7", Some("2.2.0")),
            ("2.1.0", None),
            ("2.3.0", None),
            ("3.6.0", None),
            ("4.0.0", None),
        ];
        for (input, want) in cases {
            let got = supported_minor_version(&semver::Version::parse(input).unwrap());
            assert_eq!(got.map(|v| v.to_string()).as_deref(), want, "{input}");
        }
    }

    #[test]
    fn targets_parse_from_short_and_full_versions() {
        for t in Target::ALL {
            assert_eq!(t.version().parse::<Target>(), Ok(t));
            assert_eq!(t.version().trim_end_matches(".0").parse::<Target>(), Ok(t));
            assert_eq!(t.to_string(), t.version());
        }
        assert_eq!("2.2".parse::<Target>(), Ok(Target::V2_2));
        assert_eq!("3.2.0".parse::<Target>(), Ok(Target::V3_2));
        for bad in ["3.0", "3.0.0", "3.6.0", "2.1.0", "3.2.1", "3", "", "v3.2.0", "3.2.0-experimental"] {
            let err = bad.parse::<Target>().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "conversion to Ignition spec version {bad:?} is not supported; supported target versions: \
                     2.2.0, 3.1.0, 3.2.0, 3.3.0, 3.4.0, 3.5.0"
                )
            );
        }
    }

    #[test]
    fn each_refusal_rule_fires_below_the_version_that_introduced_the_field() {
        use Target::{V2_2, V3_1, V3_2, V3_3, V3_4, V3_5};
        // (target that refuses, first target that accepts, config, expected field message)
        let cases: Vec<(Target, Target, Value, &str)> = vec![
            // 3.5 → 3.4
            (
                V3_4,
                V3_5,
                luks(json!({"cex": {"enabled": true}})),
                "$.storage.luks.0.cex is not supported in spec 3.4.0",
            ),
            // 3.4 → 3.3
            (
                V3_3,
                V3_4,
                luks(json!({"clevis": {"tang": [{"url": "http://t", "thumbprint": "z", "advertisement": "{}"}]}})),
                "$.storage.luks.0.clevis.tang.0.advertisement is not supported in spec 3.3.0",
            ),
            (V3_3, V3_4, luks(json!({"discard": true})), "$.storage.luks.0.discard is not supported in spec 3.3.0"),
            (
                V3_3,
                V3_4,
                luks(json!({"openOptions": ["--allow-discards"]})),
                "$.storage.luks.0.openOptions is not supported in spec 3.3.0",
            ),
            (
                V3_3,
                V3_4,
                file_with("contents", json!({"source": "arn:aws:s3:us-west-1:123456789012:accesspoint/t/object/p"})),
                "$.storage.files.0.contents.source uses the arn: URL scheme, which spec 3.3.0 does not support",
            ),
            (
                V3_3,
                V3_4,
                json!({"ignition": {"config": {"merge": [{"source": "ARN:aws:s3:::b/c"}]}}}),
                "$.ignition.config.merge.0.source uses the arn: URL scheme, which spec 3.3.0 does not support",
            ),
            (
                V3_3,
                V3_4,
                luks(json!({"keyFile": {"source": "arn:aws:s3:::b/key"}})),
                "$.storage.luks.0.keyFile.source uses the arn: URL scheme, which spec 3.3.0 does not support",
            ),
            // 3.3 → 3.2
            (
                V3_2,
                V3_3,
                json!({"kernelArguments": {"shouldExist": ["a=b"]}}),
                "$.kernelArguments is not supported in spec 3.2.0",
            ),
            (
                V3_2,
                V3_3,
                json!({"kernelArguments": {"shouldNotExist": ["a"]}}),
                "$.kernelArguments is not supported in spec 3.2.0",
            ),
            (
                V3_2,
                V3_3,
                json!({"storage": {"filesystems": [{"device": "/dev/sdb", "format": "none"}]}}),
                "$.storage.filesystems.0.format \"none\" is not supported in spec 3.2.0",
            ),
            // 3.2 → 3.1
            (V3_1, V3_2, luks(json!({})), "$.storage.luks is not supported in spec 3.1.0"),
            (
                V3_1,
                V3_2,
                json!({"passwd": {"users": [{"name": "core"}, {"name": "bob", "shouldExist": false}]}}),
                "$.passwd.users.1.shouldExist is not supported in spec 3.1.0",
            ),
            (
                V3_1,
                V3_2,
                json!({"passwd": {"groups": [{"name": "g", "shouldExist": false}]}}),
                "$.passwd.groups.0.shouldExist is not supported in spec 3.1.0",
            ),
            (
                V3_1,
                V3_2,
                partition(json!({"number": 4, "resize": true})),
                "$.storage.disks.0.partitions.0.resize is not supported in spec 3.1.0",
            ),
            (
                V3_1,
                V3_2,
                file_with("contents", json!({"source": "gs://bucket/f"})),
                "$.storage.files.0.contents.source uses the gs: URL scheme, which spec 3.1.0 does not support",
            ),
            // 3.x → 2.2
            (
                V2_2,
                V3_1,
                json!({"ignition": {"config": {"merge": [{"source": "https://x/c.ign", "compression": "gzip"}]}}}),
                "$.ignition.config.merge.0.compression is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"ignition": {"config": {"merge": [{"source": "https://x/c.ign", "httpHeaders": [{"name": "A", "value": "b"}]}]}}}),
                "$.ignition.config.merge.0.httpHeaders is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"ignition": {"config": {"replace": {"source": "https://x/c.ign", "compression": ""}}}}),
                "$.ignition.config.replace.compression is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"ignition": {"config": {"replace": {"source": "https://x/c.ign", "httpHeaders": [{"name": "A"}]}}}}),
                "$.ignition.config.replace.httpHeaders is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"ignition": {"security": {"tls": {"certificateAuthorities": [{"source": "https://x/ca", "compression": "gzip"}]}}}}),
                "$.ignition.security.tls.certificateAuthorities.0.compression is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"ignition": {"security": {"tls": {"certificateAuthorities": [{"source": "https://x/ca", "httpHeaders": [{"name": "A"}]}]}}}}),
                "$.ignition.security.tls.certificateAuthorities.0.httpHeaders is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"ignition": {"proxy": {"httpsProxy": "https://proxy:3128"}}}),
                "$.ignition.proxy is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"ignition": {"proxy": {"noProxy": [".local"]}}}),
                "$.ignition.proxy is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"storage": {"filesystems": [{"device": "/dev/sdb", "format": "xfs", "path": "/var", "mountOptions": ["prjquota"]}]}}),
                "$.storage.filesystems.0.mountOptions is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                file_with("contents", json!({"source": "https://x/f", "httpHeaders": [{"name": "A"}]})),
                "$.storage.files.0.contents.httpHeaders is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                file_with(
                    "append",
                    json!([{"source": "data:,a"}, {"source": "https://x/f", "httpHeaders": [{"name": "A"}]}]),
                ),
                "$.storage.files.0.append.1.httpHeaders is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                file_with(
                    "contents",
                    json!({"source": "https://x/f", "verification": {"hash": format!("sha256-{}", "a".repeat(64))}}),
                ),
                "$.storage.files.0.contents.verification.hash uses a sha256 hash, which spec 2.2.0 does not support (only sha512)",
            ),
            (
                V2_2,
                V3_1,
                partition(json!({"sizeMiB": 0})),
                "$.storage.disks.0.partitions.0.sizeMiB is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                partition(json!({"startMiB": 2048})),
                "$.storage.disks.0.partitions.0.startMiB is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                partition(json!({"number": 5, "shouldExist": false})),
                "$.storage.disks.0.partitions.0.shouldExist is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                partition(json!({"number": 5, "wipePartitionEntry": true})),
                "$.storage.disks.0.partitions.0.wipePartitionEntry is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_1,
                json!({"storage": {"filesystems": [{"device": "/dev/sdb"}]}}),
                "$.storage.filesystems.0.format is required in spec 2.2.0",
            ),
            (
                V2_2,
                V3_3,
                json!({"storage": {"filesystems": [{"device": "/dev/sdb", "format": "none"}]}}),
                "$.storage.filesystems.0.format \"none\" is not supported in spec 2.2.0",
            ),
            // Refusals of intermediate steps name the final target.
            (
                V2_2,
                V3_3,
                json!({"kernelArguments": {"shouldExist": ["a"]}}),
                "$.kernelArguments is not supported in spec 2.2.0",
            ),
            (V2_2, V3_2, luks(json!({"discard": false})), "$.storage.luks is not supported in spec 2.2.0"),
            (
                V2_2,
                V3_2,
                json!({"passwd": {"users": [{"name": "core", "shouldExist": false}]}}),
                "$.passwd.users.0.shouldExist is not supported in spec 2.2.0",
            ),
            (
                V2_2,
                V3_4,
                file_with("append", json!([{"source": "arn:aws:s3:::b/o"}])),
                "$.storage.files.0.append.0.source uses the arn: URL scheme, which spec 2.2.0 does not support",
            ),
        ];
        for (refusing, accepting, body, want) in cases {
            let config = v35(body);
            let err = convert(&config, refusing).expect_err(want).to_string();
            assert_eq!(err, format!("cannot convert Ignition config from 3.5.0 to {refusing}: {want}"));
            for target in Target::ALL {
                let got = convert(&config, target);
                assert_eq!(got.is_ok(), target >= accepting, "{want}: converting to {target} gave {got:?}");
            }
        }
    }

    #[test]
    fn every_offending_field_is_listed() {
        let config = v35(json!({
            "kernelArguments": {"shouldExist": ["a"]},
            "storage": {"luks": [{"name": "a", "device": "/dev/sda", "cex": {"enabled": true}, "discard": true}]}
        }));
        let err = convert(&config, Target::V3_2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot convert Ignition config from 3.5.0 to 3.2.0: $.kernelArguments is not supported in spec 3.2.0; \
             $.storage.luks.0.cex is not supported in spec 3.2.0; $.storage.luks.0.discard is not supported in spec 3.2.0"
        );
        let ConvertError::Unsupported { from, to, fields } = err else { panic!("wrong variant") };
        assert_eq!((from.as_str(), to, fields.len()), ("3.5.0", Target::V3_2, 3));
        assert_eq!(
            fields[0],
            Unsupported { path: "$.kernelArguments".into(), problem: "is not supported in spec 3.2.0".into() }
        );
    }

    #[test]
    fn errors_name_the_declared_3x_version_as_source() {
        let mut config = v35(json!({"kernelArguments": {"shouldExist": ["a"]}}));
        config.ignition.version = "3.3.0".into();
        let err = convert(&config, Target::V3_1).unwrap_err().to_string();
        assert!(err.starts_with("cannot convert Ignition config from 3.3.0 to 3.1.0: "), "{err}");
        config.ignition.version = String::new();
        let err = convert(&config, Target::V3_1).unwrap_err().to_string();
        assert!(err.starts_with("cannot convert Ignition config from 3.5.0 to 3.1.0: "), "{err}");
    }

    #[test]
    fn same_version_is_identity() {
        let config = v35(json!({
            "kernelArguments": {"shouldExist": ["a"]},
            "storage": {"luks": [{"name": "a", "device": "/dev/sda", "cex": {"enabled": true}}],
                        "files": [{"path": "/usr/local/bin/x", "mode": 0o4755, "contents": {"source": "data:,x"}}]}
        }));
        assert_eq!(convert(&config, Target::V3_5), Ok(AnyConfig::V3(config.clone())));
        let mut older = config.clone();
        older.ignition.version = "3.2.0".into();
        assert_eq!(convert(&older, Target::V3_5), Ok(AnyConfig::V3(config)));
    }

    #[test]
    fn default_valued_newer_fields_are_dropped_and_special_mode_bits_masked() {
        let config = v35(json!({
            "passwd": {"users": [{"name": "core", "shouldExist": true}], "groups": [{"name": "g", "shouldExist": true}]},
            "storage": {
                "disks": [{"device": "/dev/sdb", "partitions": [{"number": 1, "resize": false}]}],
                "files": [{"path": "/usr/local/bin/x", "mode": 0o4755, "contents": {"source": "data:,x"}}],
                "directories": [{"path": "/tmp/t", "mode": 0o1777}],
                "luks": [{"name": "a", "device": "/dev/sda", "cex": {"enabled": false}, "discard": false,
                          "clevis": {"tpm2": true, "tang": [{"url": "http://t", "thumbprint": "z", "advertisement": ""}],
                                     "custom": {"pin": "sss", "config": "{}", "needsNetwork": true}}}]
            }
        }));
        let at = |target| json_of(&convert(&config, target).expect("converts"));

        let v34 = at(Target::V3_4);
        assert_eq!(v34["ignition"]["version"], "3.4.0");
        assert_eq!(
            v34["storage"]["luks"][0],
            json!({"clevis": {"custom": {"config": "{}", "needsNetwork": true, "pin": "sss"},
                              "tang": [{"advertisement": "", "thumbprint": "z", "url": "http://t"}], "tpm2": true},
                   "device": "/dev/sda", "discard": false, "name": "a"})
        );
        assert_eq!(v34["storage"]["files"][0]["mode"], 0o4755);

        let v33 = at(Target::V3_3);
        assert_eq!(
            v33["storage"]["luks"][0],
            json!({"clevis": {"custom": {"config": "{}", "needsNetwork": true, "pin": "sss"},
                              "tang": [{"thumbprint": "z", "url": "http://t"}], "tpm2": true},
                   "device": "/dev/sda", "name": "a"})
        );
        assert_eq!(v33["storage"]["files"][0]["mode"], 0o755);
        assert_eq!(v33["storage"]["directories"][0]["mode"], 0o777);
        assert_eq!(v33["passwd"]["users"][0], json!({"name": "core", "shouldExist": true}));

        let mut no_luks = config.clone();
        no_luks.storage.luks.clear();
        let v31 = json_of(&convert(&no_luks, Target::V3_1).expect("converts"));
        assert_eq!(
            v31,
            json!({
                "ignition": {"version": "3.1.0"},
                "passwd": {"groups": [{"name": "g"}], "users": [{"name": "core"}]},
                "storage": {
                    "directories": [{"path": "/tmp/t", "mode": 0o777}],
                    "disks": [{"device": "/dev/sdb", "partitions": [{"number": 1}]}],
                    "files": [{"path": "/usr/local/bin/x", "contents": {"source": "data:,x"}, "mode": 0o755}]
                }
            })
        );
    }

    #[test]
    fn spec_3_1_keeps_what_spec_3_1_has() {
        let config = v35(json!({
            "ignition": {
                "config": {"merge": [{"source": "https://x/c.ign", "compression": "gzip", "httpHeaders": [{"name": "A", "value": "b"}]}]},
                "proxy": {"httpProxy": "http://p:3128", "noProxy": ["a"]},
                "security": {"tls": {"certificateAuthorities": [{"source": "https://x/ca", "verification": {"hash": format!("sha256-{}", "b".repeat(64))}}]}}
            },
            "storage": {"filesystems": [{"device": "/dev/sdb", "format": "xfs", "path": "/var", "mountOptions": ["prjquota"]}]}
        }));
        let mut want = config.clone();
        want.ignition.version = "3.1.0".into();
        assert_eq!(convert(&config, Target::V3_1), Ok(AnyConfig::V3(want)));
    }

    #[test]
    fn spec_2_2_output_follows_v32tov22() {
        let config = v35(json!({
            "ignition": {
                "config": {"merge": [{"source": "https://x/a.ign", "verification": {"hash": SHA512}}]},
                "security": {"tls": {"certificateAuthorities": [{"source": "data:,ca"}]}},
                "timeouts": {"httpTotal": 30}
            },
            "passwd": {
                "users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"], "shouldExist": true,
                           "groups": ["wheel"], "homeDir": "/home/core", "passwordHash": "$6$x", "noCreateHome": false}],
                "groups": [{"name": "g", "gid": 1001, "system": true, "passwordHash": "h"}]
            },
            "storage": {
                "disks": [{"device": "/dev/sdb", "wipeTable": true, "partitions": [{"label": "data", "number": 1, "typeGuid": "0FC63DAF-8483-4772-8E79-3D69D8477DE4"}]}],
                "filesystems": [
                    {"device": "/dev/disk/by-partlabel/data", "format": "xfs", "path": "/var/data", "label": "data", "wipeFilesystem": true, "options": ["-m", "0"]},
                    {"device": "/dev/sdc", "format": "ext4"}
                ],
                "files": [
                    {"path": "/etc/a", "mode": 420, "overwrite": true, "user": {"name": "root"}, "contents": {"source": "data:,a", "compression": ""}},
                    {"path": "/etc/b", "contents": {"source": "data:,b", "verification": {"hash": SHA512}},
                     "append": [{"source": "data:,b1"}, {"source": "https://x/b2", "compression": "gzip"}]},
                    {"path": "/etc/c", "overwrite": false, "append": [{"source": "data:,c"}]},
                    {"path": "/etc/no-contents", "mode": 384},
                    {"path": "/var/data/x", "mode": 0o4755, "contents": {"source": "data:,x"}},
                    {"path": "/var/database", "contents": {"source": "data:,d"}}
                ],
                "directories": [{"path": "/var/data", "mode": 493}, {"path": "/etc/d", "overwrite": true, "group": {"id": 10}}],
                "links": [{"path": "/etc/l", "target": "/etc/a", "hard": false}, {"path": "/var/data/h", "target": "/var/data/x", "hard": true}],
                "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/sdd", "/dev/sde"], "spares": 1}]
            },
            "systemd": {"units": [
                {"name": "a.service", "enabled": true, "contents": "[Unit]\n", "dropins": [{"name": "x.conf", "contents": "[Service]\n"}, {"name": "empty.conf"}]},
                {"name": "b.service", "mask": true},
                {"name": "c.service", "enabled": false}
            ]}
        }));
        let AnyConfig::V2(out) = convert(&config, Target::V2_2).expect("converts") else { panic!("not spec 2") };
        let root = |path: &str, contents: Value| json!({"filesystem": "root", "overwrite": false, "path": path, "contents": contents});
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({
                "ignition": {
                    "config": {"append": [{"source": "https://x/a.ign", "verification": {"hash": SHA512}}]},
                    "security": {"tls": {"certificateAuthorities": [{"source": "data:,ca", "verification": {}}]}},
                    "timeouts": {"httpTotal": 30},
                    "version": "2.2.0"
                },
                "networkd": {},
                "passwd": {
                    "groups": [{"gid": 1001, "name": "g", "passwordHash": "h", "system": true}],
                    "users": [{"groups": ["wheel"], "homeDir": "/home/core", "name": "core", "passwordHash": "$6$x",
                               "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]
                },
                "storage": {
                    "directories": [
                        {"filesystem": "/var/data", "path": "/", "mode": 493},
                        {"filesystem": "root", "group": {"id": 10}, "overwrite": true, "path": "/etc/d"}
                    ],
                    "disks": [{"device": "/dev/sdb", "partitions": [{"label": "data", "number": 1, "typeGuid": "0FC63DAF-8483-4772-8E79-3D69D8477DE4"}], "wipeTable": true}],
                    "files": [
                        {"filesystem": "root", "overwrite": true, "path": "/etc/a", "user": {"name": "root"},
                         "contents": {"source": "data:,a", "verification": {}}, "mode": 420},
                        root("/etc/b", json!({"source": "data:,b", "verification": {"hash": SHA512}})),
                        {"filesystem": "root", "overwrite": false, "path": "/etc/b", "append": true, "contents": {"source": "data:,b1", "verification": {}}},
                        {"filesystem": "root", "overwrite": false, "path": "/etc/b", "append": true,
                         "contents": {"compression": "gzip", "source": "https://x/b2", "verification": {}}},
                        {"filesystem": "root", "overwrite": false, "path": "/etc/c", "append": true, "contents": {"source": "data:,c", "verification": {}}},
                        {"filesystem": "/var/data", "overwrite": false, "path": "/x", "contents": {"source": "data:,x", "verification": {}}, "mode": 493},
                        root("/var/database", json!({"source": "data:,d", "verification": {}}))
                    ],
                    "filesystems": [
                        {"mount": {"device": "/dev/disk/by-partlabel/data", "format": "xfs", "label": "data", "options": ["-m", "0"], "wipeFilesystem": true}, "name": "/var/data"},
                        {"mount": {"device": "/dev/sdc", "format": "ext4"}, "name": "1"}
                    ],
                    "links": [
                        {"filesystem": "root", "path": "/etc/l", "target": "/etc/a"},
                        {"filesystem": "/var/data", "path": "/h", "hard": true, "target": "/var/data/x"}
                    ],
                    "raid": [{"devices": ["/dev/sdd", "/dev/sde"], "level": "raid1", "name": "md0", "spares": 1}]
                },
                "systemd": {"units": [
                    {"contents": "[Unit]\n", "dropins": [{"contents": "[Service]\n", "name": "x.conf"}, {"name": "empty.conf"}], "enabled": true, "name": "a.service"},
                    {"mask": true, "name": "b.service"},
                    {"enabled": false, "name": "c.service"}
                ]}
            })
        );
    }

    #[test]
    fn spec_2_2_replace_is_kept_and_an_empty_config_stays_empty() {
        let config = v35(json!({"ignition": {"config": {"replace": {"source": "https://x/r.ign"}}}}));
        let out = json_of(&convert(&config, Target::V2_2).unwrap());
        assert_eq!(out["ignition"]["config"], json!({"replace": {"source": "https://x/r.ign", "verification": {}}}));
        let empty = json_of(&convert(&v3::Config::new("3.5.0"), Target::V2_2).unwrap());
        assert_eq!(
            empty,
            json!({"ignition": {"config": {}, "security": {"tls": {}}, "timeouts": {}, "version": "2.2.0"},
                   "networkd": {}, "passwd": {}, "storage": {}, "systemd": {}})
        );
    }

    #[test]
    fn nodes_go_to_the_filesystem_with_the_longest_containing_mount_point() {
        let mounts = ["/var", "/var/lib/containers", "/srv/", "/"];
        let cases = [
            ("/var/log/x", "/var", "/log/x"),
            ("/var/lib/containers/s", "/var/lib/containers", "/s"),
            ("/var/lib/containersfoo", "/var", "/lib/containersfoo"),
            ("/var", "/var", "/"),
            ("/various", "/", "/various"),
            ("/srv/a", "/srv/", "/a"),
            ("/etc/a", "/", "/etc/a"),
        ];
        for (path, fs, rel) in cases {
            assert_eq!(place(path, &mounts), (fs.to_string(), rel.to_string()), "{path}");
        }
        assert_eq!(place("/etc/a", &["/var"]), ("root".to_string(), "/etc/a".to_string()));
        assert_eq!(place("/var/a", &["/var", "/var"]).0, "/var");
    }

    fn parsed_v3(value: Value) -> v3::Config {
        let parsed = crate::parse_value(&value).expect("parses");
        assert_eq!(parsed.warnings, Vec::<String>::new(), "every field belongs to the declared version");
        match parsed.config {
            AnyConfig::V3(c) => c,
            AnyConfig::V2(_) => panic!("not spec 3"),
        }
    }

    #[test]
    fn spec_3_configs_round_trip_through_the_internal_version() {
        let hash256 = format!("sha256-{}", "c".repeat(64));
        let common = json!({
            "ignition": {
                "config": {"merge": [{"source": "https://x/c.ign", "compression": "gzip", "httpHeaders": [{"name": "A", "value": "b"}]}]},
                "proxy": {"httpProxy": "http://p:3128", "httpsProxy": "http://p:3128", "noProxy": ["a", ".b"]},
                "security": {"tls": {"certificateAuthorities": [{"source": "https://x/ca", "verification": {"hash": hash256}}]}},
                "timeouts": {"httpResponseHeaders": 5, "httpTotal": 60}
            },
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"], "passwordHash": "$6$x"}],
                       "groups": [{"name": "g", "gid": 5}]},
            "storage": {
                "disks": [{"device": "/dev/sdb", "wipeTable": true,
                           "partitions": [{"label": "var", "number": 1, "sizeMiB": 0, "startMiB": 2048, "wipePartitionEntry": true, "shouldExist": true}]}],
                "filesystems": [{"device": "/dev/disk/by-partlabel/var", "format": "xfs", "path": "/var", "mountOptions": ["defaults", "prjquota"], "wipeFilesystem": true}],
                "files": [
                    {"path": "/etc/a", "mode": 420, "overwrite": true, "user": {"name": "root"}, "group": {"id": 0},
                     "contents": {"source": "https://x/a", "httpHeaders": [{"name": "Auth", "value": "t"}], "verification": {"hash": SHA512}}},
                    {"path": "/etc/b", "append": [{"source": "data:,more", "compression": ""}]}
                ],
                "directories": [{"path": "/etc/d", "mode": 493}],
                "links": [{"path": "/etc/l", "target": "/etc/a", "hard": false}],
                "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/sdc", "/dev/sdd"]}]
            },
            "systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "[Unit]\n",
                                   "dropins": [{"name": "x.conf", "contents": "[Service]\n"}]},
                                  {"name": "b.service", "mask": true}]}
        });
        let with = |version: &str, extra: Value| {
            let mut cfg = common.clone();
            cfg["ignition"]["version"] = json!(version);
            for (section, more) in extra.as_object().unwrap() {
                for (k, v) in more.as_object().unwrap() {
                    cfg[section][k] = v.clone();
                }
            }
            cfg
        };
        let since_3_2 = json!({
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1"]}, {"name": "old", "shouldExist": false}]},
            "storage": {"luks": [{"name": "data", "device": "/dev/sdc", "label": "l", "wipeVolume": true, "options": ["--type", "luks2"],
                                   "keyFile": {"source": "gs://b/key"},
                                   "clevis": {"tpm2": true, "threshold": 1, "tang": [{"url": "http://t", "thumbprint": "z"}]}}]}
        });
        let since_3_3 = json!({
            "kernelArguments": {"shouldExist": ["a=b"], "shouldNotExist": ["c"]},
            "storage": {"luks": [{"name": "data", "device": "/dev/sdc", "clevis": {"custom": {"pin": "sss", "config": "{}", "needsNetwork": false}}}],
                        "filesystems": [{"device": "/dev/sde", "format": "none"}]}
        });
        let since_3_4 = json!({
            "kernelArguments": {"shouldExist": ["a=b"]},
            "storage": {"luks": [{"name": "data", "device": "/dev/sdc", "discard": true, "openOptions": ["--perf-no_read_workqueue"],
                                   "clevis": {"tang": [{"url": "http://t", "thumbprint": "z", "advertisement": "{\"payload\": \"x\"}"}]}}],
                        "files": [{"path": "/usr/local/bin/s", "mode": 0o4755, "contents": {"source": "arn:aws:s3:us-east-1:1:accesspoint/a/object/s"}}]}
        });
        let since_3_5 =
            json!({"storage": {"luks": [{"name": "data", "device": "/dev/dasdb", "cex": {"enabled": true}}]}});
        let cases = [
            (Target::V3_1, with("3.1.0", json!({}))),
            (Target::V3_2, with("3.2.0", since_3_2)),
            (Target::V3_3, with("3.3.0", since_3_3)),
            (Target::V3_4, with("3.4.0", since_3_4)),
            (Target::V3_5, with("3.5.0", since_3_5)),
        ];
        for (target, value) in cases {
            let original = parsed_v3(value);
            let internal = crate::to_internal(AnyConfig::V3(original.clone())).unwrap();
            assert_eq!(internal.ignition.version, "3.5.0");
            assert_eq!(convert(&internal, target), Ok(AnyConfig::V3(original)), "{target}");
        }
    }

    #[test]
    fn spec_2_2_configs_round_trip_modulo_upstream_normalisations() {
        let original = json!({
            "ignition": {
                "version": "2.2.0",
                "config": {"append": [{"source": "https://x/a.ign", "verification": {"hash": SHA512}}]},
                "security": {"tls": {"certificateAuthorities": [{"source": "data:,ca", "verification": {}}]}},
                "timeouts": {"httpTotal": 30}
            },
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"], "passwordHash": "$6$x", "groups": ["wheel"]}],
                       "groups": [{"name": "g", "gid": 7, "system": true}]},
            "storage": {
                "disks": [{"device": "/dev/sdb", "wipeTable": true, "partitions": [{"label": "p", "number": 1, "typeGuid": "T"}]}],
                "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/sdc", "/dev/sdd"], "spares": 1}],
                "files": [
                    {"filesystem": "root", "path": "/etc/kept", "overwrite": false, "mode": 384, "user": {"id": 0}, "contents": {"source": "data:,k"}},
                    {"filesystem": "root", "path": "/etc//unclean/./f", "mode": 420, "contents": {"source": "data:,x", "verification": {"hash": SHA512}}},
                    {"filesystem": "root", "path": "/etc/appended", "append": true, "contents": {"source": "data:,line"}}
                ],
                "directories": [{"filesystem": "root", "path": "/etc/d", "mode": 493, "group": {"name": "wheel"}}],
                "links": [{"filesystem": "root", "path": "/etc/l", "target": "/etc/kept", "hard": true, "overwrite": true}]
            },
            "systemd": {"units": [
                {"name": "a.service", "enabled": true, "contents": "[Unit]\n", "dropins": [{"name": "x.conf", "contents": "[Service]\n"}]},
                {"name": "b.service", "mask": true},
                {"name": "c.service", "enabled": false}
            ]}
        });
        let parsed = crate::parse_value(&original).unwrap().config;
        let AnyConfig::V2(mut want) = parsed.clone() else { panic!("not spec 2") };
        let internal = crate::to_internal(parsed).unwrap();
        let AnyConfig::V2(got) = convert(&internal, Target::V2_2).unwrap() else { panic!("not spec 2") };

        // What the way up normalises: de-duplication reverses files and units, paths are
        // cleaned, spec 2's default `overwrite: true` becomes explicit, appended files never
        // overwrite.
        want.storage.files.reverse();
        want.systemd.units.reverse();
        for f in &mut want.storage.files {
            f.path = f.path.replace("//", "/").replace("/./", "/");
            f.overwrite = Some(!f.append && f.overwrite.unwrap_or(true));
        }
        assert_eq!(got, want);
    }
}
