//! The NetworkPolicies of mco's namespace, kept as upstream's operator keeps them
//! (`pkg/operator/network_policy.go`): every pod denied all traffic (`default-deny`), every pod
//! allowed all egress (the controller reaches the API server and registries, build pods pull and
//! push), and ingress allowed to the controller's metrics (9001, Prometheus) and health (8798, the
//! kubelet's probes). `allow-machine-config-operator` and `allow-machine-os-builder` select
//! upstream's operator and machine-os-builder pods, which mco does not run: they are kept so that
//! the set is upstream's, name for name, for the tools and admission policies that expect it.
//! The daemons and servers use their node's network, where NetworkPolicies do not apply.
//!
//! The policies are server-side applied under upstream's field manager, allows before the deny so
//! that no traffic is cut meanwhile, and applied again whenever one is found changed or gone.
//! deploy/'s admission policies refuse their deletion, and any update but the controller's.

use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicySpec};
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt as _};
use mco_api::constants::MCO_NAMESPACE;
use serde_json::{Value, json};

use anyhow::Context as _;

/// Upstream's field manager for the policies.
const FIELD_MANAGER: &str = "machine-config-operator";
/// How long to wait before trying again after a failed apply or watch.
const RETRY: Duration = Duration::from_secs(10);

/// The managed policies in the order they are applied: the deny last.
pub const NAMES: [&str; 5] = [
    "allow-all-egress",
    "allow-machine-config-operator",
    "allow-machine-config-controller",
    "allow-machine-os-builder",
    "default-deny",
];

/// Ingress to the pods labelled `k8s-app: app` on these TCP ports.
fn allow_ingress(app: &str, ports: &[u16]) -> Value {
    let ports: Vec<Value> = ports.iter().map(|port| json!({"protocol": "TCP", "port": port})).collect();
    json!({
        "podSelector": {"matchLabels": {"k8s-app": app}},
        "ingress": [{"ports": ports}],
        "policyTypes": ["Ingress"],
    })
}

/// The spec of the managed policy `name`, as applied: empty rule lists are written out, so that
/// the apply owns them and a rule someone added is taken away again.
pub fn desired_spec(name: &str) -> Option<Value> {
    Some(match name {
        "default-deny" => json!({"podSelector": {}, "ingress": [], "egress": [], "policyTypes": ["Ingress", "Egress"]}),
        "allow-all-egress" => json!({"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]}),
        "allow-machine-config-operator" => allow_ingress("machine-config-operator", &[9001]),
        // Metrics first, at upstream's port; then the health endpoint the kubelet probes.
        "allow-machine-config-controller" => allow_ingress("machine-config-controller", &[9001, 8798]),
        "allow-machine-os-builder" => allow_ingress("machine-os-builder", &[9001]),
        _ => return None,
    })
}

/// Whether `found` already says what the managed policy `name` should (an empty rule list reads
/// back as none).
pub fn up_to_date(name: &str, found: Option<&NetworkPolicySpec>) -> bool {
    let normalized = |spec: &NetworkPolicySpec| NetworkPolicySpec {
        ingress: spec.ingress.clone().filter(|rules| !rules.is_empty()),
        egress: spec.egress.clone().filter(|rules| !rules.is_empty()),
        ..spec.clone()
    };
    let desired =
        desired_spec(name).map(|spec| serde_json::from_value::<NetworkPolicySpec>(spec).expect("a valid spec"));
    match (found, desired) {
        (Some(found), Some(desired)) => normalized(found) == normalized(&desired),
        _ => false,
    }
}

async fn apply(api: &Api<NetworkPolicy>, name: &str) -> anyhow::Result<()> {
    let spec = desired_spec(name).expect("a managed policy");
    let policy = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name}, "spec": spec});
    api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&policy))
        .await
        .with_context(|| format!("applying NetworkPolicy {MCO_NAMESPACE}/{name}"))?;
    tracing::info!(name, "applied the NetworkPolicy");
    Ok(())
}

/// Applies every managed policy that is missing or changed, as the watch finds them, until the
/// process ends.
pub async fn run(client: Client) {
    let api: Api<NetworkPolicy> = Api::namespaced(client, MCO_NAMESPACE);
    loop {
        if let Err(e) = keep(&api).await {
            tracing::warn!("keeping mco's NetworkPolicies: {e:#}");
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// One watch: after its first list, the managed policies not found are applied, then each one
/// seen changed or deleted. Returns on the first failure.
async fn keep(api: &Api<NetworkPolicy>) -> anyhow::Result<()> {
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut listed: Vec<NetworkPolicy> = Vec::new();
    while let Some(event) = events.next().await {
        let event = event.with_context(|| format!("watching the NetworkPolicies of {MCO_NAMESPACE}"))?;
        let stale: Vec<String> = match event {
            watcher::Event::Init => {
                listed.clear();
                continue;
            }
            watcher::Event::InitApply(policy) => {
                listed.push(policy);
                continue;
            }
            watcher::Event::InitDone => NAMES
                .iter()
                .filter(|name| {
                    let found = listed.iter().find(|p| p.name_any() == **name);
                    !up_to_date(name, found.and_then(|p| p.spec.as_ref()))
                })
                .map(|name| name.to_string())
                .collect(),
            watcher::Event::Apply(policy) if desired_spec(&policy.name_any()).is_some() => {
                let name = policy.name_any();
                if up_to_date(&name, policy.spec.as_ref()) { vec![] } else { vec![name] }
            }
            watcher::Event::Delete(policy) if desired_spec(&policy.name_any()).is_some() => vec![policy.name_any()],
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => continue,
        };
        for name in stale {
            apply(api, &name).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: Value) -> NetworkPolicySpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn each_managed_policy_has_its_spec_and_the_deny_comes_last() {
        for name in NAMES {
            assert!(desired_spec(name).is_some(), "{name}");
        }
        assert_eq!(NAMES.last(), Some(&"default-deny"));
        assert_eq!(desired_spec("test-additional-allow"), None, "a user's policy is not mco's");
    }

    #[test]
    fn a_policy_is_up_to_date_only_when_it_says_what_mco_applies() {
        let controller = allow_ingress("machine-config-controller", &[9001, 8798]);
        let mut added_port = controller.clone();
        added_port["ingress"][0]["ports"].as_array_mut().unwrap().push(json!({"protocol": "TCP", "port": 22}));
        let cases = [
            (
                "as read back: the empty rule lists omitted",
                "default-deny",
                Some(json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})),
                true,
            ),
            (
                "an ingress rule added to the deny",
                "default-deny",
                Some(json!({"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress", "Egress"]})),
                false,
            ),
            (
                "egress only, as applied",
                "allow-all-egress",
                Some(json!({"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]})),
                true,
            ),
            (
                "egress narrowed to nothing",
                "allow-all-egress",
                Some(json!({"podSelector": {}, "policyTypes": ["Egress"]})),
                false,
            ),
            ("the controller's ports", "allow-machine-config-controller", Some(controller.clone()), true),
            ("a port added", "allow-machine-config-controller", Some(added_port), false),
            ("another pod selected", "allow-machine-os-builder", Some(controller), false),
            ("gone", "default-deny", None, false),
        ];
        for (case, name, found, want) in cases {
            assert_eq!(up_to_date(name, found.map(spec).as_ref()), want, "{case}");
        }
    }
}
