//! The daemon's files on the node (`docs/behaviour.md#the-daemons-files-on-the-node`).

use std::path::Path;

use anyhow::Context;
use fn_error_context::context;
use mco_api::MachineConfig;
use serde::{Deserialize, Serialize};

use crate::failpoint::Failpoints;
use crate::fsutil::{Fs, host_path, host_path_followed};

/// The MachineConfig last applied (JSON); after a reboot it is the truth about the node.
pub const CURRENT_CONFIG: &str = "/etc/machine-config-daemon/currentconfig";
/// The OS image pullspec applied by on-cluster layering ("" when not layered).
/// Seed annotations written at first boot by the server.
pub const NODE_ANNOTATIONS: &str = "/etc/machine-config-daemon/node-annotations.json";
/// Present: skip validation and re-apply everything; deleted when consumed.
pub const FORCE_FILE: &str = "/run/machine-config-daemon-force";
/// The apply journal (ours): what an interrupted update must undo.
pub const TXN_DIR: &str = "/var/lib/machine-config-daemon/txn";
/// The daemon's last reboot request (ours, JSON [`RebootRequest`]); in /var, which every
/// deployment shares, so that the daemon on the new boot can tell how long the reboot took.
pub const REBOOT_REQUESTED: &str = "/var/lib/machine-config-daemon/reboot-requested.json";

/// When a reboot was requested, and from which boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebootRequest {
    pub boot_id: String,
    pub unix_millis: u64,
}

/// Records `request` (atomically, replacing an earlier one).
#[context("Writing {REBOOT_REQUESTED}")]
pub fn write_reboot_request(root: &Path, request: &RebootRequest) -> anyhow::Result<()> {
    let failpoints = Failpoints::default();
    let fs = Fs::new(root, &failpoints);
    fs.write_atomic(&fs.host(REBOOT_REQUESTED)?, &serde_json::to_vec(request)?, 0o644, None)?;
    fs.sync_dirs()
}

/// The recorded reboot request, if any.
#[context("Reading {REBOOT_REQUESTED}")]
pub fn read_reboot_request(root: &Path) -> anyhow::Result<Option<RebootRequest>> {
    match std::fs::read(host_path_followed(root, REBOOT_REQUESTED)?) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[context("Removing {REBOOT_REQUESTED}")]
pub fn remove_reboot_request(root: &Path) -> anyhow::Result<()> {
    let failpoints = Failpoints::default();
    let fs = Fs::new(root, &failpoints);
    fs.remove(&host_path(root, REBOOT_REQUESTED)?)?;
    // Durable, as the write: a record that came back after a crash would be observed again.
    fs.sync_dirs()
}

/// The on-disk current config, if any.
#[context("Reading {CURRENT_CONFIG}")]
pub fn read_current_config(root: &Path) -> anyhow::Result<Option<MachineConfig>> {
    match std::fs::read(host_path_followed(root, CURRENT_CONFIG)?) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).context("parsing the MachineConfig")?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Records `mc` as the node's current config, atomically.
pub fn write_current_config(fs: &Fs<'_>, mc: &MachineConfig) -> anyhow::Result<()> {
    let json = serde_json::to_vec(mc).context("serializing the MachineConfig")?;
    fs.write_atomic(&fs.host(CURRENT_CONFIG)?, &json, 0o644, None)
}

/// The OS image of on-cluster layering the node runs, if it runs one: recorded on the on-disk
/// config it was applied with (written atomically with it, so the two cannot disagree).
pub fn layered_image(on_disk: Option<&MachineConfig>) -> Option<&str> {
    let annotations = on_disk?.metadata.annotations.as_ref()?;
    annotations.get(mco_api::constants::CURRENT_IMAGE_ANNOTATION).map(String::as_str).filter(|i| !i.is_empty())
}

/// `config` to be applied on a node of a layered pool: the built `image` instead of the config's
/// osImageURL (as upstream), recorded for [`layered_image`].
pub fn with_layered_image(config: &mut MachineConfig, image: &str) {
    config.spec.os_image_url = image.to_string();
    let annotations = config.metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(mco_api::constants::CURRENT_IMAGE_ANNOTATION.to_string(), image.to_string());
}

pub fn force_file_present(root: &Path) -> bool {
    host_path(root, FORCE_FILE).is_ok_and(|p| std::fs::symlink_metadata(p).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layered_image_is_recorded_with_the_config_it_was_applied_with() {
        let dir = tempfile::tempdir().unwrap();
        let failpoints = Failpoints::default();
        let fs = Fs::new(dir.path(), &failpoints);
        let mut config = MachineConfig::new("rendered-worker-1", Default::default());
        config.spec.os_image_url = "registry.example.com/os@sha256:base".into();
        write_current_config(&fs, &config).unwrap();
        let on_disk = read_current_config(dir.path()).unwrap();
        assert_eq!(layered_image(on_disk.as_ref()), None, "a plain pool's config");
        assert_eq!(layered_image(None), None, "nothing on disk");

        with_layered_image(&mut config, "registry.example.com/layered@sha256:built");
        assert_eq!(config.spec.os_image_url, "registry.example.com/layered@sha256:built");
        write_current_config(&fs, &config).unwrap();
        let on_disk = read_current_config(dir.path()).unwrap();
        assert_eq!(layered_image(on_disk.as_ref()), Some("registry.example.com/layered@sha256:built"));
    }
}
