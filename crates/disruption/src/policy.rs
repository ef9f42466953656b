//! Node disruption actions (`docs/behaviour.md#node-disruption-actions`): which actions an update
//! needs under the cluster's policies (`calculatePostConfigChangeNodeDisruptionAction`), the fixed
//! rules used at first boot when the API is out of reach (`calculatePostConfigChangeAction`), and
//! whether the node must be drained.

use mco_api::operator::{
    MachineConfiguration, NodeDisruptionPolicyClusterStatus, NodeDisruptionPolicyConfig, NodeDisruptionPolicyFile,
    NodeDisruptionPolicySshKey, NodeDisruptionPolicyStatusAction as Action,
    NodeDisruptionPolicyStatusActionType as Kind, NodeDisruptionPolicyUnit, ServiceReference,
};

use mco_ignition::spec2::clean_path;

use crate::diff::ConfigDiff;
use crate::registries::{self, RegistriesError};

/// Where CRI-O's registry configuration lives; its changes get the `Special` action.
pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

/// What the node does after writing the new config, and whether it drains first.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// In execution order; `[Reboot]` or `[None]` when either applies.
    pub actions: Vec<Action>,
    pub drain: bool,
    /// Why the node drains or not, for logs and `mco diff`.
    pub drain_reason: String,
}

impl Plan {
    pub fn reboots(&self) -> bool {
        has(&self.actions, &[Kind::Reboot])
    }
}

/// One action as people read it: `Reboot`, `Reload crio.service`, `Restart kubelet.service`, ...
pub fn describe(action: &Action) -> String {
    match (&action.reload, &action.restart) {
        (Some(s), _) => format!("Reload {}", s.service_name),
        (_, Some(s)) => format!("Restart {}", s.service_name),
        _ => format!("{:?}", action.type_),
    }
}

fn has(actions: &[Action], kinds: &[Kind]) -> bool {
    actions.iter().any(|a| kinds.contains(&a.type_))
}

fn action(type_: Kind) -> Action {
    Action::new(type_)
}

fn restart(service: &str) -> Action {
    Action { restart: Some(ServiceReference { service_name: service.into() }), ..action(Kind::Restart) }
}

fn reload(service: &str) -> Action {
    Action { reload: Some(ServiceReference { service_name: service.into() }), ..action(Kind::Reload) }
}

/// The operator's built-in policies (`defaultClusterPolicies`), in upstream's order.
pub fn default_cluster_policies() -> NodeDisruptionPolicyClusterStatus {
    let file = |path: &str, actions: Vec<Action>| NodeDisruptionPolicyFile { path: path.into(), actions };
    let crio_reload = || vec![reload("crio.service")];
    NodeDisruptionPolicyClusterStatus {
        files: Some(vec![
            file("/var/lib/kubelet/config.json", vec![action(Kind::None)]),
            file("/etc/machine-config-daemon/no-reboot/containers-gpg.pub", crio_reload()),
            file("/etc/containers/policy.json", crio_reload()),
            file(REGISTRIES_CONF, vec![action(Kind::Special)]),
            file("/etc/containers/registries.d", crio_reload()),
            file("/etc/crio/policies", crio_reload()),
            file("/etc/nmstate/openshift", vec![action(Kind::None)]),
            file(
                "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                vec![restart("coreos-update-ca-trust.service"), restart("crio.service")],
            ),
            file("/etc/kubernetes/credential-providers", vec![restart("kubelet.service")]),
            file(
                "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
                vec![action(Kind::DaemonReload), restart("kubelet.service")],
            ),
            file("/etc/iri-registry", vec![restart("iri-registry.service")]),
            file("/usr/local/bin/load-registry-image.sh", vec![restart("iri-registry.service")]),
            file("/etc/pki/ca-trust/source/anchors/iri-root-ca.crt", vec![restart("coreos-update-ca-trust.service")]),
        ]),
        units: Some(vec![NodeDisruptionPolicyUnit {
            name: "iri-registry.service".into(),
            actions: vec![action(Kind::DaemonReload), restart("iri-registry.service")],
        }]),
        sshkey: Some(NodeDisruptionPolicySshKey { actions: vec![action(Kind::None)] }),
    }
}

