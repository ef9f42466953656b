use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::PostParams;
use mco_metrics_auth::{Authorizer, listen, tls_config};
use mco_testenv::TestEnv;
use serde_json::json;

const NAMESPACE: &str = "openshift-machine-config-operator";

/// `curl`'s status code and body for `GET https://addr/path`, with `token` as bearer token
/// (`-k`: the certificate is self-signed).
fn scrape(addr: SocketAddr, path: &str, token: Option<&str>) -> (String, String) {
    let mut curl = Command::new("curl");
    curl.args(["-sk", "--max-time", "30", "-w", "\n%{http_code}", &format!("https://{addr}{path}")]);
    if let Some(token) = token {
        curl.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let output = curl.output().expect("running curl");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or_default();
    (code.to_string(), body.to_string())
}

async fn token(env: &TestEnv, account: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), NAMESPACE);
    let sa = serde_json::from_value(json!({"metadata": {"name": account}})).unwrap();
    accounts.create(&PostParams::default(), &sa).await.unwrap();
    let request = accounts.create_token_request(account, &PostParams::default(), &TokenRequest::default()).await;
    request.unwrap().status.unwrap().token.expect("a token")
}

#[tokio::test]
async fn metrics_are_served_to_tokens_allowed_to_get_namespace_metrics() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap())
        .await
        .unwrap();
    // Upstream's Role for its Prometheus (`namespace/metrics`, as its kube-rbac-proxy asks).
    let role = json!({"metadata": {"name": "prometheus-k8s"}, "rules": [{"apiGroups": [""], "resources": ["namespace/metrics"], "verbs": ["get"]}]});
    Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &serde_json::from_value(role).unwrap())
        .await
        .unwrap();
    let binding = json!({
        "metadata": {"name": "prometheus-k8s"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "prometheus-k8s"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": NAMESPACE}],
    });
    Api::<RoleBinding>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &serde_json::from_value(binding).unwrap())
        .await
        .unwrap();
    let (allowed, other) = (token(&env, "prometheus").await, token(&env, "nobody").await);

    let mut registry = mco_metrics::Registry::default();
    let metrics = mco_metrics::controller::ControllerMetrics::register(&mut registry);
    metrics.set_drain_failed("worker-0");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let tls = tls_config(None, &["localhost".into(), "127.0.0.1".into()]).unwrap();
    let authorizer = Arc::new(Authorizer::new(client.clone(), NAMESPACE));
    tokio::spawn(listen(port, tls, Arc::new(registry), authorizer).await.unwrap());

    let scraped = tokio::task::spawn_blocking(move || {
        [
            scrape(port, "/metrics", Some(&allowed)),
            scrape(port, "/other", Some(&allowed)),
            scrape(port, "/metrics", Some(&other)),
            scrape(port, "/metrics", None),
            scrape(port, "/metrics", Some("not-a-token")),
            // Asked again: the remembered decisions give the same answers.
            scrape(port, "/metrics", Some(&allowed)),
            scrape(port, "/metrics", Some(&other)),
        ]
    })
    .await
    .unwrap();
    let expect_metrics = |(code, body): &(String, String)| {
        assert_eq!(code, "200", "{body}");
        assert!(body.contains("\nmcc_drain_err{node=\"worker-0\"} 1\n") && body.ends_with("# EOF\n"), "{body}");
    };
    let forbidden = format!(
        "Forbidden (user=system:serviceaccount:{NAMESPACE}:nobody, verb=get, resource=namespace, subresource=metrics)\n"
    );
    expect_metrics(&scraped[0]);
    assert_eq!(scraped[1], ("404".into(), "not found\n".into()));
    assert_eq!(scraped[2], ("403".into(), forbidden.clone()));
    assert_eq!(scraped[3], ("401".into(), "Unauthorized\n".into()));
    assert_eq!(scraped[4], ("401".into(), "Unauthorized\n".into()));
    expect_metrics(&scraped[5]);
    assert_eq!(scraped[6], ("403".into(), forbidden));

    // Plain HTTP on the TLS port gets no metrics.
    let plain = Command::new("curl")
        .args(["-s", "--max-time", "30", "-o", "/dev/null", "-w", "%{http_code}", &format!("http://{port}/metrics")])
        .output()
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&plain.stdout), "200");
}
