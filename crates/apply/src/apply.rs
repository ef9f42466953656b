//! The apply engine: plan → validate the current state → journal everything the plan touches →
//! run the steps → record the new config → drop the journal. Any failure rolls back in reverse and
//! leaves the node on the old config; a crash leaves the journal, and the next run rolls back
//! first and then applies again, so it converges.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use mco_api::MachineConfig;
use mco_api::constants::{MAX_REASON_LEN, STATE_DEGRADED, STATE_UNRECONCILABLE};
use mco_api::operator::NodeDisruptionPolicyClusterStatus;
use mco_disruption::ConfigDiff;

use crate::actions;
use crate::failpoint::Failpoints;
use crate::files::{Originals, noorig_path, orig_path, remove_stale, write_file};
use crate::fsutil::{Fs, Ids};
use crate::journal::{self, Recorder};
use crate::os::OsBackend;
use crate::plan::{self, LEGACY_SSH_KEY_PATH, Plan, PlanError, Side, Step, dropin_path, unit_path};
use crate::runner::{Cmd, Runner};
use crate::shadow::{SHADOW_PATH, set_password_hashes};
use crate::ssh::{SSH_DIR, write_ssh_keys};
use crate::state::{self, CURRENT_CONFIG, FORCE_FILE};
use crate::units::{DirSystemd, Systemd, remove_unit, with_unit_files, write_unit};
use crate::validate;

/// Restarts the node.
pub trait Reboot: Send + Sync {
    fn reboot(&self, rationale: &str) -> anyhow::Result<()>;
}

/// `systemd-run` the reboot as upstream does, after the staged deployment is finalized.
pub struct SystemdRunReboot {
    pub runner: Arc<dyn Runner>,
}

pub fn reboot_command(rationale: &str) -> Cmd {
    Cmd::new(
        "systemd-run",
        [
            "--unit",
            "machine-config-daemon-reboot",
            "--description",
            &format!("machine-config-daemon: {rationale}"),
            "-p",
            "Requires=ostree-finalize-staged.service",
            "-p",
            "After=ostree-finalize-staged.service",
            "/bin/sh",
            "-c",
            "systemctl reboot",
        ],
    )
}

impl Reboot for SystemdRunReboot {
    fn reboot(&self, rationale: &str) -> anyhow::Result<()> {
        self.runner
            .run(&reboot_command(rationale))
            .map(drop)
            .context("reboot command failed, something is seriously wrong")
    }
}

/// A directory root cannot reboot: the request is written to `ROOT/run/mco-reboot-requested`
/// (the rationale) for whoever runs the root.
pub struct RequestFileReboot {
    pub root: PathBuf,
}

pub const REBOOT_REQUEST: &str = "/run/mco-reboot-requested";

impl Reboot for RequestFileReboot {
    fn reboot(&self, rationale: &str) -> anyhow::Result<()> {
        let fp = Failpoints::default();
        let fs = Fs::new(&self.root, &fp);
        fs.write_atomic(&fs.host(REBOOT_REQUEST)?, format!("{rationale}\n").as_bytes(), 0o644, None)?;
        fs.sync_dirs()
    }
}

/// Which rules pick the post-update actions (`docs/behaviour.md#node-disruption-actions`).
#[derive(Debug, Clone, PartialEq)]
pub enum Disruption {
    /// The cluster's node disruption policies (`status.nodeDisruptionPolicyStatus.clusterPolicies`).
    /// `skip_registry_drain`: the `image-registry-override-drain` ConfigMap exists.
    Cluster { policies: NodeDisruptionPolicyClusterStatus, skip_registry_drain: bool },
    /// The fixed rules of a node's first boot (units reboot).
    Firstboot { skip_registry_drain: bool },
}

impl Disruption {
    /// The post-update actions and the drain decision for `diff`.
    pub fn plan(&self, diff: &ConfigDiff) -> Result<mco_disruption::Plan, mco_disruption::registries::RegistriesError> {
        match self {
            Disruption::Cluster { policies, skip_registry_drain } => {
                mco_disruption::cluster_plan(diff, policies, *skip_registry_drain)
            }
            Disruption::Firstboot { skip_registry_drain } => mco_disruption::firstboot_plan(diff, *skip_registry_drain),
        }
    }
}

