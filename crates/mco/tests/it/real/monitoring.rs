//! The alerting rules of `deploy/components/monitoring`: valid for Prometheus (`promtool check
//! rules`), their unit tests pass (`promtool test rules`), the plain rules file holds exactly the
//! PrometheusRules' groups, and every alert is tested both firing and not firing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize as _;
use serde_yaml::Value;

fn monitoring() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/components/monitoring").canonicalize().unwrap()
}

fn yaml(name: &str) -> Value {
    let text = std::fs::read_to_string(monitoring().join(name)).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs Debian's promtool (hack/setup.sh installs the `prometheus` package) in the rules'
/// directory and returns its output; panics with it when promtool fails.
fn promtool(args: &[&str]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(monitoring())
        .output()
        .expect("running promtool (Debian's prometheus package: bash hack/setup.sh)");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// The rule groups of every PrometheusRule in prometheus-rules.yaml, in order.
fn prometheus_rule_groups() -> Vec<Value> {
    let text = std::fs::read_to_string(monitoring().join("prometheus-rules.yaml")).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .flat_map(|document| {
            let rule = Value::deserialize(document).unwrap();
            assert_eq!(rule["kind"], "PrometheusRule", "{rule:?}");
            assert_eq!(rule["metadata"]["namespace"], "openshift-machine-config-operator");
            rule["spec"]["groups"].as_sequence().unwrap().clone()
        })
        .collect()
}

fn alert_names(groups: &[Value]) -> BTreeSet<String> {
    groups
        .iter()
        .flat_map(|group| group["rules"].as_sequence().unwrap())
        .filter_map(|rule| rule["alert"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn promtool_accepts_the_rules_and_their_unit_tests_pass() {
    let checked = promtool(&["check", "rules", "rules.yml"]);
    let rules: usize = prometheus_rule_groups().iter().map(|g| g["rules"].as_sequence().unwrap().len()).sum();
    assert!(checked.contains(&format!("SUCCESS: {rules} rules found")), "{checked}");
    let tested = promtool(&["test", "rules", "rules_test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn the_plain_rules_file_holds_the_prometheus_rules_groups() {
    let plain = yaml("rules.yml");
    assert_eq!(plain["groups"].as_sequence().unwrap(), &prometheus_rule_groups());
}

#[test]
fn every_alert_is_tested_firing_and_not_firing() {
    let alerts = alert_names(&prometheus_rule_groups());
    assert!(alerts.contains("MCCDrainError") && alerts.contains("MCDRebootError"), "{alerts:?}");
    let tests = yaml("rules_test.yml");
    assert_eq!(tests["rule_files"], serde_yaml::from_str::<Value>("[rules.yml]").unwrap());
    let (mut firing, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for case in tests["tests"].as_sequence().unwrap() {
        for check in case["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = check["alertname"].as_str().unwrap().to_string();
            let expected = check["exp_alerts"].as_sequence().unwrap();
            if expected.is_empty() {
                quiet.insert(name)
            } else {
                firing.insert(name)
            };
        }
    }
    assert_eq!(firing, alerts, "alerts never seen firing: {:?}", alerts.difference(&firing).collect::<Vec<_>>());
    assert_eq!(quiet, alerts, "alerts never seen quiet: {:?}", alerts.difference(&quiet).collect::<Vec<_>>());
}

#[test]
fn the_component_builds_into_a_pod_monitor_and_the_prometheus_rules() {
    let overlay = tempfile::tempdir().unwrap();
    let to_deploy = mco_lab::install::relative_path(overlay.path(), &monitoring().join("../.."));
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {base}\ncomponents:\n  - {monitoring}\n",
            base = to_deploy.join("base").display(),
            monitoring = to_deploy.join("components/monitoring").display(),
        ),
    )
    .unwrap();
    let [kubectl] = mco_testenv::find_binaries(["kubectl"]).unwrap();
    let built = Command::new(kubectl).arg("kustomize").arg(overlay.path()).output().unwrap();
    let text = String::from_utf8_lossy(&built.stdout).to_string();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let objects: Vec<Value> =
        serde_yaml::Deserializer::from_str(&text).map(|document| Value::deserialize(document).unwrap()).collect();
    let mut monitoring_objects: Vec<(String, String)> = objects
        .iter()
        .filter(|o| o["apiVersion"] == "monitoring.coreos.com/v1")
        .map(|o| (o["kind"].as_str().unwrap().to_string(), o["metadata"]["name"].as_str().unwrap().to_string()))
        .collect();
    monitoring_objects.sort();
    assert_eq!(
        monitoring_objects,
        [
            ("PodMonitor", "machine-config"),
            ("PrometheusRule", "machine-config-controller"),
            ("PrometheusRule", "machine-config-daemon"),
            ("PrometheusRule", "machine-config-server"),
        ]
        .map(|(kind, name)| (kind.to_string(), name.to_string()))
    );
    // The PodMonitor's port exists on every mco workload it selects.
    for workload in objects.iter().filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet") {
        let ports = &workload["spec"]["template"]["spec"]["containers"][0]["ports"];
        let named_metrics = ports.as_sequence().into_iter().flatten().any(|p| p["name"] == "metrics");
        assert!(named_metrics, "{} declares no `metrics` port", workload["metadata"]["name"].as_str().unwrap());
    }
}

/// Every metric name a sample of a registry's text can have: counters get `_total`, histograms
/// their `_bucket`, `_sum` and `_count`.
fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .flat_map(|declared| {
            let (name, kind) = declared.split_once(' ').unwrap();
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            suffixes.iter().map(move |suffix| format!("{name}{suffix}"))
        })
        .collect()
}

#[test]
fn the_rules_use_only_metrics_mco_serves() {
    let mut registry = mco_metrics::Registry::default();
    mco_metrics::controller::ControllerMetrics::register(&mut registry);
    mco_metrics::daemon::DaemonMetrics::register(&mut registry);
    // A family is written once it has a series.
    mco_metrics::server::ServerMetrics::register(&mut registry).record_boot_image_skew_refusal("worker");
    let served = sample_names(&mco_metrics::render(&registry));
    assert!(served.contains("mcd_reboots_failed_total") && served.contains("mcc_drain_err"), "{served:?}");
    let ours = ["mcc_", "mcd_", "mco_", "os_image_url_override"];
    let used: BTreeSet<String> = prometheus_rule_groups()
        .iter()
        .flat_map(|group| group["rules"].as_sequence().unwrap().clone())
        .flat_map(|rule| {
            let expr = rule["expr"].as_str().unwrap().to_string();
            expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map(str::to_string).collect::<Vec<_>>()
        })
        .filter(|token| ours.iter().any(|prefix| token.starts_with(prefix)))
        .collect();
    assert!(used.contains("mcc_drain_err") && used.contains("mco_server_boot_image_skew_refusals_total"), "{used:?}");
    let unknown: Vec<&String> = used.difference(&served).collect();
    assert!(unknown.is_empty(), "rules use metrics no mco component serves: {unknown:?}");
}
