//! On-cluster builds: a pool's OS image built by a Job in the cluster and rolled out.

use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt as _};
use mco_api::constants::MCO_NAMESPACE;
use mco_testenv::{eventually, satisfying};
use serde_json::json;

use crate::support::*;

/// On-cluster layering in the lab (examples/lab/machineosconfig.yaml): the worker pool's OS image
/// is built in the cluster by a Job running buildah in mco's image (the Containerfile `RUN`s a
/// shell command), pushed to the lab registry and rolled out: the file is in each worker's booted
/// deployment. A Containerfile that fails leaves a Failed build, the pool ImageBuildDegraded
/// naming it and the failing step, and touches no node; fixing it builds again, clears the
/// condition and rolls out; deleting the MachineOSConfig takes the builds with it and the nodes
/// back to the pool's own image.
pub async fn a_pools_os_image_is_built_in_the_cluster(lab: &mut Lab) {
    let client = lab.client.clone();
    let lab_status = lab.status();
    let registry = lab_status["registry"].as_str().unwrap().to_string();
    let example = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab/machineosconfig.yaml"));
    let configs: Api<mco_api::MachineOSConfig> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());

    let applied = std::time::Instant::now();
    lab.apply("machineosconfig", &example.replace("LAB_REGISTRY", &registry));
    let first = new_machine_os_build(&client, None).await;
    let built = machine_os_build(&client, &first, "Succeeded").await;
    let image = built.status.unwrap().digested_image_push_spec.unwrap();
    assert!(image.starts_with(&format!("{registry}/mco/layered@sha256:")), "{image}");
    // `kubectl logs` of the build shows the builder's output.
    let pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let selector = format!("batch.kubernetes.io/job-name=build-{first}");
    let build_pod = pods.list(&ListParams::default().labels(&selector)).await.unwrap().items.remove(0);
    let log = pods.logs(&build_pod.name_any(), &Default::default()).await.unwrap();
    assert!(log.contains("STEP") && log.contains("RUN mkdir -p /usr/share/mco-lab"), "{log}");
    workers_on_image(lab, Some(&image)).await;
    let rolled_out_in = applied.elapsed();
    let published = configs.get("worker").await.unwrap().status.unwrap().current_image_pull_spec;
    assert_eq!(published.as_deref(), Some(image.as_str()));
    for file in layered_file_on_workers(lab) {
        let file = file.expect("the file the build's RUN wrote, in every worker's booted deployment");
        assert!(file.starts_with("built in the cluster on top of PRETTY_NAME="), "{file}");
    }
    eprintln!(
        "MachineOSConfig applied -> last of {} workers on the built image: {rolled_out_in:?}",
        lab.workers().len()
    );

    // A Containerfile that fails: the build says so, the pool too (naming the build and the
    // step), and no node is touched.
    let failing = "FROM configs AS final\nRUN echo about to fail && exit 3\n";
    let patch = json!({"spec": {"containerFile": [{"containerfileArch": "NoArch", "content": failing}]}});
    configs.patch("worker", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    let second = new_machine_os_build(&client, Some(&first)).await;
    machine_os_build(&client, &second, "Failed").await;
    let message = wait_condition(&client, "ImageBuildDegraded", true).await;
    assert!(
        message.starts_with(&format!("Failed to build OS image for pool worker (MachineOSBuild: {second}): ")),
        "{message}"
    );
    assert!(message.contains("RUN echo about to fail && exit 3") && message.contains("exit status 3"), "{message}");
    let all = nodes.list(&workers()).await.unwrap().items;
    assert_eq!(desired_images(&all), vec![Some(image.clone()); all.len()], "a failed build targets no node");
    assert!(all.iter().all(|n| summary(n).ends_with(" Done ")), "{:?}", all.iter().map(summary).collect::<Vec<_>>());

    // Fixed: built again, the condition cleared, rolled out; the failed build is cleaned up.
    let fixed = "FROM configs AS final\nRUN mkdir -p /usr/share/mco-lab && echo fixed > /usr/share/mco-lab/layered\n";
    let patch = json!({"spec": {"containerFile": [{"containerfileArch": "NoArch", "content": fixed}]}});
    configs.patch("worker", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    let third = new_machine_os_build(&client, Some(&second)).await;
    let built = machine_os_build(&client, &third, "Succeeded").await;
    let fixed_image = built.status.unwrap().digested_image_push_spec.unwrap();
    wait_condition(&client, "ImageBuildDegraded", false).await;
    workers_on_image(lab, Some(&fixed_image)).await;
    let layered = layered_file_on_workers(lab);
    assert_eq!(layered, vec![Some("fixed\n".to_string()); layered.len()]);
    let builds: Api<mco_api::MachineOSBuild> = Api::all(client.clone());
    eventually("only the current build left", || async {
        let names: Vec<String> = builds.list(&Default::default()).await.unwrap().iter().map(|b| b.name_any()).collect();
        satisfying(names, |n| *n == [third.clone()])
    })
    .await;

    // Deleting the MachineOSConfig: its builds go (owner references), the nodes go back.
    configs.delete("worker", &Default::default()).await.unwrap();
    workers_on_image(lab, None).await;
    let layered = layered_file_on_workers(lab);
    assert_eq!(layered, vec![None; layered.len()]);
    eventually("the builds deleted with their MachineOSConfig", || async {
        satisfying(builds.list(&Default::default()).await.unwrap().items.len(), |n| *n == 0)
    })
    .await;

    // The build controller's grants, each used in this run, and nothing it asked for refused.
    let build_roles = [
        "ClusterRole/machine-config-controller-builds",
        "Role/openshift-machine-config-operator/machine-config-controller-builds",
    ];
    assert_rbac_matches_use(lab, CONTROLLER_ACCOUNT, &[], Some(&build_roles)).await;
}