/// The node the engine acts on.
pub struct Node {
    pub root: PathBuf,
    pub systemd: Box<dyn Systemd>,
    pub os: Option<Box<dyn OsBackend>>,
    pub originals: Originals,
    pub reboot: Box<dyn Reboot>,
}

impl Node {
    /// A node root in a directory (tests, images, the lab): systemd links made like
    /// `systemctl --root`, reboots requested through a file, OS changes through `os` only.
    pub fn directory_root(root: PathBuf, os: Option<Box<dyn OsBackend>>) -> Self {
        Node {
            systemd: Box::new(DirSystemd { root: root.clone() }),
            os,
            originals: Originals::default(),
            reboot: Box::new(RequestFileReboot { root: root.clone() }),
            root,
        }
    }
}

/// Why an update did not happen; the node is on the old config. Maps to the node's `state` and
/// `reason` annotations.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Unreconcilable(String),
    #[error("{0}")]
    Degraded(String),
}

impl ApplyError {
    fn degraded(e: anyhow::Error) -> Self {
        ApplyError::Degraded(format!("{e:#}"))
    }

    /// The `state` annotation value.
    pub fn state(&self) -> &'static str {
        match self {
            ApplyError::Unreconcilable(_) => STATE_UNRECONCILABLE,
            ApplyError::Degraded(_) => STATE_DEGRADED,
        }
    }

    /// The `reason` annotation value (truncated as upstream does).
    pub fn reason(&self) -> String {
        let (ApplyError::Unreconcilable(s) | ApplyError::Degraded(s)) = self;
        s.chars().take(MAX_REASON_LEN).collect()
    }
}

impl From<PlanError> for ApplyError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::Unreconcilable { .. } => ApplyError::Unreconcilable(e.to_string()),
            PlanError::Invalid(_) => ApplyError::Degraded(e.to_string()),
        }
    }
}

/// A completed update.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub steps: usize,
    pub recovered: Recovered,
    /// The post-update actions that ran and the drain decision (a one-shot apply does not drain).
    pub disruption: mco_disruption::Plan,
}

/// What [`recover`] found of an interrupted update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    Nothing,
    /// It was rolled back.
    RolledBack,
    /// It was complete but its reboot may not have been requested: it was requested again.
    RebootRequested,
    /// It was complete and the node has rebooted since.
    Completed,
}

fn name_of(mc: &MachineConfig) -> &str {
    mc.metadata.name.as_deref().unwrap_or("")
}

/// Rolls back an update a crash interrupted, or completes one that was sealed for its reboot.
/// Callers that read the on-disk current config must recover first: the interrupted update may
/// have recorded its config.
pub fn recover(node: &Node) -> anyhow::Result<Recovered> {
    let failpoints = Failpoints::default();
    let fs = &Fs::new(&node.root, &failpoints);
    let Some(journal) = journal::load(&node.root)? else {
        // A journal that was never committed never took effect.
        journal::finish(&node.root)?;
        return Ok(Recovered::Nothing);
    };
    if let Some(seal) = journal::sealed(&node.root)? {
        if seal.boot_id == journal::boot_id(&node.root)? {
            // The journal stays until the reboot happened: a daemon restarted again before it
            // (its pod, while the machine goes down) asks again instead of taking the old
            // deployment, still booted, for drift from the new config.
            tracing::warn!(to = %journal.to, "an update completed without its reboot; requesting it");
            node.reboot.reboot(&seal.rationale)?;
            return Ok(Recovered::RebootRequested);
        }
        journal::finish(&node.root)?;
        return Ok(Recovered::Completed);
    }
    tracing::warn!(from = %journal.from, to = %journal.to, "rolling back an interrupted update");
    journal::rollback(fs, &journal, node.systemd.as_ref(), node.os.as_deref())?;
    journal::finish(&node.root)?;
    Ok(Recovered::RolledBack)
}

