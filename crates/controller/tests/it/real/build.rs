//! The build controller against a real API server (mco-testenv): a MachineOSConfig gets the
//! MachineOSBuild of its pool's rendered config (upstream's name), with its ConfigMaps and Job;
//! the build follows its pod to Succeeded and becomes the MachineOSConfig's current image; a new
//! rendered config or Containerfile starts a new build and interrupts the running one; a failed
//! build sets the pool's ImageBuildDegraded naming the build and the failing step; the rebuild
//! annotation builds again; a missing push Secret fails the build without a Job.
//!
//! No kubelet or Job controller runs here: the test creates each Job's pod and writes its status
//! as they would (a stand-in, named as such), so that the controller's reading of pods is what
//! is tested. The lab test runs real builds in real pods.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Api, Client, ResourceExt};
use mco_api::constants::{CURRENT_MACHINE_OS_BUILD_ANNOTATION, MACHINE_OS_CONFIG_LABEL, REBUILD_ANNOTATION};
use mco_api::{MachineConfig, MachineConfigPool, MachineOSBuild, MachineOSConfig};
use mco_controller::build::{Options, run};
use mco_machine_os_build::BuildRequest;
use mco_machine_os_build::progress::{self, Phase};
use mco_testenv::{TestEnv, eventually, satisfying};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const NS: &str = "builds";
const POOL: &str = "layered";
const BASE: &str =
    "registry.example.com:5000/os@sha256:0000000000000000000000000000000000000000000000000000000000000000";

fn from<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

async fn create<T>(client: &Client, object: &T) -> T
where
    T: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    Api::<T>::all(client.clone()).create(&PostParams::default(), object).await.unwrap()
}

fn rendered(name: &str, hello: &str) -> MachineConfig {
    from(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"osImageURL": BASE, "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
            {"path": "/etc/hello", "mode": 420, "contents": {"source": format!("data:,{hello}")}}
        ]}}}
    }))
}

async fn set_rendered(client: &Client, name: &str) {
    Api::<MachineConfigPool>::all(client.clone())
        .patch(POOL, &PatchParams::default(), &Patch::Merge(json!({"spec": {"configuration": {"name": name}}})))
        .await
        .unwrap();
}

fn machine_os_config(push_secret: &str, containerfile: &str) -> MachineOSConfig {
    from(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
        "metadata": {"name": POOL},
        "spec": {
            "machineConfigPool": {"name": POOL},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": push_secret},
            "renderedImagePushSpec": "registry.example.com:5000/org/layered:latest",
            "containerFile": [{"containerfileArch": "NoArch", "content": containerfile}]
        }
    }))
}

/// The build the controller should make for the cluster's current MachineOSConfig and pool.
async fn expected_build(client: &Client) -> String {
    let config = Api::<MachineOSConfig>::all(client.clone()).get(POOL).await.unwrap();
    let pool = Api::<MachineConfigPool>::all(client.clone()).get(POOL).await.unwrap();
    let target = BuildRequest::pool_target(&pool).unwrap().to_string();
    let rendered = Api::<MachineConfig>::all(client.clone()).get(&target).await.unwrap();
    BuildRequest::new(&config, &pool, &rendered).unwrap().build_name()
}

fn phase_of(build: &MachineOSBuild) -> Option<Phase> {
    progress::phase(build)
}

/// Waits until MachineOSBuild `name` is in `phase`; returns it.
async fn build_in(client: &Client, name: &str, phase: Phase) -> MachineOSBuild {
    let api = Api::<MachineOSBuild>::all(client.clone());
    eventually(&format!("MachineOSBuild {name} {phase:?}"), || async {
        let build = api.get_opt(name).await.unwrap();
        satisfying(build, |b| b.as_ref().and_then(phase_of) == Some(phase)).map(Option::unwrap)
    })
    .await
}

