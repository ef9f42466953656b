//! The AMI owner lookup (our EC2 Query API client) against a real EC2-compatible server (`moto_server`
//! from PyPI, installed by `hack/moto.sh`), alone and inside the controller on an AWS cluster.
//!
//! moto serves the AMIs of a JSON file (`MOTO_AMIS_PATH`) with the owners given there, which is
//! how Red Hat and AWS Marketplace AMIs exist in it; AMIs the test registers are owned by
//! moto's default account, as a customer's own image would be.

use crate::common;

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Cluster, eventually, machineset, satisfying};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use kube::api::PostParams;
use mco_api::constants::MACHINE_API_NAMESPACE;
use mco_bootimage::ec2::{AWS_MARKETPLACE_OWNER_ID, AmiOwner, RED_HAT_OWNER_ID};
use mco_bootimage::{Arch, Stream};
use mco_bootimage_controller::Options;
use mco_bootimage_controller::ec2::{Client, StaticCredentials, client, describe_owner};
use serde_json::json;

/// The 4.11 x86_64 us-east-1 RHCOS AMI the AWS fixture MachineSet boots.
const RED_HAT_AMI: &str = "ami-052ef3d8b962bffa1";
const MARKETPLACE_AMI: &str = "ami-0a1b2c3d4e5f60718";
const MARKETPLACE_NAME: &str = "rhcos-x86_64-415.92.202311241643-0-59ead7de-2540-4653-a8b0-fa7926d5c845";
/// moto's default account: the owner of AMIs registered through its API.
const MOTO_ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

