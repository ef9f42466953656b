//! The per-ControlPlaneMachineSet decision: the installer-shaped MachineSets of `plan.rs` as
//! control plane templates. On AWS, GCP and Azure a ControlPlaneMachineSet gets exactly the
//! decision its provider spec gets in a MachineSet (for the controller's architecture, whatever
//! its annotations say); the patch changes the provider spec and nothing else; its own skips are
//! upstream's (owner references, another OS stream, Windows in the machines' spec labels, any
//! other platform).

use std::path::Path;

use mco_api::ControlPlaneMachineSet;
use mco_api::MachineSet;
use mco_bootimage::ec2::KnownStreams;
use mco_bootimage::machineset::{PlanErrorKind, SkipReason};
use mco_bootimage::{Arch, Decision, Infrastructure, PlanContext, Stream, plan, plan_control_plane};
use serde_json::{Value, json};

fn testdata(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
}

fn stream(name: &str) -> Stream {
    Stream::parse(&std::fs::read(testdata(name)).unwrap()).unwrap()
}

fn machineset_json(platform: &str) -> Value {
    let text = std::fs::read_to_string(testdata(&format!("machinesets/{platform}.yaml"))).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// The ControlPlaneMachineSet `openshift-machine-api/cluster` whose machines are the fixture
/// MachineSet's, as the installer writes one, with `edit` applied to its JSON.
fn control_plane(platform: &str, edit: impl FnOnce(&mut Value)) -> ControlPlaneMachineSet {
    let machineset = machineset_json(platform);
    let mut cpms = json!({
        "apiVersion": "machine.openshift.io/v1",
        "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": "openshift-machine-api"},
        "spec": {
            "replicas": 3,
            "state": "Active",
            "strategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": {"machine.openshift.io/cluster-api-machine-role": "master"}},
            "template": {
                "machineType": "machines_v1beta1_machine_openshift_io",
                "machines_v1beta1_machine_openshift_io": {
                    "failureDomains": {"platform": ""},
                    "metadata": {"labels": {"machine.openshift.io/cluster-api-machine-role": "master"}},
                    "spec": machineset["spec"]["template"]["spec"].clone(),
                },
            },
        },
    });
    edit(&mut cpms);
    serde_json::from_value(cpms).unwrap()
}

const PS: &str = "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value";

fn infra(yaml: &str) -> Infrastructure {
    serde_yaml::from_str(yaml).unwrap()
}

fn infra_of(platform: &str) -> Infrastructure {
    match platform {
        "aws" => infra("status: {platformStatus: {type: AWS, aws: {region: us-east-1}}}"),
        "gcp" => infra("status: {platformStatus: {type: GCP}}"),
        "azure" => infra("status: {platformStatus: {type: Azure}}"),
        _ => infra(
            "spec: {platformSpec: {type: VSphere, vsphere: {vcenters: []}}}\nstatus: {platformStatus: {type: VSphere}}",
        ),
    }
}

#[test]
fn control_planes_get_their_machinesets_decision_for_the_controllers_architecture() {
    let old = stream("rhcos-4.11-stream.json");
    // Azure's boot images are marketplace images, which only the newer streams list.
    for (platform, target) in [
        ("aws", "rhcos-4.16-stream.json"),
        ("gcp", "rhcos-4.16-stream.json"),
        ("azure", "rhcos-4.16-azure-marketplace.json"),
    ] {
        let target = stream(target);
        let amis = KnownStreams::new([&old, &target]);
        let infrastructure = infra_of(platform);
        for arch in [Arch::X86_64, Arch::Aarch64] {
            let ctx =
                PlanContext { stream: &target, infrastructure: Some(&infrastructure), default_arch: None, amis: &amis };
            // A control plane's machines carry no architecture annotation: the MachineSet's, for
            // `arch`, is the reference.
            let mut machineset = machineset_json(platform);
            let annotation = format!("kubernetes.io/arch={}", if arch == Arch::X86_64 { "amd64" } else { "arm64" });
            machineset["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/labels"] =
                json!(annotation);
            let machineset: MachineSet = serde_json::from_value(machineset).unwrap();
            let reference = plan(&machineset, &ctx);
            // Annotated for the other architecture: ignored.
            let cpms = control_plane(platform, |v| {
                v["metadata"]["annotations"] =
                    json!({"capacity.cluster-autoscaler.kubernetes.io/labels": "kubernetes.io/arch=s390x"});
            });
            let decision = plan_control_plane(&cpms, arch, &ctx);
            match (reference, decision) {
                (Ok(Decision::Patch(reference)), Ok(Decision::Patch(patch))) => {
                    assert_eq!(patch, reference, "{platform} {arch}");
                    // The patch changes the provider spec and nothing else.
                    let mut expected = serde_json::to_value(&cpms).unwrap();
                    *expected.pointer_mut(PS).unwrap() = patch.provider_spec.clone();
                    assert_eq!(serde_json::to_value(patch.apply(&cpms)).unwrap(), expected, "{platform} {arch}");
                    assert_ne!(patch.from, patch.to, "{platform} {arch}");
                }
                // Every fixture moves on x86_64; elsewhere the two agree on what happens instead.
                (_, decision) if arch == Arch::X86_64 => panic!("{platform}: no patch: {decision:?}"),
                (Ok(reference), Ok(decision)) => assert_eq!(decision, reference, "{platform} {arch}"),
                (Err(reference), Err(error)) => assert_eq!(error.kind, reference.kind, "{platform} {arch}"),
                (reference, decision) => panic!("{platform} {arch}: {decision:?}, the MachineSet's {reference:?}"),
            }
        }
    }
}

