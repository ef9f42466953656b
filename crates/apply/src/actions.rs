//! Post-update actions (`docs/behaviour.md#node-disruption-actions`, upstream
//! `performPostConfigChangeNodeDisruptionAction`): once the new config is written and recorded, the
//! disruption plan's actions run in list order through [`Systemd`]. Drain was done before the
//! update and Reboot happens after the update's commit point (see [`crate::apply`]), so neither
//! runs here.

use anyhow::{Context, anyhow};
use mco_api::operator::{NodeDisruptionPolicyStatusAction as Action, NodeDisruptionPolicyStatusActionType as Kind};

use crate::failpoint::Failpoints;
use crate::units::{Systemd, UnitFileState};

/// Restarting it fails on RHEL 8 nodes, which lack it; upstream then runs `update-ca-trust`.
pub const UPDATE_CA_TRUST_SERVICE: &str = "coreos-update-ca-trust.service";

/// What `Special` (a registries.conf change) reloads: `systemctl reload crio`, as upstream spells it.
pub const SPECIAL_RELOAD: &str = "crio";

/// CRI-O's unit. A node may run another container runtime (the lab's run containerd, which reads
/// neither registries.conf nor policy.json): there the actions that make CRI-O re-read its files
/// are skipped rather than failing the update (upstream's nodes always run CRI-O).
const CRIO_SERVICE: &str = "crio.service";

/// Whether `unit` names CRI-O's service and the node does not have it.
fn is_missing_crio(systemd: &dyn Systemd, unit: &str) -> anyhow::Result<bool> {
    if unit != SPECIAL_RELOAD && unit != CRIO_SERVICE {
        return Ok(false);
    }
    Ok(systemd.is_enabled(CRIO_SERVICE)? == UnitFileState::NotFound)
}

fn service<'a>(action: &'a Action, what: &str) -> anyhow::Result<&'a str> {
    let reference = match action.type_ {
        Kind::Restart => action.restart.as_ref(),
        _ => action.reload.as_ref(),
    };
    reference
        .map(|s| s.service_name.as_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| anyhow!("{what} action without a service name"))
}