/// Updates the node from `old` to `new`.
pub fn apply(
    node: &Node,
    old: &MachineConfig,
    new: &MachineConfig,
    disruption: &Disruption,
    failpoints: &Failpoints,
) -> Result<Applied, ApplyError> {
    apply_then(node, old, new, disruption, failpoints, || Ok(()))
}

/// [`apply`], running `before_reboot` when the update reboots: once it is written and sealed
/// (nothing of it rolls back any more), before the reboot is requested, which may stop this
/// process at any moment. A failure there rolls back like a failed reboot request.
pub fn apply_then(
    node: &Node,
    old: &MachineConfig,
    new: &MachineConfig,
    rules: &Disruption,
    failpoints: &Failpoints,
    before_reboot: impl FnOnce() -> anyhow::Result<()>,
) -> Result<Applied, ApplyError> {
    let fs = Fs::new(&node.root, failpoints);
    let recovered = recover(node).map_err(ApplyError::degraded)?;
    let force = state::force_file_present(&node.root);
    let (old_name, new_name) = (name_of(old), name_of(new));
    let old_ign = plan::ignition_of(old_name, &old.spec)?;
    let new_ign = plan::ignition_of(new_name, &new.spec)?;
    let plan = plan::plan(
        Side { name: old_name, spec: &old.spec, ignition: &old_ign },
        Side { name: new_name, spec: &new.spec, ignition: &new_ign },
        force,
    )?;
    let diff = ConfigDiff::between(Some(old), new, force).map_err(|e| ApplyError::Degraded(e.to_string()))?;
    let disruption = rules.plan(&diff).map_err(|e| ApplyError::Degraded(e.to_string()))?;
    let os_step = plan.steps.iter().find_map(|s| if let Step::Os(c) = s { Some(c) } else { None });
    if let (Some(changes), None) = (os_step, &node.os) {
        return Err(ApplyError::Degraded(format!(
            "config {new_name} changes the OS ({changes:?}) but no OS backend is configured (give a sysroot)"
        )));
    }
    if !force {
        validate::validate(&node.root, node.systemd.as_ref(), node.os.as_deref(), &old.spec, &old_ign).map_err(
            |problems| {
                ApplyError::Degraded(format!(
                    "unexpected on-disk state validating against {old_name}: {}",
                    problems.join("; ")
                ))
            },
        )?;
    }
    let ids = Ids::load(&node.root).map_err(ApplyError::degraded)?;
    let journal = record(node, &plan, old_name, new_name).map_err(ApplyError::degraded)?;
    tracing::info!(from = old_name, to = new_name, steps = plan.steps.len(), "applying");
    let result = run(node, &fs, &ids, &plan, new, &disruption, before_reboot);
    if let Err(e) = result {
        tracing::error!("update failed, rolling back: {e:#}");
        let rolled_back = journal::rollback(&fs, &journal, node.systemd.as_ref(), node.os.as_deref())
            .and_then(|()| journal::finish(&node.root));
        return Err(match rolled_back {
            Ok(()) => ApplyError::degraded(e),
            Err(r) => ApplyError::Degraded(format!("{e:#}; rolling back also failed (retried on the next run): {r:#}")),
        });
    }
    Ok(Applied { steps: plan.steps.len(), recovered, disruption })
}

/// Journals every path and unit state the plan may touch, plus the state files. Every path is
/// resolved inside the root first, so a root that cannot hold the update (a link loop) is
/// refused before anything is written.
fn record(node: &Node, plan: &Plan, from: &str, to: &str) -> anyhow::Result<journal::Journal> {
    let (paths, mut units, os) = touched(plan);
    for path in &paths {
        crate::fsutil::host_path(&node.root, path)?;
    }
    units.sort();
    units.dedup();
    let states =
        units.into_iter().map(|u| node.systemd.is_enabled(&u).map(|s| (u, s))).collect::<anyhow::Result<Vec<_>>>()?;
    let mut rec = Recorder::begin(&node.root)?;
    let recorded = paths.iter().try_for_each(|p| rec.path(p));
    match recorded {
        Ok(()) => rec.commit(from, to, states, os),
        // An uncommitted journal never took effect: nothing of it is left behind.
        Err(e) => match journal::finish(&node.root) {
            Ok(()) => Err(e),
            Err(cleanup) => Err(e.context(format!("and removing the uncommitted journal: {cleanup:#}"))),
        },
    }
}

