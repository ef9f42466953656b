//! The NetworkPolicy controller against a real API server, with deploy/'s admission policies:
//! mco's five policies made, a deleted one made again and a rule someone added taken away; then,
//! guarded, deleting or editing one is refused with upstream's words, while an administrator's
//! own policy beside them is neither refused nor touched.

use std::path::Path;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt as _};
use mco_api::constants::MCO_NAMESPACE;
use mco_controller::networkpolicy::{NAMES, up_to_date};
use mco_testenv::{TestEnv, eventually, find_binaries, satisfying};
use serde_json::json;

/// Each managed policy and whether it says what mco applies (`None`: not there).
async fn managed(policies: &Api<NetworkPolicy>) -> Vec<(&'static str, Option<bool>)> {
    let mut seen = Vec::new();
    for name in NAMES {
        let found = policies.get_opt(name).await.unwrap();
        seen.push((name, found.map(|p| up_to_date(name, p.spec.as_ref()))));
    }
    seen
}

async fn all_up_to_date(policies: &Api<NetworkPolicy>, what: &str) {
    eventually(what, || async {
        satisfying(managed(policies).await, |seen| seen.iter().all(|(_, ok)| *ok == Some(true)))
    })
    .await;
}

#[tokio::test]
async fn mcos_network_policies_are_kept_and_guarded() {
    // The policies live in mco's namespace under fixed names: a server of this test's own.
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta { name: Some(MCO_NAMESPACE.into()), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let controller = tokio::spawn(mco_controller::networkpolicy::run(client.clone()));
    all_up_to_date(&policies, "mco's five NetworkPolicies, as applied").await;

    // Without the guards: a deleted policy comes back, an ingress rule added to the deny goes.
    policies.delete("allow-all-egress", &DeleteParams::default()).await.unwrap();
    let opened = json!({"spec": {"ingress": [{}]}});
    policies.patch("default-deny", &PatchParams::default(), &Patch::Merge(&opened)).await.unwrap();
    all_up_to_date(&policies, "the deleted policy made again and the added rule taken away").await;

    // deploy/'s admission policies, as installed.
    let [kubectl] = find_binaries(["kubectl"]).unwrap();
    let admission = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/base/admission.yaml");
    let applied = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["apply", "-f"])
        .arg(&admission)
        .output()
        .unwrap();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));

    // The guards take a moment to load; until then a deletion goes through and the controller
    // makes the policy again, so every attempt is checked to end with the policy there.
    let refused = eventually("deleting default-deny refused by the admission policy", || async {
        let outcome = policies.delete("default-deny", &DeleteParams::default()).await;
        all_up_to_date(&policies, "every policy there again").await;
        match outcome {
            Err(kube::Error::Api(status)) => Ok(status),
            Ok(_) => Err("deleted".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert_eq!(refused.code, 422, "{refused:?}");
    assert!(
        refused.message.contains(
            "Deletion of MCO-managed NetworkPolicy resources in the openshift-machine-config-operator namespace is not allowed"
        ),
        "{refused:?}"
    );
    for name in NAMES {
        let deleted = policies.delete(name, &DeleteParams::default()).await;
        assert!(matches!(&deleted, Err(kube::Error::Api(s)) if s.code == 422), "{name}: {deleted:?}");
        let mut policy = policies.get(name).await.unwrap();
        policy.labels_mut().insert("test-modification".into(), "should-be-blocked".into());
        let updated = policies.replace(name, &PostParams::default(), &policy).await;
        let Err(kube::Error::Api(status)) = &updated else { panic!("{name}: updated: {updated:?}") };
        assert_eq!(status.code, 422, "{name}: {status:?}");
        assert!(status.message.contains("Modification of MCO-managed NetworkPolicy resources"), "{name}: {status:?}");
    }

    // An administrator's own policy is theirs: made, kept as written, deleted.
    let own: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": "test-additional-allow"},
        "spec": {
            "podSelector": {"matchLabels": {"k8s-app": "machine-config-controller"}},
            "ingress": [{"ports": [{"protocol": "TCP", "port": 8080}]}],
            "policyTypes": ["Ingress"],
        },
    }))
    .unwrap();
    policies.create(&PostParams::default(), &own).await.unwrap();
    all_up_to_date(&policies, "mco's policies unchanged beside the administrator's").await;
    let kept = policies.get("test-additional-allow").await.unwrap();
    assert_eq!(kept.spec, own.spec);
    policies.delete("test-additional-allow", &DeleteParams::default()).await.unwrap();
    controller.abort();
}
