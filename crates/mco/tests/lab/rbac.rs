//! Least privilege, both ways: every request mco's pods made in the scenarios before (the API
//! server's audit log) was granted, and deploy/ grants them nothing they did not use; a daemon
//! pod's own token may touch no Node and only its own MachineConfigNode.

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt as _};
use mco_api::MachineConfigNode;
use mco_api::constants::MCO_NAMESPACE;
use serde_json::json;

use crate::support::*;

pub async fn every_component_uses_exactly_its_grants(lab: &mut Lab) {
    // Least privilege, both ways: every request the controller's pods made in all of the above
    // (the API server's audit log) was granted, and deploy/ grants them nothing they did not use
    // apart from what this run cannot exercise.
    let unexercised = [
        ("watch", "apiservers", "the lab has no APIServer kind: the list is answered 404, no watch follows"),
        ("watch", "featuregates", "the lab has no FeatureGate kind (as above)"),
        ("watch", "nodes", "the lab has no config.openshift.io Node kind (as above); core Nodes are watched"),
        ("watch", "schedulers", "the lab has no Scheduler kind (as above)"),
        ("patch", "containerruntimeconfigs", "no ContainerRuntimeConfig in this run"),
        ("patch", "containerruntimeconfigs/status", "no ContainerRuntimeConfig in this run"),
        ("update", "containerruntimeconfigs/finalizers", "owner references: see machineconfigpools/finalizers"),
        ("update", "kubeletconfigs/finalizers", "owner references: see machineconfigpools/finalizers"),
        (
            "update",
            "machineconfigpools/finalizers",
            "checked by the OwnerReferencesPermissionEnforcement admission plugin (OpenShift's) when an owner \
             reference blocks its owner's deletion, never a request of its own",
        ),
        ("update", "machineconfigs", "only when a generated config's owner was re-created"),
        ("patch", "machineosconfigs", "no MachineOSConfig in this run"),
        ("create", "leases", "the bootstrap controller created the Lease; a cluster without one has a pod create it"),
        ("create", "osimagestreams", "the bootstrap controller made it before the handover"),
        ("patch", "osimagestreams", "its annotations change with mco's version only"),
        ("patch", "osimagestreams/status", "the streams change with the release only"),
        ("patch", "events", "a repeated event within 6 minutes, which this run does not have"),
        ("create", "networkpolicies", "the bootstrap controller applied them before the handover"),
        ("patch", "networkpolicies", "(as above; applied again only when changed or gone)"),
        // The boot image controller's writes: the bootstrap controller made them before the
        // handover (gcp::an_old_rhcos_machineset_is_moved_and_a_custom_one_blocks_upgrades checks
        // the rest of its grants).
        ("create", "machineconfigurations", "MachineConfiguration cluster exists"),
        ("patch", "machineconfigurations", "its status and opt-in were written by the bootstrap controller"),
        ("update", "machineconfigurations/status", "(as above)"),
        ("update", "secrets", "the lab's stub user-data is spec 3 already: nothing to upgrade"),
        ("create", "machineconfignodes", "the bootstrap controller may have made every Node's before the handover"),
        ("delete", "machineconfignodes", "only a gone Node's: this run deletes no Node"),
        // On-cluster builds: builds::a_pools_os_image_is_built_in_the_cluster checks these grants.
        ("create", "machineosbuilds", "no MachineOSConfig in this run"),
        ("delete", "machineosbuilds", "(as above)"),
        ("patch", "machineosbuilds/status", "(as above)"),
        ("patch", "machineosconfigs/status", "(as above)"),
        ("get", "jobs", "(as above)"),
        ("create", "jobs", "(as above)"),
        ("delete", "jobs", "(as above)"),
        ("list", "configmaps", "(as above)"),
        ("create", "configmaps", "(as above)"),
        ("delete", "configmaps", "(as above)"),
        ("get", "secrets", "(as above)"),
    ];
    assert_rbac_matches_use(lab, CONTROLLER_ACCOUNT, &unexercised, None).await;
    // The daemons' pods too: no Node access of their own (they write their Node with the kubelet's
    // credentials, which are not in this audit), the rest used.
    let unexercised = [
        ("get", "configmaps", "image-registry-override-drain: only read when registries.conf changes"),
        ("patch", "machineconfignodes", "upstream's grant for a node's own edits; the daemon writes only the status"),
    ];
    assert_rbac_matches_use(lab, DAEMON_ACCOUNT, &unexercised, Some(&["machine-config-daemon"])).await;
    // And the server's pod on the control-plane node.
    assert_rbac_matches_use(lab, SERVER_ACCOUNT, &[], Some(&["machine-config-server"])).await;
}

pub async fn a_daemon_pods_token_touches_no_node_and_only_its_own_mcn(lab: &mut Lab) {
    let client = lab.client.clone();
    // A daemon pod's own credentials (a token bound to the pod, as the kubelet mounts it) may not
    // touch any Node, its own or another: the daemon writes its Node with the kubelet's.
    // (Last: the audit checks above would count these refusals.)
    let daemon = daemon_pod(&client, "worker-0").await.expect("worker-0's daemon pod");
    let bound = TokenRequest {
        spec: Some(TokenRequestSpec {
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(daemon.name_any()),
                uid: daemon.uid(),
            }),
            expiration_seconds: Some(600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), MCO_NAMESPACE)
        .create_token_request("machine-config-daemon", &Default::default(), &bound)
        .await
        .unwrap()
        .status
        .and_then(|status| status.token)
        .unwrap();
    let mut as_daemon = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(lab.state_dir().join("kubeconfig")).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    as_daemon.auth_info = kube::config::AuthInfo { token: Some(token.into()), ..Default::default() };
    let daemon_nodes_api: Api<Node> = Api::all(Client::try_from(as_daemon).unwrap());
    let annotate = json!({"metadata": {"annotations": {"lab.mco/written-by": "a daemon pod"}}});
    for node in ["worker-0", "worker-1"] {
        match daemon_nodes_api.patch(node, &PatchParams::default(), &Patch::Merge(&annotate)).await {
            Err(kube::Error::Api(response)) => assert_eq!(response.code, 403, "{node}: {response:?}"),
            other => panic!("a daemon pod's token annotating Node {node}: {other:?}"),
        }
    }
    // It writes its own Node's MachineConfigNode status, not another's (deploy/'s mcn-guards). The
    // write sets what is there already, under a field manager of its own.
    let daemon_mcns: Api<MachineConfigNode> = Api::all(daemon_nodes_api.into_client());
    let own_mcn = Api::<MachineConfigNode>::all(client.clone()).get("worker-0").await.unwrap();
    let desired = own_mcn.status.and_then(|s| s.config_version).map(|v| v.desired).unwrap();
    let as_is = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "status": {"configVersion": {"desired": desired}},
    });
    let apply = PatchParams::apply("lab-test").force();
    let own = daemon_mcns.patch_status("worker-0", &apply, &Patch::Apply(&as_is)).await;
    assert!(own.is_ok(), "worker-0's daemon writing its own MachineConfigNode: {own:?}");
    match daemon_mcns.patch_status("worker-1", &apply, &Patch::Apply(&as_is)).await {
        Err(kube::Error::Api(response)) => assert!(
            response.message.contains("updates to MCN worker-1 can only be done from the MCN's owner node"),
            "{response:?}"
        ),
        other => panic!("worker-0's daemon writing worker-1's MachineConfigNode: {other:?}"),
    }
}
