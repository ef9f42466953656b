//! On-disk state files of §5.1.

use std::path::Path;

use anyhow::Context;
use fn_error_context::context;
use mco_api::MachineConfig;

use crate::fsutil::{Fs, host_path};

/// The MachineConfig last applied (JSON); after a reboot it is the truth about the node.
pub const CURRENT_CONFIG: &str = "/etc/machine-config-daemon/currentconfig";
/// The OS image pullspec applied by on-cluster layering ("" when not layered).
pub const CURRENT_IMAGE: &str = "/etc/machine-config-daemon/currentimage";
/// Seed annotations written at first boot by the server.
pub const NODE_ANNOTATIONS: &str = "/etc/machine-config-daemon/node-annotations.json";
/// Present: skip validation and re-apply everything; deleted when consumed.
pub const FORCE_FILE: &str = "/run/machine-config-daemon-force";
/// The apply journal (ours): what an interrupted update must undo.
pub const TXN_DIR: &str = "/var/lib/machine-config-daemon/txn";

/// The on-disk current config, if any.
#[context("Reading {CURRENT_CONFIG}")]
pub fn read_current_config(root: &Path) -> anyhow::Result<Option<MachineConfig>> {
    match std::fs::read(host_path(root, CURRENT_CONFIG)) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).context("parsing the MachineConfig")?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Records `mc` as the node's current config, atomically.
pub fn write_current_config(fs: &Fs<'_>, mc: &MachineConfig) -> anyhow::Result<()> {
    let json = serde_json::to_vec(mc).context("serializing the MachineConfig")?;
    fs.write_atomic(&fs.host(CURRENT_CONFIG), &json, 0o644, None)
}

pub fn force_file_present(root: &Path) -> bool {
    host_path(root, FORCE_FILE).exists()
}