/// The effective policies the operator publishes in `status.nodeDisruptionPolicyStatus`: a user
/// entry replaces the default with the same path or unit name in place, other user entries
/// follow the defaults; the user's SSH key actions replace the default when given.
pub fn merge_cluster_policies(user: Option<&NodeDisruptionPolicyConfig>) -> NodeDisruptionPolicyClusterStatus {
    let mut merged = default_cluster_policies();
    let Some(user) = user else { return merged };
    let convert = |actions: &[mco_api::operator::NodeDisruptionPolicySpecAction]| -> Vec<Action> {
        actions.iter().cloned().map(Into::into).collect()
    };
    let files = merged.files.get_or_insert_default();
    for entry in user.files.iter().flatten() {
        let converted = NodeDisruptionPolicyFile { path: entry.path.clone(), actions: convert(&entry.actions) };
        match files.iter_mut().find(|f| f.path == entry.path) {
            Some(existing) => *existing = converted,
            None => files.push(converted),
        }
    }
    let units = merged.units.get_or_insert_default();
    for entry in user.units.iter().flatten() {
        let converted = NodeDisruptionPolicyUnit { name: entry.name.clone(), actions: convert(&entry.actions) };
        match units.iter_mut().find(|u| u.name == entry.name) {
            Some(existing) => *existing = converted,
            None => units.push(converted),
        }
    }
    if let Some(ssh) = user.sshkey.as_ref().filter(|s| !s.actions.is_empty()) {
        merged.sshkey = Some(NodeDisruptionPolicySshKey { actions: convert(&ssh.actions) });
    }
    merged
}

/// The policies a MachineConfiguration puts in force: what the operator published in
/// `status.nodeDisruptionPolicyStatus.clusterPolicies`, else its spec merged with the defaults
/// (the status lags the spec until the operator syncs, and the daemon reads the status).
pub fn policies_of(configuration: &MachineConfiguration) -> NodeDisruptionPolicyClusterStatus {
    configuration
        .status
        .as_ref()
        .and_then(|s| s.node_disruption_policy_status.as_ref())
        .and_then(|s| s.cluster_policies.clone())
        .unwrap_or_else(|| merge_cluster_policies(configuration.spec.node_disruption_policy.as_ref()))
}

/// The policy for a changed path: the longest policy path equal to it or naming a parent
/// directory of it (`FindClosestFilePolicyPathMatch`).
pub fn closest_file_policy<'a>(
    path: &str,
    policies: &'a [NodeDisruptionPolicyFile<Kind>],
) -> Option<&'a NodeDisruptionPolicyFile<Kind>> {
    let path = clean_path(path);
    policies
        .iter()
        .filter(|p| {
            let policy = clean_path(&p.path);
            path == policy || path.strip_prefix(policy.as_str()).is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|p| clean_path(&p.path).len())
}

/// Actions under the cluster's policies, for an update while the node is in the cluster.
pub fn cluster_actions(diff: &ConfigDiff, policies: &NodeDisruptionPolicyClusterStatus) -> Vec<Action> {
    let reboot = || vec![action(Kind::Reboot)];
    if diff.force || diff.needs_reboot_by_itself() {
        return reboot();
    }
    if diff.files.is_empty() && diff.units.is_empty() && !diff.passwd {
        return vec![action(Kind::None)];
    }
    let mut actions = Vec::new();
    let files = policies.files.as_deref().unwrap_or_default();
    for path in diff.files.all() {
        match closest_file_policy(path, files) {
            Some(policy) => actions.extend(policy.actions.iter().cloned()),
            None => return reboot(),
        }
    }
    let units = policies.units.as_deref().unwrap_or_default();
    for name in diff.units.all() {
        match units.iter().find(|u| u.name == name) {
            Some(policy) => actions.extend(policy.actions.iter().cloned()),
            None => return reboot(),
        }
    }
    if diff.passwd {
        actions.extend(policies.sshkey.iter().flat_map(|s| s.actions.iter().cloned()));
    }
    if has(&actions, &[Kind::Reboot]) {
        return reboot();
    }
    if has(&actions, &[Kind::None]) {
        actions.retain(|a| a.type_ != Kind::None);
        if actions.is_empty() {
            return vec![action(Kind::None)];
        }
    }
    actions
}