/// Runs the service actions of `actions` in order; the first failure stops and is returned.
/// `config` names the new config (for the log).
pub fn run(systemd: &dyn Systemd, actions: &[Action], config: &str, failpoints: &Failpoints) -> anyhow::Result<()> {
    for action in actions {
        // The drain was done before the update; every other action is logged in the original's
        // words (its e2e tests look for them).
        if !matches!(action.type_, Kind::Drain) {
            tracing::info!("Performing post config change action: {:?} for config {config}", action.type_);
        }
        let unit = match action.type_ {
            Kind::Restart => Some(service(action, "Restart")?),
            Kind::Reload => Some(service(action, "Reload")?),
            Kind::Special => Some(SPECIAL_RELOAD),
            _ => None,
        };
        if let Some(unit) = unit.filter(|u| is_missing_crio(systemd, u).unwrap_or(false)) {
            tracing::info!(
                "{CRIO_SERVICE} is not on this node (another container runtime runs here): not running {:?} of {unit}",
                action.type_
            );
            continue;
        }
        match action.type_ {
            Kind::Reboot | Kind::Drain => continue,
            Kind::None => {
                tracing::info!(event = "SkipReboot", "Node has Desired Config {config}, skipping reboot");
                continue;
            }
            Kind::Restart => {
                let unit = service(action, "Restart")?;
                if let Err(e) = systemd.restart(unit) {
                    if unit != UPDATE_CA_TRUST_SERVICE {
                        return Err(e.context(format!("could not apply update: restarting {unit} service failed")));
                    }
                    tracing::warn!("Failed to restart {unit}, attempting to run update-ca-trust directly: {e:#}");
                    systemd.update_ca_trust().context("could not apply update: running update-ca-trust failed")?;
                }
            }
            Kind::Reload => {
                let unit = service(action, "Reload")?;
                systemd.reload(unit).with_context(|| format!("could not apply update: reloading {unit} failed"))?;
            }
            Kind::Special => systemd
                .reload(SPECIAL_RELOAD)
                .context("could not apply update: reloading crio for a registries.conf change failed")?,
            Kind::DaemonReload => {
                systemd.daemon_reload().context("could not apply update: systemd daemon-reload failed")?
            }
        }
        failpoints.hit(&format!("after action {}", mco_disruption::describe(action)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use mco_api::operator::ServiceReference;

    use super::*;
    use crate::fsutil::host_path;
    use crate::units::{ACTIONS_LOG, DirSystemd};

    fn restart(s: &str) -> Action {
        Action { restart: Some(ServiceReference { service_name: s.into() }), ..Action::new(Kind::Restart) }
    }

    fn reload(s: &str) -> Action {
        Action { reload: Some(ServiceReference { service_name: s.into() }), ..Action::new(Kind::Reload) }
    }

    /// A root with crio and kubelet units; returns it and what `run` logged or the error.
    fn run_in_root(actions: &[Action]) -> (String, Option<String>) {
        run_in_root_with(&["crio.service", "kubelet.service"], actions)
    }

    /// A root with `units`; returns what `run` logged or the error.
    fn run_in_root_with(units_there: &[&str], actions: &[Action]) -> (String, Option<String>) {
        let dir = tempfile::tempdir().unwrap();
        let units = host_path(dir.path(), "/usr/lib/systemd/system").unwrap();
        fs::create_dir_all(&units).unwrap();
        for u in units_there {
            fs::write(units.join(u), "[Service]\nExecStart=/bin/true\n").unwrap();
        }
        let sd = DirSystemd { root: dir.path().to_path_buf() };
        let result = run(&sd, actions, "rendered-x", &Failpoints::default());
        let log = fs::read_to_string(host_path(dir.path(), ACTIONS_LOG).unwrap()).unwrap_or_default();
        (log, result.err().map(|e| format!("{e:#}")))
    }

    #[test]
    fn actions_run_in_list_order() {
        let cases: Vec<(Vec<Action>, &str, Option<&str>)> = vec![
            (vec![Action::new(Kind::None)], "", None),
            (vec![Action::new(Kind::Drain), Action::new(Kind::Reboot)], "", None),
            (vec![reload("crio.service")], "reload crio.service\n", None),
            (vec![Action::new(Kind::Special)], "reload crio\n", None),
            (
                vec![Action::new(Kind::DaemonReload), restart("kubelet.service")],
                "daemon-reload\nrestart kubelet.service\n",
                None,
            ),
            // The CA trust unit is missing from the root: the fallback runs, then the next action.
            (
                vec![restart(UPDATE_CA_TRUST_SERVICE), restart("crio.service")],
                "update-ca-trust\nrestart crio.service\n",
                None,
            ),
            (
                vec![reload("crio.service"), restart("chronyd.service"), reload("kubelet.service")],
                "reload crio.service\n",
                Some(
                    "could not apply update: restarting chronyd.service service failed: Unit chronyd.service not found.",
                ),
            ),
            (vec![Action::new(Kind::Reload)], "", Some("Reload action without a service name")),
        ];
        for (actions, log, err) in cases {
            let what = actions.iter().map(mco_disruption::describe).collect::<Vec<_>>();
            assert_eq!(run_in_root(&actions), (log.to_string(), err.map(str::to_string)), "{what:?}");
        }
    }

    /// On a node without CRI-O, what would make CRI-O re-read its files is skipped; other units'
    /// actions still run and still fail when their unit is missing.
    #[test]
    fn crio_actions_are_skipped_on_a_node_without_crio() {
        let cases: Vec<(Vec<Action>, &str, Option<&str>)> = vec![
            (
                vec![Action::new(Kind::Special), reload("crio.service"), restart("crio.service"), reload("crio")],
                "",
                None,
            ),
            (vec![Action::new(Kind::Special), restart("kubelet.service")], "restart kubelet.service\n", None),
            (
                vec![reload("containerd.service")],
                "",
                Some("could not apply update: reloading containerd.service failed: Unit containerd.service not found."),
            ),
        ];
        for (actions, log, err) in cases {
            let what = actions.iter().map(mco_disruption::describe).collect::<Vec<_>>();
            let got = run_in_root_with(&["kubelet.service"], &actions);
            assert_eq!(got, (log.to_string(), err.map(str::to_string)), "{what:?}");
        }
    }
}