/// The node paths a plan may touch (with the backups of each file), the units whose enablement
/// it may change, and whether it stages an OS.
fn touched(plan: &Plan) -> (Vec<String>, Vec<String>, bool) {
    let mut paths: Vec<String> = Vec::new();
    let mut units: Vec<String> = Vec::new();
    let mut os = false;
    let with_backups =
        |paths: &mut Vec<String>, path: &str| paths.extend([path.to_string(), orig_path(path), noorig_path(path)]);
    for step in &plan.steps {
        match step {
            Step::WriteFile(f) => with_backups(&mut paths, &f.path),
            Step::WriteUnit(u) => {
                for d in &u.dropins {
                    with_backups(&mut paths, &dropin_path(&u.name, &d.name));
                }
                with_backups(&mut paths, &unit_path(&u.name));
                units.push(u.name.clone());
            }
            Step::EnableUnits(list) | Step::DisableUnits(list) | Step::PresetUnits(list) => units.extend(list.clone()),
            Step::RemoveFile(p) | Step::RemoveDropin(p) => with_backups(&mut paths, p),
            Step::RemoveUnit(name) => {
                with_backups(&mut paths, &unit_path(name));
                units.push(name.clone());
            }
            Step::WriteSshKeys(_) => paths.extend([SSH_DIR.to_string(), LEGACY_SSH_KEY_PATH.to_string()]),
            Step::SetPasswordHashes(_) => paths.push(SHADOW_PATH.to_string()),
            Step::Os(_) => os = true,
        }
    }
    paths.extend([CURRENT_CONFIG.to_string(), FORCE_FILE.to_string()]);
    (paths, units, os)
}

/// Writes the update, runs its post-update actions and commits. A reboot is requested last,
/// after the journal is sealed and `before_reboot` ran: from then on a crash must not roll back
/// (the reboot may be under way), but a failing request still rolls back like any other failure.
fn run(
    node: &Node,
    fs: &Fs<'_>,
    ids: &Ids,
    plan: &Plan,
    new: &MachineConfig,
    disruption: &mco_disruption::Plan,
    before_reboot: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    fs.failpoints.hit("journal committed")?;
    let new_dropins = plan::dropin_paths(&plan::ignition_of(name_of(new), &new.spec)?);
    let systemd = node.systemd.as_ref();
    for step in &plan.steps {
        match step {
            Step::WriteFile(f) => write_file(fs, ids, &node.originals, f)?,
            Step::WriteUnit(u) => write_unit(fs, systemd, u)?,
            Step::EnableUnits(units) => systemd.enable(&with_unit_files(systemd, units, "enable")?)?,
            Step::DisableUnits(units) => systemd.disable(&with_unit_files(systemd, units, "disable")?)?,
            Step::PresetUnits(units) => {
                for u in units {
                    // A unit may be only drop-ins for a unit that does not exist (upstream ignores this too).
                    if let Err(e) = systemd.preset(u) {
                        tracing::info!("Could not reset unit preset for {u}, skipping: {e:#}");
                    }
                }
            }
            Step::RemoveFile(p) => remove_stale(fs, &node.originals, p, true, new_dropins.contains(p))?,
            Step::RemoveDropin(p) => remove_stale(fs, &node.originals, p, false, false)?,
            Step::RemoveUnit(name) => remove_unit(fs, systemd, &node.originals, name)?,
            Step::WriteSshKeys(keys) => write_ssh_keys(fs, ids, keys)?,
            Step::SetPasswordHashes(hashes) => set_password_hashes(fs, hashes)?,
            Step::Os(changes) => {
                node.os.as_ref().context("no OS backend")?.apply(changes)?;
            }
        }
        fs.failpoints.hit(&format!("after {}", step_name(step)))?;
    }
    state::write_current_config(fs, new)?;
    if let Some(os) = node.os.as_ref().filter(|_| plan.steps.iter().any(|step| matches!(step, Step::Os(_)))) {
        // What this update wrote in /etc, its record of the new config included, for the
        // deployment the node boots next.
        let mut paths = plan::etc_paths(&plan::ignition_of(name_of(new), &new.spec)?);
        paths.extend([CURRENT_CONFIG.to_string(), SHADOW_PATH.to_string()]);
        os.carry_into_staged(&node.root, &paths)?;
    }
    fs.remove(&fs.host(FORCE_FILE)?)?;
    fs.sync_dirs()?;
    actions::run(systemd, &disruption.actions, name_of(new), fs.failpoints)?;
    fs.failpoints.hit("before journal removal")?;
    if disruption.reboots() {
        let rationale = format!("Node will reboot into config {}", name_of(new));
        journal::seal(&node.root, &rationale)?;
        fs.failpoints.hit("journal sealed for the reboot")?;
        before_reboot()?;
        node.reboot.reboot(&rationale)?;
        // The reboot is under way: nothing may roll back now; a journal left here is finished by
        // the next run (which requests the reboot again if the node has not rebooted).
        if let Err(e) = journal::finish(&node.root) {
            tracing::warn!("removing the sealed journal: {e:#}");
        }
        return Ok(());
    }
    journal::finish(&node.root)
}