/// The plan for an update in the cluster: [`cluster_actions`], then drain when an action reboots
/// or drains, or a `Special` registries.conf change is not provably safe.
/// `skip_registry_drain` is the administrator's override (the `image-registry-override-drain`
/// ConfigMap upstream).
pub fn cluster_plan(
    diff: &ConfigDiff,
    policies: &NodeDisruptionPolicyClusterStatus,
    skip_registry_drain: bool,
) -> Result<Plan, RegistriesError> {
    let actions = cluster_actions(diff, policies);
    let (drain, drain_reason) = if has(&actions, &[Kind::Reboot, Kind::Drain]) {
        (true, "the actions reboot or drain the node".to_string())
    } else if has(&actions, &[Kind::Special]) {
        registry_drain(diff, skip_registry_drain)?
    } else {
        (false, "no action disrupts workloads".to_string())
    };
    Ok(Plan { actions, drain, drain_reason })
}

fn registry_drain(diff: &ConfigDiff, skip_registry_drain: bool) -> Result<(bool, String), RegistriesError> {
    if skip_registry_drain {
        return Ok((false, format!("the drain override skips the drain for {REGISTRIES_CONF} (possibly unsafe)")));
    }
    Ok(match registries::unsafe_change(&diff.old_ignition, &diff.new_ignition)? {
        Some(why) => (true, format!("{REGISTRIES_CONF}: {why}")),
        None => (false, format!("{REGISTRIES_CONF}: the change is safe without a drain")),
    })
}

/// The fixed rules of the first boot, when the cluster's policies cannot be read
/// (`calculatePostConfigChangeAction` and `isDrainRequired`). Unit changes reboot here.
pub fn firstboot_plan(diff: &ConfigDiff, skip_registry_drain: bool) -> Result<Plan, RegistriesError> {
    const NONE_FILES: &[&str] = &["/etc/kubernetes/kubelet-ca.crt", "/var/lib/kubelet/config.json"];
    const NONE_DIRS: &[&str] = &["/etc/nmstate/openshift"];
    const RELOAD_CRIO_FILES: &[&str] =
        &[REGISTRIES_CONF, "/etc/machine-config-daemon/no-reboot/containers-gpg.pub", "/etc/containers/policy.json"];
    const RELOAD_CRIO_DIRS: &[&str] = &["/etc/containers/registries.d"];
    const RESTART_CRIO_FILES: &[&str] = &["/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"];

    let reboot =
        Plan { actions: vec![action(Kind::Reboot)], drain: true, drain_reason: "the node reboots".to_string() };
    if diff.force || diff.needs_reboot_by_itself() || !diff.units.is_empty() {
        return Ok(reboot);
    }
    let mut actions = vec![action(Kind::None)];
    for path in diff.files.all() {
        let dir = path.rsplit_once('/').map(|(dir, _)| if dir.is_empty() { "/" } else { dir }).unwrap_or(path);
        if NONE_FILES.contains(&path) {
            continue;
        } else if RELOAD_CRIO_FILES.contains(&path) || RELOAD_CRIO_DIRS.contains(&dir) {
            if actions.first().is_none_or(|a| a.type_ != Kind::Restart) {
                actions = vec![reload("crio.service")];
            }
        } else if RESTART_CRIO_FILES.contains(&path) {
            actions = vec![restart("crio.service")];
        } else if NONE_DIRS.contains(&dir) {
            continue;
        } else {
            return Ok(reboot);
        }
    }
    let (drain, drain_reason) = if has(&actions, &[Kind::None]) {
        (false, "no action disrupts workloads".to_string())
    } else if diff.files.all().contains(&REGISTRIES_CONF) {
        registry_drain(diff, skip_registry_drain)?
    } else {
        (false, "reloading or restarting CRI-O does not need a drain".to_string())
    };
    Ok(Plan { actions, drain, drain_reason })
}