/// A running `moto_server`, killed on drop.
struct Moto {
    child: Child,
    url: String,
    _amis: tempfile::TempDir,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MCO_MOTO_SERVER") {
        return path.into();
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../hack/moto.sh");
    let out = Command::new("bash").arg(&script).stderr(Stdio::inherit()).output().expect("running hack/moto.sh");
    assert!(out.status.success(), "hack/moto.sh failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn ami(id: &str, name: &str, owner: &str) -> serde_json::Value {
    json!({
        "ami_id": id, "name": name, "description": name, "owner_id": owner, "public": true,
        "virtualization_type": "hvm", "architecture": "x86_64", "state": "available", "platform": null,
        "image_type": "machine", "hypervisor": "xen", "root_device_name": "/dev/xvda",
        "root_device_type": "ebs", "sriov": "simple", "creation_date": "2023-11-24T16:43:00.000Z",
    })
}

fn start_moto() -> Moto {
    let amis = tempfile::tempdir().unwrap();
    let path = amis.path().join("amis.json");
    let listed = json!([
        ami(RED_HAT_AMI, "rhcos-411.86.202205051017-0-x86_64", RED_HAT_OWNER_ID),
        ami(MARKETPLACE_AMI, MARKETPLACE_NAME, AWS_MARKETPLACE_OWNER_ID),
    ]);
    std::fs::write(&path, serde_json::to_vec(&listed).unwrap()).unwrap();
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port();
    let child = Command::new(moto_binary())
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .env("MOTO_AMIS_PATH", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting moto_server");
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        assert!(Instant::now() < deadline, "moto_server did not listen on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Moto { child, url: format!("http://127.0.0.1:{port}"), _amis: amis }
}

fn credentials() -> StaticCredentials {
    StaticCredentials { access_key_id: "AKIAMCOTEST".into(), secret_access_key: "not-a-secret".into() }
}

/// Registers an AMI through the API: moto makes the caller's account its owner.
async fn register_custom_ami(ec2: &Client) -> String {
    let run =
        ec2.call("RunInstances", &[("ImageId", RED_HAT_AMI), ("MinCount", "1"), ("MaxCount", "1")]).await.unwrap();
    let instance = run.text_at(&["instancesSet", "item", "instanceId"]).unwrap();
    let image = ec2.call("CreateImage", &[("InstanceId", instance), ("Name", "golden-rhcos")]).await.unwrap();
    image.text_at(&["imageId"]).unwrap().to_string()
}

#[tokio::test]
async fn describe_images_classifies_owners() {
    let moto = start_moto();
    let ec2 = client(REGION, &credentials(), Some(&moto.url));
    assert_eq!(describe_owner(&ec2, RED_HAT_AMI, REGION).await.unwrap(), AmiOwner::RedHat);
    assert_eq!(
        describe_owner(&ec2, MARKETPLACE_AMI, REGION).await.unwrap(),
        AmiOwner::Marketplace { name: MARKETPLACE_NAME.into() }
    );
    let custom = register_custom_ami(&ec2).await;
    assert_eq!(describe_owner(&ec2, &custom, REGION).await.unwrap(), AmiOwner::Other { owner_id: MOTO_ACCOUNT.into() });
    let missing = describe_owner(&ec2, "ami-0123456789abcdef0", REGION).await.unwrap_err();
    assert_eq!((missing.ami.as_str(), missing.region.as_str()), ("ami-0123456789abcdef0", REGION));
    assert!(missing.message.contains("DescribeImages"), "{missing}");
}

fn set_ami(ms: &mut mco_api::MachineSet, ami: &str) {
    ms.provider_spec_mut().unwrap()["ami"] = json!({"id": ami});
}

fn ami_of(ms: &mco_api::MachineSet) -> Option<String> {
    ms.provider_spec().unwrap()["ami"]["id"].as_str().map(str::to_string)
}

#[tokio::test]
async fn controller_replaces_only_red_hat_amis() {
    let moto = start_moto();
    let custom = register_custom_ami(&client(REGION, &credentials(), Some(&moto.url))).await;
    let mut cluster = Cluster::start("AWS", &[("4.16.0", "Completed")]).await;
    let stream_json = std::fs::read_to_string(common::testdata("rhcos-4.16-stream.json")).unwrap();
    let target = Stream::parse(stream_json.as_bytes()).unwrap().aws_image(Arch::X86_64, REGION).unwrap().ami;
    cluster.set_boot_images(&stream_json, "4.16.0").await;
    cluster.create_user_data_secret().await;
    let aws: Secret = serde_json::from_value(json!({
        "metadata": {"name": "aws-cloud-credentials", "namespace": MACHINE_API_NAMESPACE},
        "stringData": {"aws_access_key_id": "AKIAMCOTEST", "aws_secret_access_key": "not-a-secret"},
    }))
    .unwrap();
    cluster.secrets().create(&PostParams::default(), &aws).await.unwrap();

    let red_hat = cluster.create_machineset(&machineset("aws.yaml", "worker-rhcos")).await;
    let mut golden = machineset("aws.yaml", "worker-golden");
    set_ami(&mut golden, &custom);
    let golden = cluster.create_machineset(&golden).await;
    let mut paid = machineset("aws.yaml", "worker-marketplace");
    set_ami(&mut paid, MARKETPLACE_AMI);
    let paid = cluster.create_machineset(&paid).await;
    cluster.start_controller(Options {
        retry_delay: Duration::from_secs(1),
        control_plane_arch: Arch::X86_64,
        ec2_endpoint_url: Some(moto.url.clone()),
    });

    eventually("the Red Hat AMI replaced", || async {
        let ms = cluster.machinesets().get("worker-rhcos").await.unwrap();
        satisfying(ami_of(&ms), |ami| ami.as_deref() == Some(target.as_str()))
    })
    .await;
    let patched = cluster.machinesets().get("worker-rhcos").await.unwrap();
    let mut expected = red_hat.provider_spec().unwrap().clone();
    expected["ami"] = json!({"id": target});
    assert_eq!(patched.provider_spec().unwrap(), &expected);

    // The status of the sync before the patch is False too: wait for this sync's.
    let message = cluster
        .condition("BootImageUpdateProgressing", |status, message| {
            status == "False" && message.starts_with("Reconciled 1 of 3 MAPI MachineSets (2 skipped)")
        })
        .await;
    assert!(message.contains(&format!("owned by account {MOTO_ACCOUNT}, not by Red Hat")), "{message}");
    assert!(message.contains(&format!("AMI {MARKETPLACE_AMI} is an AWS Marketplace image")), "{message}");
    for before in [golden, paid] {
        let after = cluster.machinesets().get(&before.name_any()).await.unwrap();
        assert_eq!(after.resource_version(), before.resource_version());
    }
}

#[tokio::test]
async fn missing_credentials_degrade() {
    let mut cluster = Cluster::start("AWS", &[("4.16.0", "Completed")]).await;
    let stream_json = std::fs::read_to_string(common::testdata("rhcos-4.16-stream.json")).unwrap();
    cluster.set_boot_images(&stream_json, "4.16.0").await;
    let before = cluster.create_machineset(&machineset("aws.yaml", "worker-rhcos")).await;
    cluster.start_controller(Options { retry_delay: Duration::from_secs(1), ..Options::default() });
    let message = cluster.condition("BootImageUpdateDegraded", |status, _| status == "True").await;
    assert!(message.contains("secret openshift-machine-api/aws-cloud-credentials"), "{message}");
    let after = cluster.machinesets().get("worker-rhcos").await.unwrap();
    assert_eq!(after.resource_version(), before.resource_version());
}

/// The sync after a patch finds the stream's own AMI: Red Hat's by definition, so it is up to date
/// without credentials or an EC2 round trip (there is no EC2 endpoint and no secret here).
#[tokio::test]
async fn a_machineset_on_the_streams_ami_needs_no_lookup() {
    let mut cluster = Cluster::start("AWS", &[("4.16.0", "Completed")]).await;
    let stream_json = std::fs::read_to_string(common::testdata("rhcos-4.16-stream.json")).unwrap();
    let target = Stream::parse(stream_json.as_bytes()).unwrap().aws_image(Arch::X86_64, REGION).unwrap().ami;
    cluster.set_boot_images(&stream_json, "4.16.0").await;
    let mut current = machineset("aws.yaml", "worker-rhcos");
    set_ami(&mut current, &target);
    let before = cluster.create_machineset(&current).await;
    cluster.start_controller(Options { retry_delay: Duration::from_secs(1), ..Options::default() });
    let message = cluster
        .condition("BootImageUpdateProgressing", |status, message| {
            status == "False" && message.starts_with("Reconciled 1 of 1 MAPI MachineSets")
        })
        .await;
    // A failed lookup would count the MachineSet as errored: "Reconciled 0 of 1".
    assert!(!message.contains("skipped"), "{message}");
    let after = cluster.machinesets().get("worker-rhcos").await.unwrap();
    assert_eq!(after.resource_version(), before.resource_version());
}
