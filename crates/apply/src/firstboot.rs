//! The first boot (`docs/behaviour.md#the-first-boot`, upstream `machine-config-daemon
//! firstboot-complete-machineconfig`): Ignition wrote the pool's files, units and SSH keys and
//! left the rendered MachineConfig in `/etc/ignition-machine-config-encapsulated.json`; before
//! kubelet starts, the daemon applies what Ignition cannot (OS image, kernel arguments), records
//! the config, renames the file to `.bak` and reboots into the new deployment.
//!
//! The machine's state is an empty config with the booted image, those requested kernel
//! arguments the booted deployment already has, and the running FIPS mode. If that already
//! matches the target, the file is deleted and nothing else happens (as upstream).
//!
//! Before anything else, a machine whose boot image is too old for the cluster's skew
//! enforcement is refused ([`crate::skew`]): the reason goes to its console, nothing is pulled or
//! deployed and the encapsulated file stays (upstream has no such check).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use mco_api::{MachineConfig, MachineConfigSpec};
use mco_bootimage::skew::NodeVerdict;
use mco_disruption::ConfigDiff;

use crate::apply::{self, Applied, ApplyError, Disruption, Node};
use crate::failpoint::Failpoints;
use crate::fsutil::{Fs, host_path, host_path_followed, sync_dir};
use crate::os::OsStatus;
use crate::plan::split_kargs;
use crate::skew;

/// The target config Ignition wrote: the first-boot marker.
pub const ENCAPSULATED: &str = "/etc/ignition-machine-config-encapsulated.json";
/// Where the marker goes once the first boot is done.
pub const ENCAPSULATED_BAK: &str = "/etc/ignition-machine-config-encapsulated.json.bak";
/// The running kernel's FIPS mode ("1" when on).
pub const FIPS_ENABLED: &str = "/proc/sys/crypto/fips_enabled";

/// What a first-boot run did.
#[derive(Debug)]
pub enum Firstboot {
    /// No encapsulated config: not a first boot, or it is done.
    NotFirstboot,
    /// The machine already ran the config: the encapsulated file was deleted, no reboot.
    AlreadyMatches { config: String },
    /// The config was applied, the file renamed to `.bak` and the reboot requested.
    Applied { config: String, applied: Applied },
    /// The boot image is too old (or cannot be judged) under the cluster's skew enforcement:
    /// the reason is on the console ([`skew::ISSUE_FILE`]), nothing else changed.
    Refused { config: String, reason: String },
}

/// Where a host keeps its boot image's aleph file: the physical root's `/sysroot`.
pub fn host_aleph(root: &Path) -> anyhow::Result<PathBuf> {
    Ok(host_path_followed(root, "/sysroot")?.join(mco_os::aleph::ALEPH_FILE))
}

/// The config the machine runs before its first update (upstream's `oldConfig`).
pub fn booted_config(desired: &MachineConfig, os: &OsStatus, fips: bool) -> MachineConfig {
    let present: Vec<String> = split_kargs(desired.spec.kernel_arguments.as_deref().unwrap_or_default())
        .into_iter()
        .filter(|k| os.kargs.contains(k))
        .collect();
    let spec = MachineConfigSpec {
        os_image_url: os.booted_image.clone().unwrap_or_default(),
        kernel_arguments: (!present.is_empty()).then_some(present),
        fips,
        ..MachineConfigSpec::default()
    };
    MachineConfig::new("mco-empty-mc", spec)
}

/// Completes the first boot of `node` (which needs an OS backend), its boot image's aleph file
/// at [`host_aleph`].
pub fn firstboot(node: &Node, failpoints: &Failpoints) -> Result<Firstboot, ApplyError> {
    let aleph = host_aleph(&node.root).map_err(|e| ApplyError::Degraded(format!("{e:#}")))?;
    firstboot_with_aleph(node, &aleph, failpoints)
}

