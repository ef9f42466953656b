//! `deploy/`: mco's manifests. Their CRDs are what `mco crds` generates, and the whole of them (with
//! the Machine API component and the lab's overlay) is applied with the real kubectl to a real API
//! server, whose RBAC authorizer then answers for each component's service account.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use mco_api::MachineConfigNode;
use mco_lab::install::{Overlay, kustomization, relative_path};
use mco_testenv::k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use mco_testenv::k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use mco_testenv::kube::api::{Patch, PatchParams, PostParams};
use mco_testenv::kube::{self, Api, Client, ResourceExt as _};
use mco_testenv::{TestEnv, eventually, find_binaries};
use serde_json::json;

/// Each CRD file of `deploy/` and the `mco crds` arguments it is generated with.
const CRD_FILES: [(&str, &[&str]); 2] = [
    ("base/crds.yaml", &["--group", "machineconfiguration.openshift.io", "--kind", "MachineConfiguration"]),
    (
        "components/image-config/crds.yaml",
        &[
            "--kind",
            "Image",
            "--kind",
            "ImageDigestMirrorSet",
            "--kind",
            "ImageTagMirrorSet",
            "--kind",
            "ImageContentSourcePolicy",
        ],
    ),
];
const NAMESPACE: &str = "openshift-machine-config-operator";

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy").canonicalize().unwrap()
}

#[test]
fn deploy_crds_are_what_mco_crds_generates() {
    for (file, args) in CRD_FILES {
        let generated = common::stdout(&common::mco().arg("crds").args(args).assert().success());
        let shipped = std::fs::read_to_string(deploy().join(file)).unwrap();
        assert!(
            generated == shipped,
            "deploy/{file} is stale: regenerate it with `mco crds {} > deploy/{file}`",
            args.join(" ")
        );
    }
}

#[test]
fn crds_refuses_a_group_it_has_no_crd_of() {
    let assert = common::mco().args(["crds", "--group", "example.com", "--kind", "Example"]).assert().failure();
    assert!(common::stderr(&assert).contains("no CRD has any of the groups [\"example.com\"] or kinds [\"Example\"]"));
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    let [kubectl] = find_binaries(["kubectl"]).unwrap();
    Command::new(kubectl).arg("--kubeconfig").arg(kubeconfig).args(args).output().unwrap()
}

/// `kubectl auth can-i VERB RESOURCE[/SUBRESOURCE] [-n NS] --as SA`: the API server's RBAC
/// authorizer's answer.
fn can(kubeconfig: &Path, account: &str, verb: &str, resource: &str, namespace: Option<&str>) -> bool {
    let user = format!("system:serviceaccount:{NAMESPACE}:{account}");
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    let subresource = format!("--subresource={subresource}");
    let mut args = vec!["auth", "can-i", verb, resource, &subresource, "--as", &user];
    if let Some(namespace) = namespace {
        args.extend(["--namespace", namespace]);
    }
    let output = kubectl(kubeconfig, &args);
    let answer = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert!(answer == "yes" || answer == "no", "{args:?}: {answer} {}", String::from_utf8_lossy(&output.stderr));
    answer == "yes"
}