fn step_name(step: &Step) -> String {
    match step {
        Step::WriteFile(f) => format!("write {}", f.path),
        Step::WriteUnit(u) => format!("write unit {}", u.name),
        Step::EnableUnits(u) => format!("enable {u:?}"),
        Step::DisableUnits(u) => format!("disable {u:?}"),
        Step::PresetUnits(u) => format!("preset {u:?}"),
        Step::RemoveFile(p) | Step::RemoveDropin(p) => format!("remove {p}"),
        Step::RemoveUnit(u) => format!("remove unit {u}"),
        Step::WriteSshKeys(_) => "write SSH keys".into(),
        Step::SetPasswordHashes(_) => "set password hashes".into(),
        Step::Os(_) => "OS changes".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil::host_path;

    /// A sealed journal is never rolled back: in the same boot its reboot is requested again,
    /// after a reboot it is just removed.
    #[test]
    fn sealed_updates_are_kept() {
        for (same_boot, want) in [(true, Recovered::RebootRequested), (false, Recovered::Completed)] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().to_path_buf();
            std::fs::create_dir_all(root.join("etc")).unwrap();
            std::fs::write(root.join("etc/new.conf"), "new\n").unwrap();
            let mut rec = Recorder::begin(&root).unwrap();
            rec.path("/etc/new.conf").unwrap();
            rec.commit("a", "b", Vec::new(), false).unwrap();
            // The booter of a directory root (the lab) records each boot's id.
            let boot_id = host_path(&root, journal::DIRECTORY_ROOT_BOOT_ID).unwrap();
            std::fs::create_dir_all(boot_id.parent().unwrap()).unwrap();
            std::fs::write(&boot_id, "boot-1\n").unwrap();
            journal::seal(&root, "Node will reboot into config b").unwrap();
            if !same_boot {
                std::fs::write(&boot_id, "boot-2\n").unwrap();
            }
            let node = Node::directory_root(root.clone(), None);
            assert_eq!(recover(&node).unwrap(), want);
            assert_eq!(std::fs::read_to_string(root.join("etc/new.conf")).unwrap(), "new\n", "not rolled back");
            let requested = std::fs::read_to_string(host_path(&root, REBOOT_REQUEST).unwrap()).ok();
            assert_eq!(requested.as_deref(), same_boot.then_some("Node will reboot into config b\n"));
            // Kept until the reboot: every start before it asks for the reboot again.
            assert_eq!(journal::load(&root).unwrap().is_none(), !same_boot, "journal removed once rebooted");
            if same_boot {
                std::fs::remove_file(host_path(&root, REBOOT_REQUEST).unwrap()).unwrap();
                assert_eq!(recover(&node).unwrap(), Recovered::RebootRequested, "asked again");
                std::fs::write(&boot_id, "boot-2\n").unwrap();
                assert_eq!(recover(&node).unwrap(), Recovered::Completed);
                assert!(journal::load(&root).unwrap().is_none(), "journal removed once rebooted");
            }
        }
    }
}
