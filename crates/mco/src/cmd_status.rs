//! `mco status`: pools and nodes the way `oc get mcp` and `oc get nodes` show them, plus each
//! node's config, daemon state and reason; `-w` follows a rollout with a progress line per pool.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, CURRENT_IMAGE_ANNOTATION, DESIRED_CONFIG_ANNOTATION, DESIRED_IMAGE_ANNOTATION,
    MACHINE_CONFIGURATION_NAME, REASON_ANNOTATION, STATE_ANNOTATION,
};
use mco_api::{MachineConfig, MachineConfigNode, MachineConfigPool, MachineConfiguration, MachineOSConfig};
use mco_render::select::Selection;
use mco_rollout::node::{annotation, is_ready, name, unavailable_for_update};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Kubeconfig file [default: the running lab's, else $KUBECONFIG or ~/.kube/config].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Keep watching; print again whenever something changes.
    #[arg(short, long)]
    watch: bool,
    /// With --watch: exit 0 once every pool is updated to its target, 1 as soon as one is degraded.
    #[arg(long, requires = "watch")]
    until_updated: bool,
    /// With --until-updated: give up (exit 1) after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value = "1800", requires = "until_updated")]
    timeout: u64,
}

/// Where every pool stands, for `--until-updated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Updated,
    Degraded,
    InProgress,
}

fn condition_is(pool: &MachineConfigPool, kind: &str) -> Option<bool> {
    let conditions = pool.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == kind).map(|c| c.status == "True")
}

fn target(pool: &MachineConfigPool) -> &str {
    pool.spec.configuration.as_ref().and_then(|c| c.name.as_deref()).unwrap_or_default()
}

fn pool_config(pool: &MachineConfigPool) -> &str {
    pool.status.as_ref().and_then(|s| s.configuration.as_ref()).and_then(|c| c.name.as_deref()).unwrap_or_default()
}

/// Whether the pool's target was rendered from exactly the MachineConfigs its selector picks
/// now (a MachineConfig just added or deleted is not in it until the controller renders again;
/// one whose contents changed is not detected).
fn rendered_from_current_configs(pool: &MachineConfigPool, configs: &[MachineConfig]) -> bool {
    let Ok(selection) = Selection::new(pool.spec.machine_config_selector.as_ref()) else { return false };
    let selected: BTreeSet<&str> = configs
        .iter()
        .filter(|mc| selection.matches(mc.metadata.labels.as_ref()))
        .filter_map(|mc| mc.metadata.name.as_deref())
        .collect();
    let sources = pool.spec.configuration.as_ref().and_then(|c| c.source.as_deref()).unwrap_or_default();
    let sources: BTreeSet<&str> = sources.iter().filter_map(|s| s.name.as_deref()).collect();
    selected == sources
}

/// Updated when every pool reports Updated for a target rendered from its current
/// MachineConfigs; Degraded as soon as one pool is.
pub fn verdict(pools: &[MachineConfigPool], configs: &[MachineConfig]) -> Verdict {
    if pools.iter().any(|p| condition_is(p, "Degraded") == Some(true)) {
        return Verdict::Degraded;
    }
    let updated = |p: &MachineConfigPool| {
        !target(p).is_empty()
            && pool_config(p) == target(p)
            && condition_is(p, "Updated") == Some(true)
            && rendered_from_current_configs(p, configs)
    };
    if pools.iter().all(updated) { Verdict::Updated } else { Verdict::InProgress }
}

/// The boot image controller's verdict on cluster upgrades (boot image skew), one line.
pub fn upgradeable_line(configuration: &MachineConfiguration) -> Option<String> {
    let conditions = configuration.status.as_ref()?.conditions.as_ref()?;
    let condition = conditions.iter().find(|c| c.type_ == "Upgradeable")?;
    Some(if condition.status == "True" {
        "Upgradeable: True".to_string()
    } else {
        format!("Upgradeable: {} ({}): {}", condition.status, condition.reason, condition.message)
    })
}

/// What mco's rollout policy holds the pool back with (its `RolloutHeld` condition), if anything.
fn held_message(pool: &MachineConfigPool) -> Option<&str> {
    let conditions = pool.status.as_ref()?.conditions.as_ref()?;
    let held = conditions.iter().find(|c| c.type_ == mco_rollout::policy::ROLLOUT_HELD && c.status == "True")?;
    held.message.as_deref()
}