#[test]
fn control_planes_skip_as_upstream() {
    let target = stream("rhcos-4.16-stream.json");
    let amis = KnownStreams::new([&target]);
    let decide = |platform: &str, infrastructure: Option<&Infrastructure>, cpms: &ControlPlaneMachineSet| {
        let ctx = PlanContext { stream: &target, infrastructure, default_arch: None, amis: &amis };
        plan_control_plane(cpms, Arch::X86_64, &ctx).unwrap_or_else(|e| panic!("{platform}: {e}"))
    };
    let gcp = infra_of("gcp");
    let skipped = |reason| Decision::Skipped(reason);
    let cases: Vec<(&str, Option<Infrastructure>, ControlPlaneMachineSet, Decision)> = vec![
        (
            "owned by another controller",
            Some(infra_of("gcp")),
            control_plane("gcp", |v| {
                v["metadata"]["ownerReferences"] =
                    json!([{"apiVersion": "v1", "kind": "Cluster", "name": "c", "uid": "u"}]);
            }),
            skipped(SkipReason::OwnerReferences(vec!["Cluster/c".into()])),
        ),
        (
            "another OS stream",
            Some(infra_of("gcp")),
            control_plane("gcp", |v| {
                v["metadata"]["labels"] = json!({"machineconfiguration.openshift.io/osstream": "rhel-10"});
            }),
            skipped(SkipReason::OsStream("rhel-10".into())),
        ),
        (
            "Windows machines (the machines' spec labels, where upstream looks)",
            Some(infra_of("gcp")),
            control_plane("gcp", |v| {
                v["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["spec"]["metadata"] =
                    json!({"labels": {"machine.openshift.io/os-id": "Windows"}});
            }),
            skipped(SkipReason::Windows),
        ),
        (
            "vSphere",
            Some(infra_of("vsphere")),
            control_plane("vsphere", |_| {}),
            skipped(SkipReason::UnsupportedPlatform("VSphere".into())),
        ),
        (
            "vSphere named only by the provider spec",
            None,
            control_plane("vsphere", |_| {}),
            skipped(SkipReason::UnsupportedPlatform("VSphere".into())),
        ),
        (
            "Azure Stack",
            Some(infra("status: {platformStatus: {type: Azure, azure: {cloudName: AzureStackCloud}}}")),
            control_plane("azure", |_| {}),
            skipped(SkipReason::UnsupportedPlatform("Azure".into())),
        ),
        (
            "bare metal",
            Some(infra("status: {platformStatus: {type: BareMetal}}")),
            control_plane("gcp", |_| {}),
            skipped(SkipReason::UnsupportedPlatform("BareMetal".into())),
        ),
    ];
    for (name, infrastructure, cpms, want) in cases {
        assert_eq!(decide(name, infrastructure.as_ref(), &cpms), want, "{name}");
    }
    // Windows in the template's own labels is not what upstream reads: patched as any other.
    let labelled = control_plane("gcp", |v| {
        v["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["metadata"]["labels"]["machine.openshift.io/os-id"] =
            json!("Windows");
    });
    assert!(matches!(decide("template label", Some(&gcp), &labelled), Decision::Patch(_)));
}

#[test]
fn a_control_plane_without_a_provider_spec_is_an_error_naming_it() {
    let target = stream("rhcos-4.16-stream.json");
    let amis = KnownStreams::new([&target]);
    let infrastructure = infra_of("gcp");
    let ctx = PlanContext { stream: &target, infrastructure: Some(&infrastructure), default_arch: None, amis: &amis };
    let cpms = control_plane("gcp", |v| {
        v["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["spec"]["providerSpec"] = json!({});
    });
    let error = plan_control_plane(&cpms, Arch::X86_64, &ctx).unwrap_err();
    assert_eq!(error.kind, PlanErrorKind::NoProviderSpec);
    assert_eq!(
        error.to_string(),
        "ControlPlaneMachineSet openshift-machine-api/cluster: its machine template has no providerSpec.value"
    );
}
