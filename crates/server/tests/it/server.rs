//! The server over real sockets: status codes, negotiation, bodies, hot reload, TLS with real
//! certificates, and misbehaving clients. The bootstrap fixture is `testdata/bootstrap`
//! (regenerate with `testdata/regenerate.sh`).

use crate::common;

use std::time::Duration;

use common::*;
use mco_server::Limits;
use mco_server::serve::{
    ENCAPSULATED_PATH, KUBECONFIG_PATH, KUBELET_CA_PATH, MACHINE_CONFIG_CONTENT_PATH, NODE_ANNOTATIONS_PATH,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn rendered_name() -> String {
    let pool = std::fs::read_to_string(fixture().join("machine-pools/master.yaml")).unwrap();
    pool.lines().find_map(|l| l.trim().strip_prefix("name: rendered-")).map(|n| format!("rendered-{n}")).unwrap()
}

fn files(body: &Value) -> Vec<&Value> {
    body["storage"]["files"].as_array().unwrap().iter().collect()
}

fn decode(file: &Value) -> Vec<u8> {
    mco_ignition::dataurl::decode(file["contents"]["source"].as_str().unwrap()).unwrap().data
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_code_matrix() {
    let dir = fixture_copy();
    // A pool the bootstrap server must refuse, and a pool whose rendered config is missing.
    let worker = std::fs::read_to_string(dir.path().join("machine-pools/master.yaml")).unwrap();
    std::fs::write(dir.path().join("machine-pools/worker.yaml"), worker.replace("name: master", "name: worker"))
        .unwrap();
    std::fs::write(
        dir.path().join("machine-pools/arbiter.yaml"),
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: arbiter}\nstatus: {configuration: {name: rendered-arbiter-missing}}\n",
    )
    .unwrap();
    let addr = start(dir.path(), Limits::default(), None).await;

    let v33 = format!("{IGN};version=3.3.0, */*;q=0.1");
    for (method, path, accept, want) in [
        ("GET", "/healthz", None, 200),
        ("HEAD", "/healthz", None, 200),
        ("POST", "/healthz", None, 405),
        ("GET", "/", None, 404),
        ("GET", "/config", None, 404),
        ("GET", "/machine-pools/master.yaml", None, 404),
        ("DELETE", "/", None, 405),
        ("GET", "/config/master", None, 200),
        ("HEAD", "/config/master", None, 200),
        ("GET", "/config/master", Some(v33.as_str()), 200),
        ("POST", "/config/master", None, 405),
        ("PUT", "/config/master", None, 405),
        ("DELETE", "/config/master", None, 405),
        ("OPTIONS", "/config/master", None, 405),
        ("GET", "/config/", None, 400),
        ("GET", "/config/..", None, 400),
        ("GET", "/config/../machine-pools/master.yaml", None, 400),
        ("GET", "/config/..%2fmachine-pools%2fmaster", None, 400),
        ("GET", "/config/%2e%2e%2fmaster", None, 400),
        ("GET", "/config/x/master", None, 400),
        ("GET", "/config/master%00", None, 400),
        ("GET", "/config/nosuchpool", None, 404),
        ("GET", "/config/arbiter", None, 404),
        ("GET", "/config/worker", None, 500),
        ("GET", "/config/master", Some(&format!("{IGN};version=4.0.0")), 400),
        ("GET", "/config/master", Some(&format!("{IGN};version=2.1.0")), 400),
        ("GET", "/config/master", Some(&format!("{IGN};version=3.0.0")), 500),
        ("GET", "/config/master", Some("garbage;;;==,,/"), 200),
    ] {
        let headers: Vec<(&str, &str)> = accept.map(|a| vec![("Accept", a)]).unwrap_or_default();
        let r = send(addr, &request(method, path, &headers)).await;
        assert_eq!(r.status, want, "{method} {path} Accept: {accept:?}");
        if want != 200 || path == "/healthz" {
            assert_eq!(r.header("content-length"), Some("0"), "{method} {path}");
            assert!(r.body.is_empty());
        }
    }

    let get = get(addr, "/config/master", None).await;
    assert_eq!(get.header("content-type"), Some("application/json"));
    assert_eq!(get.header("content-length").unwrap(), get.body.len().to_string());
    let head = send(addr, &request("HEAD", "/config/master", &[])).await;
    assert_eq!(head.header("content-length").unwrap(), get.body.len().to_string(), "HEAD announces the GET length");
    assert_eq!(head.header("content-type"), Some("application/json"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_for_every_version() {
    let addr = start(&fixture(), Limits::default(), None).await;
    let name = rendered_name();
    let no_accept = get(addr, "/config/master", None).await.json();
    assert_eq!(no_accept["ignition"]["version"], "2.2.0", "clients without an Ignition Accept get 2.2.0");

    for (asked, served) in [
        ("3.1.0", "3.1.0"),
        ("3.2.0", "3.2.0"),
        ("3.3.0", "3.3.0"),
        ("3.4.0", "3.4.0"),
        ("3.5.0", "3.5.0"),
        ("3.9.0", "3.5.0"),
        ("3.2.1", "3.2.0"),
        ("2.4.0", "2.2.0"),
    ] {
        let r = get(addr, "/config/master", Some(&format!("{IGN};version={asked}, */*;q=0.1"))).await;
        assert_eq!(r.status, 200, "{asked}");
        let body = r.json();
        assert_eq!(body["ignition"]["version"], served, "{asked}");
        let files = files(&body);
        let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
        let n = paths.len();
        assert_eq!(
            &paths[n - 6..],
            [
                KUBELET_CA_PATH,
                NODE_ANNOTATIONS_PATH,
                KUBECONFIG_PATH,
                MACHINE_CONFIG_CONTENT_PATH,
                &format!("/etc/docker/certs.d/{REGISTRY_HOST}/ca.crt"),
                ENCAPSULATED_PATH,
            ],
            "{asked}: appended files in upstream order"
        );
        assert!(paths.contains(&"/etc/chrony.conf") && paths.contains(&"/usr/local/bin/master-helper.sh"));
        let seed: Value = serde_json::from_slice(&decode(files[n - 5])).unwrap();
        assert_eq!(seed["machineconfiguration.openshift.io/currentConfig"], name.as_str());
        assert_eq!(seed["machineconfiguration.openshift.io/state"], "Done");
        assert_eq!(decode(files[n - 4]), std::fs::read(fixture().join("kubeconfig")).unwrap());
        assert_eq!(decode(files[n - 2]), std::fs::read(fixture().join("registry-ca.crt")).unwrap());
        let encapsulated: Value = serde_json::from_slice(&decode(files[n - 1])).unwrap();
        assert_eq!(encapsulated["metadata"]["name"], name.as_str());
        assert_eq!(encapsulated["spec"]["config"], serde_json::json!({"ignition": {"version": "3.5.0"}}));
        // Ignition kernel arguments stay in Ignition from 3.3 on, and move into the
        // MachineConfig below.
        let kargs = encapsulated["spec"]["kernelArguments"].clone();
        if served.starts_with("3.1") || served.starts_with("3.2") || served.starts_with("2.") {
            assert!(body.get("kernelArguments").is_none(), "{asked}");
            assert_eq!(kargs, serde_json::json!(["nosmt", "systemd.unified_cgroup_hierarchy=1"]), "{asked}");
        } else {
            assert_eq!(
                body["kernelArguments"]["shouldExist"],
                serde_json::json!(["systemd.unified_cgroup_hierarchy=1"])
            );
            assert_eq!(kargs, serde_json::json!(["nosmt"]), "{asked}");
        }
    }
}

/// The real `ignition-validate` (Debian's Ignition 2.14, which knows specs up to 3.3) accepts
/// every body served for 3.1-3.3, and a 2.2 body parses as spec 2.2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignition_validate_accepts_served_bodies() {
    let validate = which("ignition-validate")
        .expect("ignition-validate is not on PATH: install Debian's `ignition` package (hack/setup.sh does)");
    let addr = start(&fixture(), Limits::default(), None).await;
    let dir = tempfile::tempdir().unwrap();
    for version in ["3.1.0", "3.2.0", "3.3.0"] {
        let body = get(addr, "/config/master", Some(&format!("{IGN};version={version}"))).await.body;
        let path = dir.path().join(format!("{version}.ign"));
        std::fs::write(&path, &body).unwrap();
        let out = std::process::Command::new(&validate).arg(&path).output().unwrap();
        assert!(
            out.status.success(),
            "ignition-validate refused the {version} body: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let body = get(addr, "/config/master", None).await.body;
    let parsed = mco_ignition::parse(&body).unwrap();
    assert!(matches!(parsed.config, mco_ignition::AnyConfig::V2(_)), "a 2.2 body parses as spec 2.2");
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| std::path::Path::new(d).join(name)).find(|p| p.is_file())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_on_disk_are_served_at_once() {
    let dir = fixture_copy();
    let addr = start(dir.path(), Limits::default(), None).await;
    let v35 = format!("{IGN};version=3.5.0");
    let before = get(addr, "/config/master", Some(&v35)).await.json();

    // A new rendered config, and the pool switched to it by an atomic rename.
    let name = rendered_name();
    let mc_dir = dir.path().join("machine-configs");
    let mc = std::fs::read_to_string(mc_dir.join(format!("{name}.yaml"))).unwrap();
    let new_mc = mc.replace(&name, "rendered-master-new").replace("hello%20from%20master", "hello%20again");
    assert_ne!(mc, new_mc);
    std::fs::write(mc_dir.join("rendered-master-new.yaml"), new_mc).unwrap();
    let pool_path = dir.path().join("machine-pools/master.yaml");
    let pool = std::fs::read_to_string(&pool_path).unwrap();
    replace(&pool_path, pool.replace(&name, "rendered-master-new").as_bytes());
    let after = get(addr, "/config/master", Some(&v35)).await.json();
    assert_ne!(before, after);
    let helper = files(&after).into_iter().find(|f| f["path"] == "/usr/local/bin/master-helper.sh").unwrap();
    assert_eq!(decode(helper), b"#!/bin/bash\nset -euo pipefail\necho \"hello again\" >&2\n");

    // The kubeconfig is re-read too (in place, same size: the mtime tells).
    let kubeconfig = std::fs::read_to_string(dir.path().join("kubeconfig")).unwrap();
    std::fs::write(dir.path().join("kubeconfig"), kubeconfig.replace("kubelet", "kubelex")).unwrap();
    let body = get(addr, "/config/master", Some(&v35)).await.json();
    let kc = files(&body).into_iter().find(|f| f["path"] == KUBECONFIG_PATH).unwrap();
    assert!(String::from_utf8(decode(kc)).unwrap().contains("kubelex"));

    // A pool that disappears is not found any more.
    std::fs::remove_file(&pool_path).unwrap();
    assert_eq!(get(addr, "/config/master", Some(&v35)).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_do_not_hurt_the_server() {
    let limits = Limits { header_read_timeout: Duration::from_millis(500), ..Limits::default() };
    let addr = start(&fixture(), limits, None).await;

    // A large but legal Accept header is parsed; an oversized head is refused with 431.
    let big = format!("{}{IGN};version=3.3.0", "text/plain;q=0.5, ".repeat(500));
    assert!(big.len() > 8000 && big.len() < 15000);
    let r = get(addr, "/config/master", Some(&big)).await;
    assert_eq!((r.status, r.json()["ignition"]["version"].as_str()), (200, Some("3.3.0")));
    let huge = "x".repeat(64 * 1024);
    let r = send(addr, &request("GET", "/config/master", &[("Accept", &huge)])).await;
    assert_eq!(r.status, 431);

    // Garbage instead of HTTP.
    let r = send(addr, "\x16\x03\x01\x02\x00hello\r\n\r\n").await;
    assert_eq!(r.status, 400);
    let r = send(addr, "GET /config/master HTTP/1.1\r\nHost: test\r\nAccept\r\n\r\n").await;
    assert_eq!(r.status, 400);

    // A client that never finishes its request head is disconnected.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /config/master HTTP/1.1\r\nHost: te").await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the slow client must be disconnected");
    // An idle connection is closed too.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(30), idle.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the idle client must be disconnected");

    // Keep-alive: several requests on one connection, and the server still serves.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    for _ in 0..3 {
        let r = exchange(&mut stream, &request("GET", "/config/master", &[("Accept", IGN)]), false).await.unwrap();
        assert_eq!(r.status, 200);
    }
    assert_eq!(get(addr, "/healthz", None).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_real_certificates_and_reload() {
    let certs = tempfile::tempdir().unwrap();
    let ca = write_certs(certs.path());
    let config = mco_server::tls::server_config(certs.path().join("tls.crt"), certs.path().join("tls.key")).unwrap();
    let limits = Limits { handshake_timeout: Duration::from_millis(500), ..Limits::default() };
    let addr = start(&fixture(), limits, Some(config)).await;

    let mut tls = tls_connect(addr, &ca).await.unwrap();
    let accept = format!("{IGN};version=3.3.0, */*;q=0.1");
    let r = exchange(&mut tls, &request("GET", "/config/master", &[("Accept", &accept)]), false).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["ignition"]["version"], "3.3.0");
    assert_eq!(tls.get_ref().1.alpn_protocol(), None, "no ALPN asked, none chosen");

    // A client trusting another CA refuses the server; the server carries on.
    let other_ca = mco_server::certs::generate(&["127.0.0.1".to_string()]).unwrap().ca_cert;
    let err = tls_connect(addr, &other_ca).await.unwrap_err();
    assert!(err.to_string().contains("UnknownIssuer") || err.to_string().contains("invalid peer certificate"), "{err}");
    // Plain HTTP on the TLS port gets nowhere, and a silent client is dropped.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    assert!(exchange(&mut plain, &request("GET", "/healthz", &[]), false).await.is_none());
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut buf = Vec::new();
    assert!(tokio::time::timeout(Duration::from_secs(30), silent.read_to_end(&mut buf)).await.is_ok());

    // A rotated certificate (new CA) is used from the next handshake; the old CA no longer works.
    let new_ca = write_certs(certs.path());
    let mut tls = tls_connect(addr, &new_ca).await.unwrap();
    let r = exchange(&mut tls, &request("GET", "/healthz", &[]), false).await.unwrap();
    assert_eq!(r.status, 200);
    assert!(tls_connect(addr, &ca).await.is_err());

    // A broken replacement keeps the working certificate.
    replace(&certs.path().join("tls.crt"), b"not a certificate");
    let mut tls = tls_connect(addr, &new_ca).await.unwrap();
    assert_eq!(exchange(&mut tls, &request("GET", "/healthz", &[]), false).await.unwrap().status, 200);
}

#[test]
fn tls_refuses_mismatched_key_at_start() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    write_certs(a.path());
    write_certs(b.path());
    let err = mco_server::tls::server_config(a.path().join("tls.crt"), b.path().join("tls.key")).unwrap_err();
    assert!(format!("{err:#}").contains("the key does not fit the certificate"), "{err:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_share_one_build() {
    // 64 clients ask for a config nobody asked for yet: all get the same bytes.
    let addr = start(&fixture(), Limits::default(), None).await;
    let accept = format!("{IGN};version=3.2.0");
    let responses = futures_join(64, || {
        let accept = accept.clone();
        async move { get(addr, "/config/master", Some(&accept)).await }
    })
    .await;
    let first = &responses[0].body;
    assert!(responses.iter().all(|r| r.status == 200 && &r.body == first));
}

async fn futures_join<F, Fut>(n: usize, f: F) -> Vec<Response>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Response> + Send + 'static,
{
    let handles: Vec<_> = (0..n).map(|_| tokio::spawn(f())).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_disconnected() {
    let limits = Limits {
        write_stall_timeout: Duration::from_millis(500),
        header_read_timeout: Duration::from_secs(120),
        ..Limits::default()
    };
    let addr = start(&fixture(), limits, None).await;
    let body_len = get(addr, "/config/master", None).await.body.len();
    // Enough pipelined requests that the responses overflow every socket buffer on the way.
    let requests = 64 * 1024 * 1024 / body_len;
    let (mut reader, mut writer) = TcpStream::connect(addr).await.unwrap().into_split();
    let pipelined = request("GET", "/config/master", &[]).repeat(requests);
    // The writing half stays open (the task returns it): the client never says it is done.
    let sender = tokio::spawn(async move { writer.write_all(pipelined.as_bytes()).await.map(|()| writer) });
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The server gave up on the connection: reading what is left ends (EOF or reset) instead of
    // receiving all responses and then waiting for the next request.
    let mut received = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(20), reader.read_to_end(&mut received)).await;
    assert!(ended.is_ok(), "the stalled connection was kept open");
    assert!(received.len() < requests * body_len, "every response was sent");
    sender.abort();
    assert_eq!(get(addr, "/healthz", None).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_right_under_a_small_cache_cap() {
    // Room for about one body: every version asked in turn evicts the previous one.
    let one_body = get(start(&fixture(), Limits::default(), None).await, "/config/master", None).await.body.len();
    let cache = std::sync::Arc::new(mco_server::BodyCache::new(one_body * 3 / 2));
    let certs = [format!("{REGISTRY_HOST}=registry-ca.crt")];
    let source =
        mco_server::BootstrapSource::new(fixture(), fixture().join("kubeconfig"), &certs, cache.clone()).unwrap();
    let addr = serve(source, Limits::default(), None, Default::default()).await;
    for round in 0..2 {
        for version in ["2.2.0", "3.1.0", "3.3.0", "3.5.0"] {
            let r = get(addr, "/config/master", Some(&format!("{IGN};version={version}"))).await;
            assert_eq!((r.status, r.json()["ignition"]["version"].as_str()), (200, Some(version)), "{round}");
            assert!(cache.bytes() <= one_body * 3 / 2, "{} cached bytes", cache.bytes());
            assert!(cache.bytes() > 0);
        }
    }
}