/// [`firstboot`] with the boot image's aleph file at `aleph` (an OSTree sysroot's own).
pub fn firstboot_with_aleph(node: &Node, aleph: &Path, failpoints: &Failpoints) -> Result<Firstboot, ApplyError> {
    let degraded = |e: anyhow::Error| ApplyError::Degraded(format!("{e:#}"));
    let path = host_path(&node.root, ENCAPSULATED).map_err(degraded)?;
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Firstboot::NotFirstboot),
        Err(e) => return Err(ApplyError::Degraded(format!("reading {ENCAPSULATED}: {e}"))),
    };
    let desired: MachineConfig = serde_json::from_slice(&bytes)
        .map_err(|e| ApplyError::Degraded(format!("{ENCAPSULATED} is not a MachineConfig: {e}")))?;
    let config = desired.metadata.name.clone().unwrap_or_default();
    let verdict = skew::firstboot_verdict(skew::read_status(&node.root), aleph, mco_os::aleph::read(aleph));
    if let NodeVerdict::Refused { message } = verdict {
        tracing::error!(config, "refusing to pivot: {message}");
        let fs = Fs::new(&node.root, failpoints);
        fs.host(skew::ISSUE_FILE)
            .and_then(|issue| fs.write_atomic(&issue, skew::issue_text(&message).as_bytes(), 0o644, None))
            .and_then(|()| fs.sync_dirs())
            .map_err(|e| ApplyError::Degraded(format!("{message}; and writing {}: {e:#}", skew::ISSUE_FILE)))?;
        return Ok(Firstboot::Refused { config, reason: message });
    }
    // An interrupted earlier attempt is rolled back before the machine's state is read.
    apply::recover(node).map_err(degraded)?;
    let os = node
        .os
        .as_deref()
        .ok_or_else(|| ApplyError::Degraded("the first boot needs an OS backend (give a sysroot)".into()))?;
    let status = os.status().map_err(degraded)?;
    let fips = host_path_followed(&node.root, FIPS_ENABLED)
        .is_ok_and(|p| fs::read_to_string(p).is_ok_and(|s| s.trim() == "1"));
    let old = booted_config(&desired, &status, fips);
    let diff = ConfigDiff::between(Some(&old), &desired, false).map_err(|e| ApplyError::Degraded(e.to_string()))?;
    if diff.is_empty() {
        fs::remove_file(&path).map_err(|e| ApplyError::Degraded(format!("removing {ENCAPSULATED}: {e}")))?;
        sync_parent(&path).map_err(degraded)?;
        tracing::info!(config, "the machine already runs the first-boot config");
        return Ok(Firstboot::AlreadyMatches { config });
    }
    // The encapsulated config becomes `.bak` once the update is complete, in the booted `/etc`
    // and in the deployment the machine boots next (its own `/etc`), before any reboot is
    // requested (which may stop this process at any moment). A crash before the rename repeats
    // the (idempotent) first boot on the next run.
    let rename = || -> anyhow::Result<()> {
        host_path(&node.root, ENCAPSULATED_BAK)
            .and_then(|bak| Ok(fs::rename(&path, bak)?))
            .with_context(|| format!("renaming {ENCAPSULATED}"))?;
        sync_parent(&path)?;
        os.carry_into_staged(&node.root, &[ENCAPSULATED.to_string(), ENCAPSULATED_BAK.to_string()])
    };
    let rules = Disruption::Firstboot { skip_registry_drain: false };
    let applied = apply::apply_then(node, &old, &desired, &rules, failpoints, rename)?;
    // Without a reboot of its own, the update did not rename: the first boot reboots anyway.
    if !applied.disruption.reboots() {
        rename().map_err(degraded)?;
        node.reboot.reboot(&format!("Completing firstboot provisioning to {config}")).map_err(degraded)?;
    }
    Ok(Firstboot::Applied { config, applied })
}

fn sync_parent(path: &std::path::Path) -> anyhow::Result<()> {
    sync_dir(path.parent().unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn booted_config_keeps_only_requested_kargs_the_machine_has() {
        let desired = |kargs: Option<&[&str]>| {
            let spec = MachineConfigSpec {
                os_image_url: "reg/os@sha256:2".into(),
                kernel_arguments: kargs.map(s),
                ..Default::default()
            };
            MachineConfig::new("rendered-worker-1", spec)
        };
        let os = OsStatus {
            booted_image: Some("reg/os@sha256:1".into()),
            kargs: s(&["root=x", "nosmt", "b=2"]),
            ..Default::default()
        };
        // (requested kargs, FIPS on, the kargs of the booted config)
        type Case<'a> = (Option<&'a [&'a str]>, bool, Option<Vec<String>>);
        let cases: &[Case] = &[
            (None, false, None),
            (Some(&["nosmt", "a=1 b=2", "c"]), false, Some(s(&["nosmt", "b=2"]))),
            (Some(&["c"]), true, None),
        ];
        for (kargs, fips, want) in cases {
            let old = booted_config(&desired(*kargs), &os, *fips);
            assert_eq!(old.metadata.name.as_deref(), Some("mco-empty-mc"));
            assert_eq!(old.spec.os_image_url, "reg/os@sha256:1");
            assert_eq!(&old.spec.kernel_arguments, want, "{kargs:?}");
            assert_eq!(old.spec.fips, *fips);
            assert!(old.spec.config.is_none());
        }
        let unknown = booted_config(&desired(None), &OsStatus::default(), false);
        assert_eq!(unknown.spec.os_image_url, "");
    }
}