/// Stand-in for the Job controller: the Job's pod, as it would create it.
async fn job_pod(client: &Client, build: &str) -> String {
    let jobs = Api::<Job>::namespaced(client.clone(), NS);
    let job = eventually(&format!("Job build-{build}"), || async {
        jobs.get_opt(&format!("build-{build}")).await.unwrap().ok_or(())
    })
    .await;
    let template = job.spec.clone().unwrap().template;
    let labels = template.metadata.unwrap().labels.unwrap();
    let pod = Pod {
        metadata: kube::api::ObjectMeta {
            // As the Job controller names them: one per Job, never reused.
            name: Some(format!("build-{build}-{}", &job.metadata.uid.clone().unwrap()[..5])),
            namespace: Some(NS.into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: template.spec,
        ..Default::default()
    };
    Api::<Pod>::namespaced(client.clone(), NS).create(&PostParams::default(), &pod).await.unwrap().name_any()
}

/// Stand-in for the kubelet: the build container's state.
async fn set_pod(client: &Client, pod: &str, phase: &str, state: Value) {
    let status = json!({"status": {"phase": phase, "containerStatuses": [{
        "name": "image-build", "image": "mco:test", "imageID": "", "ready": false, "restartCount": 0, "state": state
    }]}});
    Api::<Pod>::namespaced(client.clone(), NS)
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

fn terminated(code: i32, message: &str) -> Value {
    json!({"terminated": {"exitCode": code, "message": message, "reason": if code == 0 { "Completed" } else { "Error" }}})
}

async fn config_maps(client: &Client, build: &str) -> Vec<String> {
    let selector = format!("machineconfiguration.openshift.io/machine-os-build={build}");
    let api = Api::<ConfigMap>::namespaced(client.clone(), NS);
    let listed = api.list(&ListParams::default().labels(&selector)).await.unwrap();
    listed.items.iter().map(ResourceExt::name_any).collect()
}

fn condition_message(build: &MachineOSBuild, kind: &str) -> String {
    let conditions = build.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().find(|c| c.type_ == kind).map(|c| c.message).unwrap_or_default()
}

#[tokio::test]
async fn machine_os_configs_are_built_rolled_forward_and_failures_reported() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create(&client, &from::<Namespace>(json!({"metadata": {"name": NS}}))).await;
    // deploy/'s account for build pods.
    let account: ServiceAccount = from(json!({"metadata": {"name": "machine-os-builder", "namespace": NS}}));
    Api::<ServiceAccount>::namespaced(client.clone(), NS).create(&PostParams::default(), &account).await.unwrap();
    let push_secret: Secret = from(json!({
        "metadata": {"name": "push-secret", "namespace": NS}, "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": "{\"auths\": {}}"}
    }));
    Api::<Secret>::namespaced(client.clone(), NS).create(&PostParams::default(), &push_secret).await.unwrap();
    create(&client, &rendered("rendered-layered-1", "one")).await;
    create(&client, &rendered("rendered-layered-2", "two")).await;
    create(
        &client,
        &from::<MachineConfigPool>(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": POOL}, "spec": {"configuration": {"name": "rendered-layered-1"}}
        })),
    )
    .await;
    let options = Options {
        namespace: NS.into(),
        image: "registry.example.com/mco@sha256:1111".into(),
        pod: Default::default(),
        retry_delay: Duration::from_millis(500),
        metrics: Default::default(),
    };
    tokio::spawn(run(client.clone(), options));
    let configs = Api::<MachineOSConfig>::all(client.clone());
    let config = create(&client, &machine_os_config("push-secret", "FROM configs AS final\nRUN touch /etc/x")).await;

    // The build of the pool's rendered config, under upstream's name, owned by the
    // MachineOSConfig; its ConfigMaps and Job owned by it; named on the MachineOSConfig.
    let first = expected_build(&client).await;
    let build = build_in(&client, &first, Phase::Prepared).await;
    assert_eq!(build.spec.machine_config.name, "rendered-layered-1");
    assert_eq!(build.spec.rendered_image_push_spec, format!("registry.example.com:5000/org/layered:{first}"));
    assert_eq!(build.owner_references()[0].uid, config.uid().unwrap());
    let builder = build.status.as_ref().unwrap().builder.clone().unwrap().job.unwrap();
    assert_eq!((builder.namespace.as_deref(), builder.name.as_str()), (Some(NS), format!("build-{first}").as_str()));
    let mut maps = config_maps(&client, &first).await;
    maps.sort();
    assert_eq!(maps, [format!("containerfile-{first}"), format!("mc-{first}")]);
    let containerfile = Api::<ConfigMap>::namespaced(client.clone(), NS).get(&format!("containerfile-{first}")).await;
    let containerfile = containerfile.unwrap().data.unwrap()["Containerfile"].clone();
    assert!(containerfile.contains(&format!("FROM {BASE} AS configs\n")), "{containerfile}");
    assert!(containerfile.ends_with("FROM configs AS final\nRUN touch /etc/x\n"), "{containerfile}");
    let annotated = eventually("the MachineOSConfig naming its build", || async {
        let c = configs.get(POOL).await.unwrap();
        satisfying(c.annotations().get(CURRENT_MACHINE_OS_BUILD_ANNOTATION).cloned(), |a| a.is_some())
    })
    .await;
    assert_eq!(annotated.as_deref(), Some(first.as_str()));

    // Building, then pushed: the digested image becomes the MachineOSConfig's, the ConfigMaps go.
    let pod = job_pod(&client, &first).await;
    set_pod(&client, &pod, "Running", json!({"running": {}})).await;
    build_in(&client, &first, Phase::Building).await;
    let image = "registry.example.com:5000/org/layered@sha256:aaaa";
    set_pod(&client, &pod, "Succeeded", terminated(0, image)).await;
    let done = build_in(&client, &first, Phase::Succeeded).await;
    let status = done.status.unwrap();
    assert_eq!(status.digested_image_push_spec.as_deref(), Some(image));
    assert!(status.build_end.is_some());
    let published = eventually("the MachineOSConfig's current image", || async {
        let status = configs.get(POOL).await.unwrap().status.unwrap_or_default();
        satisfying(status, |s| s.current_image_pull_spec.as_deref() == Some(image))
    })
    .await;
    assert_eq!(published.machine_os_build.unwrap().name, first);
    eventually("the succeeded build's ConfigMaps deleted", || async {
        satisfying(config_maps(&client, &first).await, Vec::is_empty)
    })
    .await;

    // A new rendered config: a new build; a new Containerfile while it runs: another, and the
    // running one is interrupted (its Job deleted). The succeeded one stays meanwhile.
    set_rendered(&client, "rendered-layered-2").await;
    let second = eventually("a build of the new rendered config", || async {
        satisfying(expected_build(&client).await, |n| *n != first)
    })
    .await;
    build_in(&client, &second, Phase::Prepared).await;
    let pod = job_pod(&client, &second).await;
    set_pod(&client, &pod, "Running", json!({"running": {}})).await;
    build_in(&client, &second, Phase::Building).await;
    // Its Job deleted by hand: the build gets a new one and goes on.
    let jobs = Api::<Job>::namespaced(client.clone(), NS);
    let job_uid = jobs.get(&format!("build-{second}")).await.unwrap().uid();
    // As kubectl deletes (no garbage collector runs here to finish an orphaning delete).
    let background = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    jobs.delete(&format!("build-{second}"), &background).await.unwrap();
    eventually("a new Job for the build whose Job was deleted", || async {
        let job = jobs.get_opt(&format!("build-{second}")).await.unwrap();
        satisfying(job.and_then(|j| j.uid()), |uid| uid.is_some() && *uid != job_uid)
    })
    .await;
    let failing = "FROM configs AS final\nRUN exit 1";
    configs
        .patch(POOL, &PatchParams::default(), &Patch::Merge(json!({"spec": {"containerFile": [{"content": failing}]}})))
        .await
        .unwrap();
    let third = eventually("a build of the new Containerfile", || async {
        satisfying(expected_build(&client).await, |n| *n != second)
    })
    .await;
    build_in(&client, &second, Phase::Interrupted).await;
    eventually("the interrupted build's Job deleted", || async {
        let job = jobs.get_opt(&format!("build-{second}")).await.unwrap();
        satisfying(job.map(|j| j.metadata.deletion_timestamp.is_some()), |gone| gone.is_none_or(|d| d))
    })
    .await;
    assert_eq!(
        phase_of(&Api::<MachineOSBuild>::all(client.clone()).get(&first).await.unwrap()),
        Some(Phase::Succeeded)
    );

    // The builder fails: the build says what failed, so does the pool, naming the build.
    let pod = job_pod(&client, &third).await;
    let step = "STEP 3/5: RUN exit 1\nerror building at STEP \"RUN exit 1\": exit status 1";
    set_pod(&client, &pod, "Failed", terminated(1, step)).await;
    let failed = build_in(&client, &third, Phase::Failed).await;
    assert_eq!(condition_message(&failed, "Failed"), format!("Build Failed: {step}"));
    eventually("the failed build's ConfigMaps deleted (they hold the rendered config)", || async {
        satisfying(config_maps(&client, &third).await, Vec::is_empty)
    })
    .await;
    let pools = Api::<MachineConfigPool>::all(client.clone());
    let degraded = eventually("the pool's ImageBuildDegraded", || async {
        let pool = pools.get(POOL).await.unwrap();
        let conditions = pool.status.and_then(|s| s.conditions).unwrap_or_default();
        let c = conditions.into_iter().find(|c| c.type_ == "ImageBuildDegraded");
        satisfying(c, |c| c.as_ref().is_some_and(|c| c.status == "True"))
    })
    .await
    .unwrap();
    assert_eq!(degraded.reason.as_deref(), Some("BuildFailed"));
    assert_eq!(
        degraded.message.as_deref(),
        Some(
            format!("Failed to build OS image for pool {POOL} (MachineOSBuild: {third}): Failed: Build Failed: {step}")
                .as_str()
        )
    );

    // The rebuild annotation: the failed build is deleted and made again, the annotation removed.
    let failed_uid = failed.uid().unwrap();
    configs
        .patch(
            POOL,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {REBUILD_ANNOTATION: ""}}})),
        )
        .await
        .unwrap();
    let builds = Api::<MachineOSBuild>::all(client.clone());
    let again = eventually("the failed build made again", || async {
        let build = builds.get_opt(&third).await.unwrap();
        satisfying(build, |b| {
            b.as_ref().is_some_and(|b| b.uid().as_ref() != Some(&failed_uid) && phase_of(b) == Some(Phase::Prepared))
        })
    })
    .await
    .unwrap();
    assert_eq!(again.spec.machine_config.name, "rendered-layered-2");
    eventually("the rebuild annotation removed", || async {
        let c = configs.get(POOL).await.unwrap();
        satisfying(c.annotations().contains_key(REBUILD_ANNOTATION), |present| !present)
    })
    .await;

    // Succeeding now publishes it; the ended builds before it are deleted.
    let pod = job_pod(&client, &third).await;
    let image = "registry.example.com:5000/org/layered@sha256:cccc";
    set_pod(&client, &pod, "Succeeded", terminated(0, image)).await;
    build_in(&client, &third, Phase::Succeeded).await;
    let selector = format!("{MACHINE_OS_CONFIG_LABEL}={POOL}");
    eventually("only the current build left", || async {
        let listed = builds.list(&ListParams::default().labels(&selector)).await.unwrap();
        let names: Vec<String> = listed.items.iter().map(ResourceExt::name_any).collect();
        satisfying(names, |n| *n == [third.clone()])
    })
    .await;

    // Inputs that come back while their build is interrupted: it is made again.
    let other = |content: &str| json!({"spec": {"containerFile": [{"content": content}]}});
    configs.patch(POOL, &PatchParams::default(), &Patch::Merge(other("RUN other"))).await.unwrap();
    let fourth = eventually("a build of another Containerfile", || async {
        satisfying(expected_build(&client).await, |n| *n != third)
    })
    .await;
    let interrupted = build_in(&client, &fourth, Phase::Prepared).await.uid();
    configs.patch(POOL, &PatchParams::default(), &Patch::Merge(other(failing))).await.unwrap();
    build_in(&client, &fourth, Phase::Interrupted).await;
    configs.patch(POOL, &PatchParams::default(), &Patch::Merge(other("RUN other"))).await.unwrap();
    eventually("the interrupted build made again", || async {
        let build = builds.get_opt(&fourth).await.unwrap();
        let seen = build.as_ref().map(|b| (b.uid(), phase_of(b)));
        satisfying(seen, |s| {
            s.as_ref().is_some_and(|(uid, phase)| *uid != interrupted && *phase == Some(Phase::Prepared))
        })
    })
    .await;

    // The build deleted by hand: made again under its name, with a Job of its own (the one of
    // the deleted build is not taken for it; no garbage collector runs here to remove it).
    let deleted = builds.get(&fourth).await.unwrap().uid().unwrap();
    eventually("the recreated build's Job", || async {
        jobs.get_opt(&format!("build-{fourth}")).await.unwrap().ok_or(())
    })
    .await;
    builds.delete(&fourth, &Default::default()).await.unwrap();
    eventually("the build made again, Prepared, with a Job of its own", || async {
        let build = builds.get_opt(&fourth).await.unwrap().filter(|b| b.uid().as_ref() != Some(&deleted));
        let job = jobs.get_opt(&format!("build-{fourth}")).await.unwrap();
        let job_owner = job.as_ref().and_then(|j| j.owner_references().first().map(|o| o.uid.clone()));
        let seen = (build.as_ref().map(|b| (b.uid(), phase_of(b))), job_owner);
        satisfying(seen, |(build, job_owner)| {
            build.as_ref().is_some_and(|(uid, phase)| uid == job_owner && *phase == Some(Phase::Prepared))
        })
    })
    .await;

    // A MachineOSConfig whose push Secret does not exist: its build fails at once, no Job.
    configs.delete(POOL, &Default::default()).await.unwrap();
    create(&client, &machine_os_config("absent", "RUN true")).await;
    let missing = eventually("a build of the MachineOSConfig with a missing Secret", || async {
        satisfying(expected_build(&client).await, |n| *n != fourth)
    })
    .await;
    let failed = build_in(&client, &missing, Phase::Failed).await;
    assert_eq!(condition_message(&failed, "Failed"), format!("Build Failed: Secret {NS}/absent does not exist"));
    assert!(jobs.get_opt(&format!("build-{missing}")).await.unwrap().is_none(), "no Job for a build that cannot push");
}