#[tokio::test]
async fn deploy_applies_to_a_real_api_server_with_each_component_confined() {
    let env = TestEnv::start().await.unwrap();
    let kubeconfig = env.kubeconfig();
    let created = kubectl(kubeconfig, &["create", "namespace", "openshift-machine-api"]);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));

    // The lab's overlay over deploy/, with the Machine API component, as `mco lab up` writes it.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let overlay = Overlay {
        digest: format!("sha256:{}", "0".repeat(64)),
        apiserver_url: "https://10.200.0.1:6443".into(),
        machine_api: true,
    };
    std::fs::write(dir.join("kustomization.yaml"), kustomization(&overlay, &relative_path(&dir, &deploy()))).unwrap();
    let applied = kubectl(kubeconfig, &["apply", "--kustomize", dir.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&applied.stdout);
    assert!(applied.status.success(), "{out}{}", String::from_utf8_lossy(&applied.stderr));
    for object in [
        "deployment.apps/machine-config-controller created",
        "poddisruptionbudget.policy/machine-config-controller created",
        "clusterrole.rbac.authorization.k8s.io/machine-config-controller-boot-images created",
        "rolebinding.rbac.authorization.k8s.io/machine-config-controller-machine-api created",
        "serviceaccount/machine-config-daemon created",
        "daemonset.apps/machine-config-daemon created",
        "daemonset.apps/machine-config-server created",
    ] {
        assert!(out.contains(object), "{object} missing from:\n{out}");
    }
    // The lab's daemons manage their host's libostree sysroot.
    let daemon = kubectl(
        kubeconfig,
        &[
            "-n",
            NAMESPACE,
            "get",
            "daemonset/machine-config-daemon",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].args} {.spec.template.spec.volumes[*].hostPath.path} \
             ports:{.spec.template.spec.containers[0].ports[*].name}",
        ],
    );
    let daemon = String::from_utf8_lossy(&daemon.stdout).to_string();
    // The host's root and its sysroot, staged with libostree (no rpm-ostree on the lab's machines).
    for wanted in
        ["--root=/rootfs", "--host", "--sysroot=/rootfs/sysroot", "--cmdline=/rootfs/proc/cmdline", "ports:metrics"]
    {
        assert!(daemon.contains(wanted), "{wanted} not in {daemon}");
    }
    assert!(!daemon.contains("--os-backend"), "{daemon}");
    let image = kubectl(
        kubeconfig,
        &[
            "-n",
            NAMESPACE,
            "get",
            "deployment/machine-config-controller",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].args} \
             ports:{.spec.template.spec.containers[0].ports[*].name}",
        ],
    );
    let image = String::from_utf8_lossy(&image.stdout).to_string();
    assert!(image.starts_with(&format!("lab-registry.local/mco/mco@{} ", overlay.digest)), "{image}");
    assert!(image.contains("--retry-period=2"), "{image}");
    // It checks OS images in the lab registry on the nodes' loopback: on its node's network, so on
    // ports the daemon there does not use.
    assert!(
        image.contains("--metrics-secure-listen=$(HOST_IP):8795") && image.ends_with("ports:health metrics"),
        "{image}"
    );
    assert!(image.contains("--health-listen=$(HOST_IP):8796"), "{image}");
    // The server shares the control plane nodes' network with the daemon: its metrics port is its own.
    let server = kubectl(
        kubeconfig,
        &[
            "-n",
            NAMESPACE,
            "get",
            "daemonset/machine-config-server",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].args} \
             ports:{range .spec.template.spec.containers[0].ports[*]}{.name}={.containerPort} {end}",
        ],
    );
    let server = String::from_utf8_lossy(&server.stdout).to_string();
    assert!(
        server.contains(r#""--metrics-listen=127.0.0.1:8799","--metrics-secure-listen=0.0.0.0:9002""#)
            && server.ends_with("ports:https=22623 http=22624 metrics=9002 "),
        "{server}"
    );

    let mcd = "machine-config-daemon";
    let mcc = "machine-config-controller";
    let mcs = "machine-config-server";
    let granted = [
        (mcc, "patch", "nodes", None),
        (mcc, "create", "pods/eviction", Some("default")),
        (mcc, "update", "machineconfigs.machineconfiguration.openshift.io", None),
        (mcc, "update", "secrets", Some("openshift-machine-api")),
        (mcc, "update", "machinesets.machine.openshift.io", Some("openshift-machine-api")),
        (mcc, "create", "leases.coordination.k8s.io", Some(NAMESPACE)),
        (mcs, "watch", "machineconfigs.machineconfiguration.openshift.io", None),
        (mcd, "get", "machineconfigs.machineconfiguration.openshift.io", None),
        (mcd, "patch", "machineconfignodes.machineconfiguration.openshift.io/status", None),
        (mcd, "patch", "machineconfignodes.machineconfiguration.openshift.io", None),
        (mcc, "create", "machineconfignodes.machineconfiguration.openshift.io", None),
        (mcc, "delete", "machineconfignodes.machineconfiguration.openshift.io", None),
        // Their metrics ports ask who a scraper is and whether it may read.
        (mcc, "create", "tokenreviews.authentication.k8s.io", None),
        (mcd, "create", "subjectaccessreviews.authorization.k8s.io", None),
        (mcs, "create", "tokenreviews.authentication.k8s.io", None),
    ];
    let refused = [
        // No Secret outside the Machine API's namespace (upstream's controller has them all).
        (mcc, "get", "secrets", Some("kube-system")),
        (mcc, "delete", "nodes", None),
        (mcc, "create", "pods", Some("default")),
        (mcs, "get", "secrets", Some(NAMESPACE)),
        (mcs, "update", "machineconfigs.machineconfiguration.openshift.io", None),
        (mcs, "patch", "nodes", None),
        // The daemon's Node is written with the kubelet's credentials, never the service account's.
        (mcd, "patch", "nodes", None),
        (mcd, "get", "nodes", None),
        (mcd, "update", "machineconfigs.machineconfiguration.openshift.io", None),
        (mcd, "list", "secrets", None),
        (mcd, "create", "pods/eviction", Some("default")),
        // Its MachineConfigNode is the controller's to create and delete.
        (mcd, "create", "machineconfignodes.machineconfiguration.openshift.io", None),
        (mcd, "delete", "machineconfignodes.machineconfiguration.openshift.io", None),
    ];
    for (account, verb, resource, namespace) in granted {
        assert!(
            can(kubeconfig, account, verb, resource, namespace),
            "{account} may not {verb} {resource} in {namespace:?}"
        );
    }
    for (account, verb, resource, namespace) in refused {
        assert!(
            !can(kubeconfig, account, verb, resource, namespace),
            "{account} may {verb} {resource} in {namespace:?}"
        );
    }
    daemon_tokens_write_only_their_own_nodes_machine_config_node(&env).await;
    pools_name_only_streams_the_cluster_offers(&env).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The OSImageStream admission policies: a pool may name only a stream of the OSImageStream
/// (any while there is none), and the OSImageStream cannot be deleted.
async fn pools_name_only_streams_the_cluster_offers(env: &TestEnv) {
    let pools: Api<mco_api::MachineConfigPool> = Api::all(env.client());
    let streams: Api<mco_api::OSImageStream> = Api::all(env.client());
    let pool: mco_api::MachineConfigPool = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "infra"},
        "spec": {"osImageStream": {"name": "rhel-10"}},
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.expect("any stream while the cluster has no OSImageStream");
    let stream: mco_api::OSImageStream = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "OSImageStream",
        "metadata": {"name": "cluster"}, "spec": {"defaultStream": "rhel-9"},
    }))
    .unwrap();
    streams.create(&PostParams::default(), &stream).await.unwrap();
    let name = |stream: &str| json!({"spec": {"osImageStream": {"name": stream}}});
    let refused_with_the_policys_message = |stream: &'static str| {
        let pools = pools.clone();
        async move {
            match pools.patch("infra", &PatchParams::default(), &Patch::Merge(&name(stream))).await {
                Err(kube::Error::Api(e)) if e.message.contains(
                    "The specified osImageStream name must reference a valid stream from the cluster OSImageStream resource",
                ) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    };
    // Before the OSImageStream has a status it offers no stream (named, not a CEL error).
    eventually("a stream refused while the OSImageStream has no status", || refused_with_the_policys_message("rhel-9"))
        .await;
    let digest = "0".repeat(64);
    let status = json!({"status": {"defaultStream": "rhel-9", "availableStreams": [{"name": "rhel-9",
        "osImage": format!("quay.io/os@sha256:{digest}"), "osExtensionsImage": format!("quay.io/ext@sha256:{digest}")}]}});
    streams.patch_status("cluster", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    // The policy reads the OSImageStream from its own cache: until that has the status, every
    // stream is refused, so the pool naming the offered stream is retried too.
    eventually("the pool's unknown stream refused", || refused_with_the_policys_message("rhel-11")).await;
    eventually("the pool's offered stream accepted", || {
        let pools = pools.clone();
        async move {
            pools
                .patch("infra", &PatchParams::default(), &Patch::Merge(&name("rhel-9")))
                .await
                .map_err(|e| e.to_string())
        }
    })
    .await;
    // (Deleted before the policy took effect, it is made again for the next attempt.)
    let refusal = eventually("the OSImageStream's deletion refused", || {
        let (streams, stream) = (streams.clone(), stream.clone());
        async move {
            if streams.get_opt("cluster").await.unwrap().is_none() {
                streams.create(&PostParams::default(), &stream).await.unwrap();
            }
            match streams.delete("cluster", &Default::default()).await {
                Err(kube::Error::Api(e)) if e.code == 403 || e.code == 422 => Ok(e.message),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    assert!(refusal.contains("Deletion of OSImageStream resources is not allowed"), "{refusal}");
}

/// A token of the daemon's service account for a pod on `node` (as the kubelet mounts it), or
/// one bound to nothing.
async fn daemon_token(env: &TestEnv, pod: Option<&Pod>) -> String {
    let bound_object_ref = pod.map(|pod| BoundObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name_any()),
        uid: pod.uid(),
    });
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { bound_object_ref, expiration_seconds: Some(600), ..Default::default() }),
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(env.client(), NAMESPACE)
        .create_token_request("machine-config-daemon", &Default::default(), &request)
        .await
        .unwrap()
        .status
        .and_then(|status| status.token)
        .unwrap()
}

/// A client of the test's API server as `auth_info` says.
async fn client_as(env: &TestEnv, auth_info: impl FnOnce(kube::config::AuthInfo) -> kube::config::AuthInfo) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    config.auth_info = auth_info(config.auth_info);
    Client::try_from(config).unwrap()
}

async fn client_with_token(env: &TestEnv, token: String) -> Client {
    client_as(env, |_| kube::config::AuthInfo { token: Some(token.into()), ..Default::default() }).await
}

/// The `mcn-guards` admission policy: with a token bound to a pod on node-a, the daemon's account
/// writes node-a's MachineConfigNode status and not node-b's; with a token bound to no pod, none.
async fn daemon_tokens_write_only_their_own_nodes_machine_config_node(env: &TestEnv) {
    let nodes: Api<Node> = Api::all(env.client());
    let machine_config_nodes: Api<MachineConfigNode> = Api::all(env.client());
    for name in ["node-a", "node-b"] {
        let node: Node =
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        let spec = mco_mcn::progress::spec_for(name, "worker", &Default::default());
        machine_config_nodes.create(&PostParams::default(), &MachineConfigNode::new(name, spec)).await.unwrap();
    }
    let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "machine-config-daemon-a", "namespace": NAMESPACE},
        "spec": {"nodeName": "node-a", "serviceAccountName": "machine-config-daemon",
            "containers": [{"name": "daemon", "image": "mco"}]}}))
    .unwrap();
    let pod = Api::<Pod>::namespaced(env.client(), NAMESPACE).create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "status": {"configVersion": {"desired": "rendered-worker-a"}},
    });
    let write_status = |client: Client, node: &'static str| {
        let status = status.clone();
        async move {
            Api::<MachineConfigNode>::all(client)
                .patch_status(node, &PatchParams::apply("machine-config-operator").force(), &Patch::Apply(&status))
                .await
        }
    };
    // The policy takes effect once the API server has loaded it: wait for its first refusal.
    let bound = client_with_token(env, daemon_token(env, Some(&pod)).await).await;
    let refusal = eventually("mcn-guards to refuse the daemon of node-a writing node-b's MachineConfigNode", || {
        let written = write_status(bound.clone(), "node-b");
        async move {
            match written.await {
                Err(kube::Error::Api(e)) => Ok(e.message),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    assert!(refusal.contains("updates to MCN node-b can only be done from the MCN's owner node"), "{refusal}");
    let own = write_status(bound.clone(), "node-a").await.unwrap();
    assert_eq!(own.status.unwrap().config_version.unwrap().desired, "rendered-worker-a");
    // The object itself alike, as upstream's e2e TestMCNScope* patch it: its own node's, not another's.
    let edit = json!({"spec": {"configVersion": {"desired": "rendered-worker-test"}}});
    let patch_spec = |client: Client, node: &'static str| {
        let edit = edit.clone();
        async move { Api::<MachineConfigNode>::all(client).patch(node, &PatchParams::default(), &Patch::Merge(&edit)).await }
    };
    let own = patch_spec(bound.clone(), "node-a").await.unwrap();
    assert_eq!(own.spec.config_version.desired, "rendered-worker-test");
    let node_b = patch_spec(bound, "node-b").await;
    assert_refused(
        node_b,
        "updates to MCN node-b can only be done from the MCN's owner node",
        "node-a's daemon edits node-b's",
    );

    let unbound = client_with_token(env, daemon_token(env, None).await).await;
    let no_claim = "this user must have a \"authentication.kubernetes.io/node-name\" claim";
    assert_refused(write_status(unbound, "node-a").await, no_claim, "a token bound to no pod writes a status");
    // Impersonating the daemon's account (no node-name claim): refused, as upstream's e2e expects.
    let daemon = format!("system:serviceaccount:{NAMESPACE}:machine-config-daemon");
    let as_daemon = client_as(env, |admin| kube::config::AuthInfo { impersonate: Some(daemon), ..admin }).await;
    assert_refused(patch_spec(as_daemon, "node-a").await, no_claim, "an impersonated daemon edits one");
    // The controller's account is not confined by the policy.
    let controller = format!("system:serviceaccount:{NAMESPACE}:machine-config-controller");
    let as_controller = client_as(env, |admin| kube::config::AuthInfo { impersonate: Some(controller), ..admin }).await;
    let written = Api::<MachineConfigNode>::all(as_controller)
        .patch_status("node-b", &PatchParams::apply("machine-config-operator").force(), &Patch::Apply(&status))
        .await;
    assert!(written.is_ok(), "{written:?}");
}

/// `written` is an API refusal whose message contains `message` (`what`: the attempt).
fn assert_refused<T: std::fmt::Debug>(written: Result<T, kube::Error>, message: &str, what: &str) {
    match written {
        Err(kube::Error::Api(e)) => assert!(e.message.contains(message), "{what}: refused with {e:?}, not {message:?}"),
        other => panic!("{what}: not refused: {other:?}"),
    }
}