#[cfg(test)]
mod tests {
    use mco_api::machineconfiguration::MachineConfig;
    use serde_json::{Value, json};

    use super::*;

    fn mc(files: &[(&str, &str)], units: Value, ssh: &str, kargs: Value) -> MachineConfig {
        let files: Vec<Value> =
            files.iter().map(|(p, d)| json!({"path": p, "contents": {"source": format!("data:,{d}")}})).collect();
        serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {"kernelArguments": kargs, "config": {
            "ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [ssh]}]},
            "storage": {"files": files}, "systemd": {"units": units}}}}))
        .unwrap()
    }

    fn diff_files(old: &[(&str, &str)], new: &[(&str, &str)]) -> ConfigDiff {
        ConfigDiff::between(Some(&mc(old, json!([]), "k", json!([]))), &mc(new, json!([]), "k", json!([])), false)
            .unwrap()
    }

    type Files<'a> = &'a [(&'a str, &'a str)];

    fn spell(actions: &[Action]) -> Vec<String> {
        actions.iter().map(describe).collect()
    }

    #[test]
    fn default_policies_by_changed_file() {
        let cases: &[(&str, &[&str])] = &[
            ("/var/lib/kubelet/config.json", &["None"]),
            ("/etc/containers/policy.json", &["Reload crio.service"]),
            ("/etc/containers/registries.conf", &["Special"]),
            ("/etc/containers/registries.d/a.yaml", &["Reload crio.service"]),
            ("/etc/containers/registries.d/sub/b.yaml", &["Reload crio.service"]),
            ("/etc/containers/registries.dx", &["Reboot"]),
            ("/etc/crio/policies/p.json", &["Reload crio.service"]),
            ("/etc/nmstate/openshift/eth0.yml", &["None"]),
            (
                "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                &["Restart coreos-update-ca-trust.service", "Restart crio.service"],
            ),
            ("/etc/kubernetes/credential-providers/ecr.yaml", &["Restart kubelet.service"]),
            (
                "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
                &["DaemonReload", "Restart kubelet.service"],
            ),
            ("/etc/motd", &["Reboot"]),
            ("/etc/containers//registries.d/../registries.d/c.yaml", &["Reload crio.service"]),
        ];
        let policies = default_cluster_policies();
        for (path, want) in cases {
            let got = cluster_actions(&diff_files(&[], &[(path, "x")]), &policies);
            assert_eq!(spell(&got), *want, "{path}");
        }
    }

    #[test]
    fn combining_actions() {
        let policies = default_cluster_policies();
        let cases: &[(Files, &[&str])] = &[
            // None next to other actions is dropped; only Nones collapse to one.
            (&[("/var/lib/kubelet/config.json", "1"), ("/etc/containers/policy.json", "1")], &["Reload crio.service"]),
            (&[("/var/lib/kubelet/config.json", "1"), ("/etc/nmstate/openshift/a", "1")], &["None"]),
            // Actions accumulate in path order, duplicates kept (upstream runs them in order).
            (
                &[("/etc/containers/policy.json", "1"), ("/etc/crio/policies/a", "1")],
                &["Reload crio.service", "Reload crio.service"],
            ),
            // One path without a policy reboots, whatever the others say.
            (&[("/etc/containers/policy.json", "1"), ("/etc/hosts", "1")], &["Reboot"]),
        ];
        for (files, want) in cases {
            assert_eq!(spell(&cluster_actions(&diff_files(&[], files), &policies)), *want, "{files:?}");
        }
        // Removing a file counts like changing it.
        let removed = diff_files(&[("/etc/containers/policy.json", "1")], &[]);
        assert_eq!(spell(&cluster_actions(&removed, &policies)), ["Reload crio.service"]);
    }

    #[test]
    fn units_ssh_and_os_changes() {
        let policies = default_cluster_policies();
        let unit = |name: &str| json!([{"name": name, "contents": "[Unit]\n"}]);
        let cases: &[(MachineConfig, &[&str])] = &[
            (mc(&[], json!([]), "k", json!([])), &["None"]),
            (mc(&[], unit("iri-registry.service"), "k", json!([])), &["DaemonReload", "Restart iri-registry.service"]),
            (mc(&[], unit("other.service"), "k", json!([])), &["Reboot"]),
            (mc(&[], json!([]), "other-key", json!([])), &["None"]),
            (mc(&[], json!([]), "k", json!(["nosmt"])), &["Reboot"]),
        ];
        let old = mc(&[], json!([]), "k", json!([]));
        for (new, want) in cases {
            let d = ConfigDiff::between(Some(&old), new, false).unwrap();
            assert_eq!(spell(&cluster_actions(&d, &policies)), *want, "{new:?}");
        }
        let forced = ConfigDiff::between(Some(&old), &old, true).unwrap();
        assert_eq!(spell(&cluster_actions(&forced, &policies)), ["Reboot"]);
    }

    #[test]
    fn longest_policy_path_wins() {
        let user: NodeDisruptionPolicyConfig = serde_json::from_value(json!({
            "files": [
                {"path": "/etc/app", "actions": [{"type": "Restart", "restart": {"serviceName": "app.service"}}]},
                {"path": "/etc/app/conf.d", "actions": [{"type": "None"}]},
            ]
        }))
        .unwrap();
        let policies = merge_cluster_policies(Some(&user));
        let actions = |path: &str| spell(&cluster_actions(&diff_files(&[], &[(path, "x")]), &policies));
        assert_eq!(actions("/etc/app/main.conf"), ["Restart app.service"]);
        assert_eq!(actions("/etc/app/conf.d/x.conf"), ["None"]);
        assert_eq!(actions("/etc/app"), ["Restart app.service"]);
    }

    #[test]
    fn merging_user_policies() {
        let user: NodeDisruptionPolicyConfig = serde_json::from_value(json!({
            "files": [
                {"path": "/etc/containers/policy.json", "actions": [{"type": "Reboot"}]},
                {"path": "/etc/chrony.conf", "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]},
            ],
            "units": [{"name": "iri-registry.service", "actions": [{"type": "None"}]}],
            "sshkey": {"actions": [{"type": "Drain"}]},
        }))
        .unwrap();
        let merged = merge_cluster_policies(Some(&user));
        let files = merged.files.as_ref().unwrap();
        let defaults = default_cluster_policies().files.unwrap();
        assert_eq!(files.len(), defaults.len() + 1);
        assert_eq!(files[2].path, "/etc/containers/policy.json", "replaced in place");
        assert_eq!(spell(&files[2].actions), ["Reboot"]);
        assert_eq!(files.last().unwrap().path, "/etc/chrony.conf", "new entries follow the defaults");
        assert_eq!(spell(&merged.units.as_ref().unwrap()[0].actions), ["None"]);
        assert_eq!(merged.sshkey.as_ref().unwrap().actions[0].type_, Kind::Drain);
        // Empty SSH key actions keep the default.
        let empty: NodeDisruptionPolicyConfig = serde_json::from_value(json!({"sshkey": {"actions": []}})).unwrap();
        assert_eq!(merge_cluster_policies(Some(&empty)), default_cluster_policies());
        assert_eq!(merge_cluster_policies(None), default_cluster_policies());
    }

    #[test]
    fn policies_of_prefers_the_published_status() {
        let restart_chrony = json!({"files": [{"path": "/etc/chrony.conf",
            "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]}]});
        let spec_only: MachineConfiguration = serde_json::from_value(
            json!({"metadata": {"name": "cluster"}, "spec": {"nodeDisruptionPolicy": restart_chrony}}),
        )
        .unwrap();
        let from_spec = policies_of(&spec_only);
        assert_eq!(from_spec.files.as_ref().unwrap().last().unwrap().path, "/etc/chrony.conf");
        assert_eq!(from_spec.files.as_ref().unwrap().len(), default_cluster_policies().files.unwrap().len() + 1);
        let mut published = spec_only.clone();
        published.status = Some(
            serde_json::from_value(
                json!({"nodeDisruptionPolicyStatus": {"clusterPolicies": {"files": [{"path": "/etc/x", "actions": [{"type": "None"}]}]}}}),
            )
            .unwrap(),
        );
        let from_status = policies_of(&published);
        assert_eq!(from_status.files.as_ref().unwrap().len(), 1, "the status is taken as is: {from_status:?}");
        let empty: MachineConfiguration =
            serde_json::from_value(json!({"metadata": {"name": "cluster"}, "spec": {}})).unwrap();
        assert_eq!(policies_of(&empty), default_cluster_policies());
    }

    #[test]
    fn drain_decisions() {
        let registries = |mirror: &str| {
            format!(
                "[[registry]]%0Alocation = \"quay.io/x\"%0A[[registry.mirror]]%0Alocation = \"m.local\"%0Apull-from-mirror = \"{mirror}\"%0A"
            )
        };
        let policies = default_cluster_policies();
        let safe =
            diff_files(&[(REGISTRIES_CONF, &registries("all"))], &[(REGISTRIES_CONF, &registries("digest-only"))]);
        let unsafe_ =
            diff_files(&[(REGISTRIES_CONF, &registries("digest-only"))], &[(REGISTRIES_CONF, &registries("all"))]);
        let cases: &[(&ConfigDiff, bool, bool)] = &[
            (&safe, false, false),
            (&unsafe_, false, true),
            (&unsafe_, true, false),
            (&diff_files(&[], &[("/etc/containers/policy.json", "x")]), false, false),
            (&diff_files(&[], &[("/etc/motd", "x")]), false, true),
        ];
        for (i, (diff, skip, drain)) in cases.iter().enumerate() {
            let plan = cluster_plan(diff, &policies, *skip).unwrap();
            assert_eq!(plan.drain, *drain, "case {i}: {plan:?}");
        }
        let plan = cluster_plan(&unsafe_, &policies, false).unwrap();
        assert_eq!(
            plan.drain_reason,
            "/etc/containers/registries.conf: pull-from-mirror of mirror m.local of registry quay.io/x changed from \"digest-only\" to \"all\""
        );
        let broken = diff_files(&[], &[(REGISTRIES_CONF, "not = [toml")]);
        let err = cluster_plan(&broken, &policies, false).unwrap_err();
        assert!(
            err.to_string().starts_with("/etc/containers/registries.conf in the new config is not valid TOML"),
            "{err}"
        );
    }

    #[test]
    fn firstboot_rules() {
        let cases: &[(Files, &[&str], bool)] = &[
            (&[], &["None"], false),
            (&[("/etc/kubernetes/kubelet-ca.crt", "x"), ("/etc/nmstate/openshift/a.yml", "x")], &["None"], false),
            (&[("/etc/nmstate/openshift/sub/a.yml", "x")], &["Reboot"], true),
            (&[("/etc/containers/policy.json", "x")], &["Reload crio.service"], false),
            (&[("/etc/containers/registries.d/a.yaml", "x")], &["Reload crio.service"], false),
            (
                &[
                    ("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt", "x"),
                    ("/etc/containers/policy.json", "x"),
                ],
                &["Restart crio.service"],
                false,
            ),
            (&[(REGISTRIES_CONF, "")], &["Reload crio.service"], false),
            (&[(REGISTRIES_CONF, "[[registry]]%0Alocation = \"a.io\"%0A")], &["Reload crio.service"], true),
            (&[("/etc/hosts", "x"), ("/etc/containers/policy.json", "x")], &["Reboot"], true),
        ];
        for (files, want, drain) in cases {
            let plan = firstboot_plan(&diff_files(&[], files), false).unwrap();
            assert_eq!(
                (spell(&plan.actions), plan.drain),
                (want.iter().map(|s| s.to_string()).collect(), *drain),
                "{files:?}"
            );
        }
        let unit = ConfigDiff::between(
            Some(&mc(&[], json!([]), "k", json!([]))),
            &mc(&[], json!([{"name": "iri-registry.service", "enabled": true}]), "k", json!([])),
            false,
        )
        .unwrap();
        assert!(firstboot_plan(&unit, false).unwrap().reboots(), "units always reboot at first boot");
    }
}
