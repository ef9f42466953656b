//! Two OS streams (upstream's OSImageStream): pools on different streams side by side.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use mco_api::constants::{MASTER_POOL, WORKER_POOL};
use mco_api::{MachineConfigPool, OSImageStream};
use mco_testenv::{eventually, satisfying};
use serde_json::json;

use crate::common::{stderr, stdout};
use crate::support::*;

pub async fn each_pool_rolls_out_on_its_os_stream(lab: &mut Lab) {
    let client = lab.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let mut current = rolled_out(lab, "").await;
    let lab_status = lab.status();
    // Two OS streams (upstream's OSImageStream): mco's controller found the release's streams by
    // its images' labels, and every pool renders from the default one. The worker pool names the
    // other stream while both pools roll out a change side by side: the workers reboot into that
    // stream's image while the master pool stays on the default, each pool rendered from and
    // reporting its own stream. Naming none brings the workers back.
    let streams: Api<OSImageStream> = Api::all(client.clone());
    let stream = eventually("the OSImageStream with the lab's two streams", || async {
        let stream = streams.get_opt("cluster").await.unwrap();
        let names = stream.as_ref().and_then(|s| s.status.as_ref()).map(|s| {
            let names: Vec<&str> = s.available_streams.iter().map(|set| set.name.as_str()).collect();
            (names.join(","), s.default_stream.clone())
        });
        if names == Some(("rhel-10,rhel-9".into(), "rhel-9".into())) { Ok(stream.unwrap()) } else { Err(names) }
    })
    .await;
    let sets = stream.status.unwrap().available_streams;
    assert_eq!(sets[1].os_image, lab_status["osImage"].as_str().unwrap(), "the default stream runs the lab's image");
    let pool_streams = || async {
        let pools = Api::<MachineConfigPool>::all(client.clone());
        let stream_of = |pool: MachineConfigPool| pool.status.and_then(|s| s.os_image_stream).map(|r| r.name);
        (stream_of(pools.get(MASTER_POOL).await.unwrap()), stream_of(pools.get(WORKER_POOL).await.unwrap()))
    };
    eventually("both pools reporting the default stream", || async {
        satisfying(pool_streams().await, |s| *s == (Some("rhel-9".into()), Some("rhel-9".into())))
    })
    .await;
    let configs = Api::<mco_api::MachineConfig>::all(client.clone());
    let master_config = target(&Api::<MachineConfigPool>::all(client.clone()).get(MASTER_POOL).await.unwrap());
    let stream_file = "/etc/lab/stream";
    lab.apply("99-master-stream", &role_files_mc("master", "99-master-stream", &[(stream_file, "master\n")]));
    lab.apply("99-worker-stream", &files_mc("99-worker-stream", &[(stream_file, "worker\n")]));
    set_pool(&client, json!({"osImageStream": {"name": "rhel-10"}})).await;
    // The file and the stream may be rendered together or one after the other: the rollout that
    // counts is the one to the config with the stream's image.
    loop {
        current = rolled_out(lab, &current).await;
        if configs.get(&current).await.unwrap().spec.os_image_url == sets[0].os_image {
            break;
        }
    }
    let master_config = master_rolled_out(&client, &master_config).await;
    let rendered = configs.get(&current).await.unwrap();
    assert_eq!(rendered.spec.base_os_extensions_container_image, sets[0].os_extensions_image);
    assert_eq!(
        configs.get(&master_config).await.unwrap().spec.os_image_url,
        sets[1].os_image,
        "the master pool renders from rhel-9"
    );
    workers_report_os(lab, |os| os == mco_lab::images::OTHER_STREAM_OS).await;
    eventually("the worker pool on rhel-10, the master pool on rhel-9", || async {
        satisfying(pool_streams().await, |s| *s == (Some("rhel-9".into()), Some("rhel-10".into())))
    })
    .await;
    let master_root = node_root(lab, MASTER);
    assert_eq!(read(&mco_apply::fsutil::host_path(&master_root, stream_file).unwrap()), "master\n");
    for root in worker_roots(lab) {
        assert_eq!(read(&mco_apply::fsutil::host_path(&root, stream_file).unwrap()), "worker\n");
    }
    // A new machine of the pool booted from the lab's (RHEL 9) boot image cannot pivot to RHEL 10:
    // the server refuses its config, saying why (after the master pool's rollout: the server on
    // master-0 is down while master-0 reboots).
    let add = lab.mco(&["lab", "add-node", "--name", "worker-9"]);
    let said = stdout(&add);
    assert_eq!(add.get_output().status.code(), Some(1), "{said}\n{}", stderr(&add));
    let why = format!(
        "node worker-9 did not join: the Machine Config Server answered 403 Forbidden: refusing to serve the config \
         of pool worker: this machine's boot image version is {boot}: boot image is of another RHEL major: RHCOS boot \
         image version {boot}(RHEL version: 9.6) cannot pivot to the pool's OS stream rhel-10 (RHEL 10)",
        boot = mco_lab::images::BOOT_VERSION
    );
    assert!(said.contains(&why), "{said}");
    assert!(nodes.get_opt("worker-9").await.unwrap().is_none());
    set_pool(&client, json!({"osImageStream": null})).await;
    rolled_out(lab, &current).await;
    workers_report_os(lab, |os| os != mco_lab::images::OTHER_STREAM_OS).await;
    eventually("both pools back on the default stream", || async {
        satisfying(pool_streams().await, |s| *s == (Some("rhel-9".into()), Some("rhel-9".into())))
    })
    .await;
}
