//! The writer against a real API server (mco-testenv): the daemon and the drain controller write
//! one MachineConfigNode's status at the same moment, and neither write undoes the other.

use std::collections::BTreeMap;

use mco_api::MachineConfigNode;
use mco_api::constants::DESIRED_CONFIG_ANNOTATION;
use mco_mcn::progress::spec_for;
use mco_mcn::{Recorder, Step};
use mco_testenv::TestEnv;
use mco_testenv::kube::Api;
use mco_testenv::kube::api::PostParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_keep_each_others_conditions() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<MachineConfigNode> = Api::all(env.client());
    let annotations: BTreeMap<String, String> =
        [(DESIRED_CONFIG_ANNOTATION.to_string(), "rendered-worker-b".to_string())].into();
    let nodes: Vec<String> = (0..12).map(|i| format!("worker-{i}")).collect();
    for node in &nodes {
        let spec = spec_for(node, "worker", &annotations);
        api.create(&PostParams::default(), &MachineConfigNode::new(node, spec)).await.unwrap();
        // The first write lists every condition; the race is between the later ones.
        assert!(Recorder::new(env.client()).record(node, &annotations, &Step::needs_update(node)).await.unwrap());
    }
    // Two writers (two clients, as the daemon's and the controller's), each node written by both at once.
    let (daemon, controller) = (Recorder::new(env.client()), Recorder::new(env.client()));
    let writes = nodes.iter().map(|node| {
        let (daemon, controller, annotations) = (&daemon, &controller, &annotations);
        async move {
            let (prepared, cordoned) = (Step::prepared(&["Reboot".into()], true), Step::cordoned(false));
            let (a, b) = tokio::join!(
                daemon.record(node, annotations, &prepared),
                controller.record(node, annotations, &cordoned),
            );
            a.and(b)
        }
    });
    for result in futures::future::join_all(writes).await {
        result.unwrap();
    }
    for node in &nodes {
        let status = api.get(node).await.unwrap().status.unwrap();
        let state: BTreeMap<String, String> =
            status.conditions.unwrap().into_iter().map(|c| (c.type_, c.status)).collect();
        assert_eq!(
            (state["UpdatePrepared"].as_str(), state["Cordoned"].as_str()),
            ("True", "True"),
            "{node}: a write undid the other's: {state:?}"
        );
    }
}