/// Every degraded pool with its Degraded condition's message.
fn degraded(pools: &[MachineConfigPool]) -> Vec<(&str, &str)> {
    pools
        .iter()
        .filter_map(|pool| {
            let conditions = pool.status.as_ref()?.conditions.as_ref()?;
            let condition = conditions.iter().find(|c| c.type_ == "Degraded" && c.status == "True")?;
            Some((pool.metadata.name.as_deref().unwrap_or_default(), condition.message.as_deref().unwrap_or_default()))
        })
        .collect()
}

/// Left-aligned columns separated by three spaces, like kubectl's tables.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}   "));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn count(value: Option<i32>) -> String {
    value.unwrap_or(0).to_string()
}

fn condition_text(pool: &MachineConfigPool, kind: &str) -> String {
    match condition_is(pool, kind) {
        Some(true) => "True".into(),
        Some(false) => "False".into(),
        None => String::new(),
    }
}

/// The pools table (the columns of `oc get mcp`).
pub fn pools_table(pools: &[MachineConfigPool]) -> String {
    let rows: Vec<Vec<String>> = pools
        .iter()
        .map(|pool| {
            let status = pool.status.clone().unwrap_or_default();
            vec![
                pool.metadata.name.clone().unwrap_or_default(),
                pool_config(pool).to_string(),
                condition_text(pool, "Updated"),
                condition_text(pool, "Updating"),
                condition_text(pool, "Degraded"),
                count(status.machine_count),
                count(status.ready_machine_count),
                count(status.updated_machine_count),
                count(status.degraded_machine_count),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "CONFIG",
            "UPDATED",
            "UPDATING",
            "DEGRADED",
            "MACHINECOUNT",
            "READYMACHINECOUNT",
            "UPDATEDMACHINECOUNT",
            "DEGRADEDMACHINECOUNT",
        ],
        &rows,
    )
}

fn primary_pool(node: &Node, pools: &[MachineConfigPool]) -> String {
    match mco_rollout::pools_for_node(node, pools) {
        Ok(found) => found.first().and_then(|p| p.metadata.name.clone()).unwrap_or_default(),
        Err(e) => format!("error: {e}"),
    }
}

fn node_status(node: &Node) -> String {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let mut status = if ready { "Ready" } else { "NotReady" }.to_string();
    if node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

/// Where a node is in its update, from its MachineConfigNode: `Type=Status` of the condition
/// [`mco_mcn::progress::current_phase`] picks.
fn node_phase(node: &Node, machine_config_nodes: &[MachineConfigNode]) -> String {
    let status = machine_config_nodes.iter().find(|m| m.metadata.name.as_deref() == Some(name(node)));
    let phase = status.and_then(|m| m.status.as_ref()).and_then(mco_mcn::progress::current_phase);
    phase.map(|c| format!("{}={}", c.type_, c.status)).unwrap_or_default()
}

/// The nodes table: kubelet status, pool, the daemon's annotations and the update phase.
pub fn nodes_table(nodes: &[Node], pools: &[MachineConfigPool], machine_config_nodes: &[MachineConfigNode]) -> String {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|node| {
            let get = |key: &str| annotation(node, key).unwrap_or_default().to_string();
            vec![
                name(node).to_string(),
                node_status(node),
                primary_pool(node, pools),
                get(CURRENT_CONFIG_ANNOTATION),
                get(DESIRED_CONFIG_ANNOTATION),
                get(STATE_ANNOTATION),
                node_phase(node, machine_config_nodes),
                get(REASON_ANNOTATION),
            ]
        })
        .collect();
    table(&["NAME", "STATUS", "POOL", "CURRENT", "DESIRED", "STATE", "PHASE", "REASON"], &rows)
}

/// One line per pool that is not at its target: how far the rollout is and who is moving.
/// `layered`: the pools with a MachineOSConfig (their nodes run built images).
pub fn progress_lines(nodes: &[Node], pools: &[MachineConfigPool], layered: &BTreeSet<&str>) -> Vec<String> {
    let mut lines = Vec::new();
    for pool in pools {
        let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
        let target = target(pool);
        // A tag resolved again on request: a plain pool's nodes move to its digest under the same
        // config (a layered pool's build starts from it).
        let image = pool.resolved_os_image(target).filter(|_| !layered.contains(pool_name));
        let members: Vec<&Node> = nodes.iter().filter(|n| primary_pool(n, pools) == pool_name).collect();
        let done = members
            .iter()
            .filter(|n| {
                annotation(n, CURRENT_CONFIG_ANNOTATION) == Some(target)
                    && annotation(n, STATE_ANNOTATION) == Some("Done")
                    && image.is_none_or(|image| annotation(n, CURRENT_IMAGE_ANNOTATION) == Some(image))
            })
            .count();
        if target.is_empty() || (done == members.len() && pool_config(pool) == target) {
            continue;
        }
        let moving: Vec<String> = members
            .iter()
            .filter(|n| {
                unavailable_for_update(n)
                    || annotation(n, DESIRED_CONFIG_ANNOTATION) != annotation(n, CURRENT_CONFIG_ANNOTATION)
                    || annotation(n, DESIRED_IMAGE_ANNOTATION) != annotation(n, CURRENT_IMAGE_ANNOTATION)
            })
            .map(|n| {
                let state = annotation(n, STATE_ANNOTATION).unwrap_or("-");
                let ready = if is_ready(n) { "" } else { ", unavailable" };
                format!("{} ({state}{ready})", name(n))
            })
            .collect();
        let paused = if pool.spec.paused.unwrap_or(false) { " [paused]" } else { "" };
        let moving = if moving.is_empty() { String::new() } else { format!("; updating: {}", moving.join(", ")) };
        let held = held_message(pool).map(|m| format!("; {m}")).unwrap_or_default();
        let image = image.map(|i| format!(" (OS image {i})")).unwrap_or_default();
        lines.push(format!("{pool_name}{paused}: {done}/{} nodes on {target}{image}{moving}{held}", members.len()));
    }
    lines
}

fn default_kubeconfig() -> Option<PathBuf> {
    let lab = mco_lab::layout::Layout::new(mco_lab::layout::default_dir()).kubeconfig();
    (std::env::var_os("KUBECONFIG").is_none() && lab.is_file()).then_some(lab)
}

pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let kubeconfig = args.kubeconfig.clone().or_else(default_kubeconfig);
        let client = mco_controller::client(kubeconfig.as_deref()).await?;
        let pools_api: Api<MachineConfigPool> = Api::all(client.clone());
        let nodes_api: Api<Node> = Api::all(client.clone());
        let configs_api: Api<MachineConfig> = Api::all(client.clone());
        let machine_config_nodes_api: Api<MachineConfigNode> = Api::all(client.clone());
        let os_configs_api: Api<MachineOSConfig> = Api::all(client.clone());
        let configuration_api: Api<MachineConfiguration> = Api::all(client);
        let deadline = Instant::now() + Duration::from_secs(args.timeout);
        let mut last = String::new();
        loop {
            let pools = pools_api.list(&ListParams::default()).await.context("listing pools")?.items;
            let nodes = nodes_api.list(&ListParams::default()).await.context("listing nodes")?.items;
            // Clusters without the MachineConfigNode type just show no phases.
            let machine_config_nodes =
                machine_config_nodes_api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
            let mut text = format!("{}\n{}", pools_table(&pools), nodes_table(&nodes, &pools, &machine_config_nodes));
            // Clusters without the MachineOSConfig type have no layered pools.
            let os_configs = os_configs_api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
            let layered: BTreeSet<&str> = os_configs.iter().map(|c| c.spec.machine_config_pool.name.as_str()).collect();
            for line in progress_lines(&nodes, &pools, &layered) {
                text.push_str(&format!("\n{line}"));
            }
            for (pool, message) in degraded(&pools) {
                text.push_str(&format!("\npool {pool} is degraded: {message}"));
            }
            // Clusters without the MachineConfiguration type (or object) just have no such line.
            let configuration = configuration_api.get_opt(MACHINE_CONFIGURATION_NAME).await.ok().flatten();
            if let Some(line) = configuration.as_ref().and_then(upgradeable_line) {
                text.push_str(&format!("\n{line}"));
            }
            if text != last {
                if args.watch && !last.is_empty() {
                    println!("---");
                }
                println!("{}", text.trim_end());
                last = text;
            }
            if !args.watch {
                return Ok(ExitCode::SUCCESS);
            }
            if args.until_updated {
                let configs = configs_api.list(&ListParams::default()).await.context("listing MachineConfigs")?.items;
                match verdict(&pools, &configs) {
                    Verdict::Updated => return Ok(ExitCode::SUCCESS),
                    Verdict::Degraded => {
                        for (pool, message) in degraded(&pools) {
                            eprintln!("pool {pool} is degraded: {message}");
                        }
                        return Ok(ExitCode::from(1));
                    }
                    Verdict::InProgress if Instant::now() > deadline => {
                        eprintln!("not updated after {} s", args.timeout);
                        return Ok(ExitCode::from(1));
                    }
                    Verdict::InProgress => {}
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pool(
        name: &str,
        target: &str,
        current: &str,
        conditions: &[(&str, &str)],
        counts: [i32; 4],
    ) -> MachineConfigPool {
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
                "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
                "configuration": {"name": target, "source": [{"name": format!("00-{name}")}]},
            },
            "status": {
                "configuration": {"name": current},
                "machineCount": counts[0], "readyMachineCount": counts[1],
                "updatedMachineCount": counts[2], "degradedMachineCount": counts[3],
                "conditions": conditions.iter().map(|(t, s)| json!({"type": t, "status": s})).collect::<Vec<_>>(),
            },
        }))
        .unwrap()
    }

    fn node(name: &str, role: &str, current: &str, desired: &str, state: &str, ready: bool, cordoned: bool) -> Node {
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "labels": {format!("node-role.kubernetes.io/{role}"): ""},
                "annotations": {
                    CURRENT_CONFIG_ANNOTATION: current, DESIRED_CONFIG_ANNOTATION: desired, STATE_ANNOTATION: state,
                },
            },
            "spec": {"unschedulable": cordoned},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn machine_config_node(name: &str, conditions: &[(&str, &str)]) -> MachineConfigNode {
        let conditions: Vec<_> = conditions
            .iter()
            .map(|(kind, status)| {
                json!({"type": kind, "status": status, "reason": kind, "message": "", "lastTransitionTime": "2026-11-26T03:00:00Z"})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigNode",
            "metadata": {"name": name},
            "spec": {"node": {"name": name}, "pool": {"name": "worker"}, "configVersion": {"desired": "rendered-worker-b"}},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn tables_line_up_like_kubectl() {
        let pools = [pool(
            "worker",
            "rendered-worker-b",
            "rendered-worker-a",
            &[("Updated", "False"), ("Updating", "True"), ("Degraded", "False")],
            [2, 1, 1, 0],
        )];
        assert_eq!(
            pools_table(&pools),
            "NAME     CONFIG              UPDATED   UPDATING   DEGRADED   MACHINECOUNT   READYMACHINECOUNT   UPDATEDMACHINECOUNT   DEGRADEDMACHINECOUNT\n\
             worker   rendered-worker-a   False     True       False      2              1                   1                     0\n"
        );
        let nodes = [
            node("worker-0", "worker", "rendered-worker-b", "rendered-worker-b", "Done", true, false),
            node("worker-1", "worker", "rendered-worker-a", "rendered-worker-b", "Working", true, true),
            node("other", "infra", "", "", "", false, false),
        ];
        let machine_config_nodes = [
            machine_config_node("worker-0", &[("Updated", "True"), ("Drained", "False")]),
            machine_config_node("worker-1", &[("Updated", "False"), ("Cordoned", "True"), ("Drained", "Unknown")]),
        ];
        assert_eq!(
            nodes_table(&nodes, &pools, &machine_config_nodes),
            "NAME       STATUS                     POOL     CURRENT             DESIRED             STATE     PHASE             REASON\n\
             worker-0   Ready                      worker   rendered-worker-b   rendered-worker-b   Done      Updated=True\n\
             worker-1   Ready,SchedulingDisabled   worker   rendered-worker-a   rendered-worker-b   Working   Drained=Unknown\n\
             other      NotReady\n"
        );
        assert_eq!(
            progress_lines(&nodes, &pools, &BTreeSet::new()),
            ["worker: 1/2 nodes on rendered-worker-b; updating: worker-1 (Working, unavailable)"]
        );
    }

    #[test]
    fn a_held_rollout_says_why() {
        let mut held = pool("worker", "rendered-worker-b", "rendered-worker-a", &[("Updating", "True")], [1, 1, 0, 0]);
        let conditions = held.status.as_mut().unwrap().conditions.as_mut().unwrap();
        let message = "waiting for maintenance window (opens at 2026-11-28T02:00:00+01:00[Europe/Berlin])";
        conditions.push(
            serde_json::from_value(
                json!({"type": "RolloutHeld", "status": "True", "reason": "MaintenanceWindow", "message": message}),
            )
            .unwrap(),
        );
        let nodes = [node("worker-0", "worker", "rendered-worker-a", "rendered-worker-a", "Done", true, false)];
        assert_eq!(
            progress_lines(&nodes, &[held], &BTreeSet::new()),
            [format!("worker: 0/1 nodes on rendered-worker-b; {message}")]
        );
    }

    #[test]
    fn a_tag_resolved_again_counts_nodes_on_its_digest() {
        const IMAGE: &str = "reg/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";
        let mut pool = pool("worker", "rendered-worker-a", "rendered-worker-a", &[("Updating", "True")], [2, 1, 1, 0]);
        let record = mco_api::machineconfiguration::resolved_os_image_record("rendered-worker-a", IMAGE);
        pool.metadata.annotations =
            Some([(mco_api::constants::RESOLVED_OS_IMAGE_ANNOTATION.to_string(), record)].into());
        let mut nodes = [
            node("worker-0", "worker", "rendered-worker-a", "rendered-worker-a", "Done", true, false),
            node("worker-1", "worker", "rendered-worker-a", "rendered-worker-a", "Working", true, true),
        ];
        nodes[0].metadata.annotations.as_mut().unwrap().extend(
            [CURRENT_IMAGE_ANNOTATION, DESIRED_IMAGE_ANNOTATION].map(|key| (key.to_string(), IMAGE.to_string())),
        );
        nodes[1].metadata.annotations.as_mut().unwrap().insert(DESIRED_IMAGE_ANNOTATION.into(), IMAGE.into());
        let pools = [pool];
        assert_eq!(
            progress_lines(&nodes, &pools, &BTreeSet::new()),
            [format!(
                "worker: 1/2 nodes on rendered-worker-a (OS image {IMAGE}); updating: worker-1 (Working, unavailable)"
            )]
        );
        // A layered pool's nodes run its build (made from the digest), not the digest.
        assert_eq!(
            progress_lines(&nodes, &pools, &BTreeSet::from(["worker"])),
            ["worker: 1/2 nodes on rendered-worker-a; updating: worker-1 (Working, unavailable)"]
        );
    }

    fn mc(name: &str, role: &str) -> MachineConfig {
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": role}},
            "spec": {},
        }))
        .unwrap()
    }

    #[test]
    fn upgradeable_condition_in_one_line() {
        let configuration = |conditions: serde_json::Value| -> MachineConfiguration {
            serde_json::from_value(json!({
                "apiVersion": "operator.openshift.io/v1",
                "kind": "MachineConfiguration",
                "metadata": {"name": "cluster"},
                "spec": {},
                "status": {"conditions": conditions},
            }))
            .unwrap()
        };
        let condition = |status: &str, reason: &str, message: &str| {
            json!({"type": "Upgradeable", "status": status, "reason": reason, "message": message,
                   "lastTransitionTime": "2026-11-21T00:00:00Z"})
        };
        assert_eq!(upgradeable_line(&configuration(json!([]))), None);
        assert_eq!(
            upgradeable_line(&configuration(json!([condition("True", "AsExpected", "")]))).as_deref(),
            Some("Upgradeable: True")
        );
        assert_eq!(
            upgradeable_line(&configuration(json!([condition("False", "ClusterBootImageSkewError", "too old")])))
                .as_deref(),
            Some("Upgradeable: False (ClusterBootImageSkewError): too old")
        );
    }

    #[test]
    fn verdict_needs_every_pool_updated_to_its_target() {
        let configs = [mc("00-worker", "worker"), mc("00-master", "master"), mc("00-infra", "infra")];
        let updated = pool("worker", "r-b", "r-b", &[("Updated", "True"), ("Degraded", "False")], [1, 1, 1, 0]);
        let stale = pool("worker", "r-b", "r-a", &[("Updated", "True")], [1, 1, 1, 0]);
        let updating = pool("master", "r-m", "r-m", &[("Updated", "False"), ("Updating", "True")], [1, 0, 0, 0]);
        let degraded = pool("master", "r-m", "r-m", &[("Updated", "False"), ("Degraded", "True")], [1, 0, 0, 1]);
        let unrendered = pool("infra", "", "", &[], [0, 0, 0, 0]);
        for (pools, expected) in [
            (vec![updated.clone()], Verdict::Updated),
            (vec![stale], Verdict::InProgress),
            (vec![updated.clone(), updating], Verdict::InProgress),
            (vec![updated.clone(), degraded], Verdict::Degraded),
            (vec![updated, unrendered], Verdict::InProgress),
        ] {
            let names: Vec<_> = pools.iter().map(|p| (target(p).to_string(), pool_config(p).to_string())).collect();
            assert_eq!(verdict(&pools, &configs), expected, "{names:?}");
        }
        // A MachineConfig the target was not rendered from yet: still in progress.
        let added = [mc("00-worker", "worker"), mc("99-worker-new", "worker")];
        let updated = pool("worker", "r-b", "r-b", &[("Updated", "True"), ("Degraded", "False")], [1, 1, 1, 0]);
        assert_eq!(verdict(std::slice::from_ref(&updated), &added), Verdict::InProgress);
        assert_eq!(verdict(&[updated], &added[..1]), Verdict::Updated);
    }
}
