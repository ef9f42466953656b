//! Ignition spec 2.2 config (2.0 and 2.1 configs are translated into it, as the original does).
//!
//! Field order follows the Go types of `ignition/config/v2_2/types`. The original writes spec 2
//! configs with the standard `encoding/json`, whose `omitempty` never drops a struct, so struct
//! fields here are always serialized.

use crate::goempty::{GoEmpty, go_struct};

/// The only spec 2 version the original converts from and to.
pub const VERSION: &str = "2.2.0";

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Config {
        pub ignition: Ignition,
        pub networkd: Networkd,
        pub passwd: Passwd,
        pub storage: Storage,
        pub systemd: Systemd,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Ignition {
        pub config: IgnitionConfig,
        pub security: Security,
        pub timeouts: Timeouts,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub version: String,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct IgnitionConfig {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub append: Vec<ConfigReference>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub replace: Option<ConfigReference>,
    }
}

go_struct! {
    /// A referenced config or CA certificate.
    #[serde(default, rename_all = "camelCase")]
    pub struct ConfigReference {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub source: String,
        pub verification: Verification,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Security {
        pub tls: Tls,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Tls {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub certificate_authorities: Vec<ConfigReference>,
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
    pub struct Verification {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub hash: Option<String>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Networkd {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub units: Vec<NetworkdUnit>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct NetworkdUnit {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub contents: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub dropins: Vec<Dropin>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: String,
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
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub password_hash: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub system: bool,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct PasswdUser {
        /// Deprecated in spec 2; a config using it cannot be converted to spec 3.
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub create: Option<serde_json::Value>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub gecos: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub groups: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub home_dir: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub no_create_home: bool,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub no_log_init: bool,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub no_user_group: bool,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub password_hash: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub primary_group: String,
        #[serde(rename = "sshAuthorizedKeys", skip_serializing_if = "GoEmpty::is_go_empty")]
        pub ssh_authorized_keys: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub shell: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub system: bool,
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
        pub raid: Vec<Raid>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct NodeOwner {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub id: Option<i64>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: String,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct File {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub filesystem: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub group: Option<NodeOwner>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub overwrite: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub path: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub user: Option<NodeOwner>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub append: bool,
        pub contents: FileContents,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub mode: Option<i64>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct FileContents {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub compression: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub source: String,
        pub verification: Verification,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Directory {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub filesystem: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub group: Option<NodeOwner>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub overwrite: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub path: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub user: Option<NodeOwner>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub mode: Option<i64>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Link {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub filesystem: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub group: Option<NodeOwner>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub overwrite: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub path: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub user: Option<NodeOwner>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub hard: bool,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub target: String,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Disk {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub device: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub partitions: Vec<Partition>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub wipe_table: bool,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Partition {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub guid: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub label: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub number: i64,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub size: i64,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub start: i64,
        #[serde(rename = "typeGuid", skip_serializing_if = "GoEmpty::is_go_empty")]
        pub type_guid: String,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Filesystem {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub mount: Option<Mount>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub path: Option<String>,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Mount {
        /// Deprecated in spec 2; a config using it cannot be converted to spec 3.
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub create: Option<serde_json::Value>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub device: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub format: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub label: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub options: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub uuid: Option<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub wipe_filesystem: bool,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Raid {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub devices: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub level: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub options: Vec<String>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub spares: i64,
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
        pub contents: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub dropins: Vec<Dropin>,
        /// Deprecated in spec 2 in favour of `enabled`; blocks conversion to spec 3.
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub enable: bool,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub enabled: Option<bool>,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub mask: bool,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: String,
    }
}

go_struct! {
    #[serde(default, rename_all = "camelCase")]
    pub struct Dropin {
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub contents: String,
        #[serde(skip_serializing_if = "GoEmpty::is_go_empty")]
        pub name: String,
    }
}
