//! Ignition spec 3 config, as the superset spec 3.5.0.
//!
//! Field order and `omitempty` behaviour mirror the Go types of `ignition/v2/config/v3_5/types`
//! exactly (the `Node` fields of files, directories and links come first, as Go's embedded
//! struct puts them), because rendered config names hash the serialized bytes. Configs of
//! 3.0-3.4 are held in this type too: every 3.x version is a subset of 3.5, and conversion to an
//! older version checks that no newer field is set (see `convert`).

use crate::goempty::{GoEmpty, go_struct};

/// The spec version the original uses internally; every rendered config carries it.
pub const MAX_VERSION: &str = "3.5.0";

go_struct! {
    /// A whole Ignition 3 config.
    #[serde(default, rename_all = "camelCase")]
    pub struct Config {
        pub ignition: Ignition,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub kernel_arguments: KernelArguments,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub passwd: Passwd,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub storage: Storage,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub systemd: Systemd,
    }
}

impl Config {
    /// An empty config of the given version.
    pub fn new(version: &str) -> Self {
        Config { ignition: Ignition { version: version.to_string(), ..Default::default() }, ..Default::default() }
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Ignition {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub config: IgnitionConfig,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub proxy: Proxy,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub security: Security,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub timeouts: Timeouts,
        pub version: String,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct IgnitionConfig {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub merge: Vec<Resource>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub replace: Resource,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Proxy {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub http_proxy: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub https_proxy: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub no_proxy: Vec<String>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Security {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub tls: Tls,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Tls {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub certificate_authorities: Vec<Resource>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Timeouts {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub http_response_headers: Option<i64>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub http_total: Option<i64>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct KernelArguments {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub should_exist: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub should_not_exist: Vec<String>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Passwd {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub groups: Vec<PasswdGroup>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub users: Vec<PasswdUser>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct PasswdGroup {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub gid: Option<i64>,
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub password_hash: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub should_exist: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub system: Option<bool>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct PasswdUser {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub gecos: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub groups: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub home_dir: Option<String>,
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub no_create_home: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub no_log_init: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub no_user_group: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub password_hash: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub primary_group: Option<String>,
        #[serde(rename = "sshAuthorizedKeys", skip_serializing_if = "GoEmpty::is_go_empty")]
        pub ssh_authorized_keys: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub shell: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub should_exist: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub system: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub uid: Option<i64>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Storage {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub directories: Vec<Directory>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub disks: Vec<Disk>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub files: Vec<File>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub filesystems: Vec<Filesystem>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub links: Vec<Link>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub luks: Vec<Luks>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub raid: Vec<Raid>,
    }
}

go_struct! {
    /// Owner of a file, directory or link, by id or name.
    #[serde(default, rename_all = "camelCase")]
    pub struct NodeOwner {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub id: Option<i64>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: Option<String>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct File {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub group: NodeOwner,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub overwrite: Option<bool>,
        pub path: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub user: NodeOwner,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub append: Vec<Resource>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub contents: Resource,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub mode: Option<i64>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Directory {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub group: NodeOwner,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub overwrite: Option<bool>,
        pub path: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub user: NodeOwner,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub mode: Option<i64>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Link {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub group: NodeOwner,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub overwrite: Option<bool>,
        pub path: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub user: NodeOwner,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub hard: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub target: Option<String>,
    }
}

go_struct! {
    /// Contents fetched from a URL (file contents, appended fragments, CAs, merged configs).
    #[serde(default, rename_all = "camelCase")]
    pub struct Resource {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub compression: Option<String>,
        #[serde(rename = "httpHeaders", skip_serializing_if = "GoEmpty::is_go_empty")]
        pub http_headers: Vec<HttpHeader>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub source: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub verification: Verification,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct HttpHeader {
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub value: Option<String>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Verification {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub hash: Option<String>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Disk {
        pub device: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub partitions: Vec<Partition>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub wipe_table: Option<bool>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Partition {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub guid: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub label: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub number: i64,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub resize: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub should_exist: Option<bool>,
        #[serde(rename = "sizeMiB", skip_serializing_if = "GoEmpty::is_go_empty")]
        pub size_mib: Option<i64>,
        #[serde(rename = "startMiB", skip_serializing_if = "GoEmpty::is_go_empty")]
        pub start_mib: Option<i64>,
        #[serde(rename = "typeGuid", skip_serializing_if = "GoEmpty::is_go_empty")]
        pub type_guid: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub wipe_partition_entry: Option<bool>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Filesystem {
        pub device: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub format: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub label: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub mount_options: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub options: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub path: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub uuid: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub wipe_filesystem: Option<bool>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Luks {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub cex: Cex,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub clevis: Clevis,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub device: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub discard: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub key_file: Resource,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub label: Option<String>,
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub open_options: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub options: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub uuid: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub wipe_volume: Option<bool>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Cex {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub enabled: Option<bool>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Clevis {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub custom: ClevisCustom,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub tang: Vec<Tang>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub threshold: Option<i64>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub tpm2: Option<bool>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct ClevisCustom {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub config: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub needs_network: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub pin: Option<String>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Tang {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub advertisement: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub thumbprint: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub url: String,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Raid {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub devices: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub level: Option<String>,
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub options: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub spares: Option<i64>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Systemd {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub units: Vec<Unit>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Unit {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub contents: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub dropins: Vec<Dropin>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub enabled: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub mask: Option<bool>,
        pub name: String,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Dropin {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub contents: Option<String>,
        pub name: String,
    }
}

/// `NewIgnFileBytesOverwriting`: mode 0644, overwrite, contents as a base64 data URL, empty
/// compression.
pub fn overwriting_file(path: &str, contents: &[u8]) -> File {
    File {
        path: path.to_string(),
        overwrite: Some(true),
        mode: Some(0o644),
        contents: Resource {
            compression: Some(String::new()),
            source: Some(format!(
                "data:text/plain;charset=utf-8;base64,{}",
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, contents)
            )),
            ..Default::default()
        },
        ..Default::default()
    }
}
