//! Leader election with real Lease objects (mco-testenv): one holder at a time, hand-over on
//! release, take-over on expiry.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use mco_controller::leader::{LeaderElector, Timing};
use mco_testenv::TestEnv;

const NAMESPACE: &str = "openshift-machine-config-operator";
const LEASE: &str = "machine-config-controller";

fn timing() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(200),
    }
}

fn candidate(client: &Client, identity: &str) -> LeaderElector {
    LeaderElector::new(client.clone(), NAMESPACE, LEASE, identity, timing())
}

async fn holder(client: &Client) -> Option<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE).get(LEASE).await.unwrap();
    lease.spec?.holder_identity
}

#[tokio::test]
async fn one_leader_at_a_time() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let namespace =
        Namespace { metadata: ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();

    let a = candidate(&client, "a");
    let b = candidate(&client, "b");
    a.acquire().await;
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // While a renews, b waits well past the lease duration.
    let a_holding = tokio::spawn(async move {
        let lost = a.hold().await;
        panic!("a lost the lease while renewing: {lost}");
    });
    let b_waits = tokio::time::timeout(timing().lease_duration * 2, b.acquire()).await;
    assert!(b_waits.is_err(), "b became leader while a renewed");
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // a stops renewing (a crash): b takes over once the lease expires.
    a_holding.abort();
    tokio::time::timeout(timing().lease_duration * 3, b.acquire()).await.expect("b takes over an expired lease");
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE).get(LEASE).await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("b"));
    assert_eq!(lease.lease_transitions, Some(1));

    // b releases: c takes over without waiting for expiry.
    b.release().await.unwrap();
    assert_eq!(holder(&client).await.as_deref(), Some(""));
    let c = candidate(&client, "c");
    tokio::time::timeout(timing().retry_period * 3, c.acquire()).await.expect("c takes over a released lease at once");
    assert_eq!(holder(&client).await.as_deref(), Some("c"));
    let c_holding = tokio::spawn(async move { c.hold().await });

    // a, back from the dead, finds the lease taken and its hold ends at the renew deadline.
    let a = candidate(&client, "a");
    let lost = tokio::time::timeout(timing().renew_deadline * 3, a.hold()).await.expect("a notices it lost");
    assert!(lost.to_string().contains("held by c"), "{lost}");
    assert!(!c_holding.is_finished(), "c kept the lease");
}
