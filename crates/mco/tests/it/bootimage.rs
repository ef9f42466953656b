//! `mco bootimage plan`, `mco ignition upgrade-stub` and `mco skew check`, run as a user runs
//! them, on the real stream metadata and installer-shaped MachineSets of crates/bootimage.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common;

use assert_cmd::Command;
use common::{mco, stderr, stdout};
use serde::Deserialize;
use serde_json::{Value, json};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bootimage/testdata").join(name)
}

fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text).map(|d| Value::deserialize(d).unwrap()).filter(|v| !v.is_null()).collect()
}

fn plan(args: &[&str]) -> Command {
    let mut cmd = mco();
    cmd.args(["bootimage", "plan", "--stream"]).arg(testdata("rhcos-4.16-stream.json")).args(args);
    cmd
}

#[test]
fn plan_patches_each_platform_and_says_why_not() {
    let assert = plan(&["--known-stream"])
        .arg(testdata("rhcos-4.11-stream.json"))
        .arg(testdata("machinesets"))
        .assert()
        .success();
    let out = stdout(&assert);
    // Files in name order: aws, azure, gcp, vsphere.
    let comments: Vec<&str> = out.lines().filter(|l| l.starts_with("# MachineSet ")).collect();
    assert_eq!(
        comments,
        [
            "# MachineSet openshift-machine-api/ci-abcde-worker-us-east-1a: patched: ami-052ef3d8b962bffa1 -> ami-05483066c3caaccf5",
            "# MachineSet openshift-machine-api/ci-klmno-worker-eastus1: skipped: stream rhcos-4.16 has no Azure marketplace images for architecture x86_64",
            "# MachineSet openshift-machine-api/ci-fghij-worker-c: patched: projects/rhcos-cloud/global/images/rhcos-411-86-202205051017-0-gcp-x86-64 -> projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64",
            "# MachineSet openshift-machine-api/ci-ln-6vjqx8t-c1627-bwxkr-worker-0: unchanged: vSphere template ci-ln-6vjqx8t-c1627-bwxkr-rhcos-generated-region-generated-zone must hold RHCOS 416.94.202405291527-0 (OVA https://rhcos.mirror.openshift.com/art/storage/prod/streams/4.16-9.4/builds/416.94.202405291527-0/x86_64/rhcos-416.94.202405291527-0-vmware.x86_64.ova sha256 3be3bdfb8e835635ee16ac3a2693bed52c1c5eabf28e6402a01419cb69aa36f7); checking and importing it needs vCenter",
        ]
    );
    // The printed MachineSets are the inputs with only the boot image changed: every other key
    // of the provider spec (futureProviderKey included) and of the object survives.
    let docs = yaml_documents(&out);
    assert_eq!(docs.len(), 2);
    for (doc, file, pointer, new) in [
        (&docs[0], "aws.yaml", "/spec/template/spec/providerSpec/value/ami/id", "ami-05483066c3caaccf5"),
        (
            &docs[1],
            "gcp.yaml",
            "/spec/template/spec/providerSpec/value/disks/0/image",
            "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64",
        ),
    ] {
        let mut expected: Value =
            serde_yaml::from_str(&fs::read_to_string(testdata("machinesets").join(file)).unwrap()).unwrap();
        *expected.pointer_mut(pointer).unwrap() = json!(new);
        assert_eq!(doc, &expected, "{file}");
    }
}

#[test]
fn plan_json_with_infrastructure_and_marketplace_stream() {
    let dir = tempfile::tempdir().unwrap();
    let infra = dir.path().join("infra.yaml");
    fs::write(
        &infra,
        "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {name: cluster}\nstatus:\n  platformStatus: {type: Azure, azure: {cloudName: AzurePublicCloud}}\n",
    )
    .unwrap();
    let assert = mco()
        .args(["bootimage", "plan", "-o", "json", "--stream"])
        .arg(testdata("rhcos-4.16-azure-marketplace.json"))
        .arg("--infrastructure")
        .arg(&infra)
        .arg(testdata("machinesets/azure.yaml"))
        .assert()
        .success();
    let out: Value = serde_json::from_str(&stdout(&assert)).unwrap();
    assert_eq!(out[0]["decision"], "Patch");
    assert_eq!(out[0]["from"], "azureopenshift:aro4:413-v2:413.92.20230614");
    assert_eq!(out[0]["to"], "azureopenshift:aro4:416-v2:416.94.20240701");
    assert_eq!(
        out[0]["mergePatch"],
        json!({"spec": {"template": {"spec": {"providerSpec": {"value": {"image": {"sku": "416-v2", "version": "416.94.20240701"}}}}}}})
    );
}

#[test]
fn plan_without_known_streams_leaves_an_unknown_ami_alone() {
    let assert = plan(&["-o", "json"]).arg(testdata("machinesets/aws.yaml")).assert().success();
    let out: Value = serde_json::from_str(&stdout(&assert)).unwrap();
    assert_eq!(
        out,
        json!([{
            "machineSet": "openshift-machine-api/ci-abcde-worker-us-east-1a",
            "summary": "skipped: AMI ami-052ef3d8b962bffa1 is not a known RHCOS boot image (its owner is unknown; not in any known stream)",
            "decision": "Skipped",
            "reason": "AMI ami-052ef3d8b962bffa1 is not a known RHCOS boot image (its owner is unknown; not in any known stream)",
            "countsAsSkipped": true,
        }])
    );
}

/// Every bad input exits 1, names the problem, and prints nothing on stdout.
#[test]
fn plan_refuses_bad_input_and_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        fs::write(&path, text).unwrap();
        path
    };
    let aws = fs::read_to_string(testdata("machinesets/aws.yaml")).unwrap();
    let malformed = write("malformed.json", "{\"stream\": ");
    let no_arches = write("noarch.json", r#"{"stream": "rhcos-x", "architectures": {}}"#);
    let unknown_kind =
        write("kind.yaml", &aws.replace("kind: AWSMachineProviderConfig", "kind: OpenstackProviderSpec"));
    let bad_arch = write("arch.yaml", &aws.replace("kubernetes.io/arch=amd64", "kubernetes.io/arch=sparc"));
    let bad_ami = write("ami.yaml", &aws.replace("            id: ami-052ef3d8b962bffa1\n", "            - ami-1\n"));
    let pool = write(
        "pool.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: worker}\nspec: {}\n",
    );
    let infra = write("infra.yaml", "apiVersion: v1\nkind: ConfigMap\n");
    let ms = testdata("machinesets/aws.yaml");
    let cases: Vec<(Vec<PathBuf>, Vec<&str>, String)> = vec![
        (vec![malformed.clone(), ms.clone()], vec![], format!("error: {}: stream metadata is not valid: EOF while parsing a value", malformed.display())),
        (vec![no_arches.clone(), ms.clone()], vec![], format!("error: {}: stream metadata is not valid: stream rhcos-x lists no architectures", no_arches.display())),
        (vec![testdata("rhcos-4.16-stream.json"), unknown_kind], vec![], "error: MachineSet openshift-machine-api/ci-abcde-worker-us-east-1a: providerSpec.value has unknown kind \"OpenstackProviderSpec\"".into()),
        (vec![testdata("rhcos-4.16-stream.json"), bad_arch], vec![], "error: MachineSet openshift-machine-api/ci-abcde-worker-us-east-1a: annotation capacity.cluster-autoscaler.kubernetes.io/labels: unknown architecture \"sparc\"".into()),
        (vec![testdata("rhcos-4.16-stream.json"), bad_ami], vec![], "error: MachineSet openshift-machine-api/ci-abcde-worker-us-east-1a: providerSpec.value.ami is not an object".into()),
        (vec![testdata("rhcos-4.16-stream.json"), pool.clone()], vec![], format!("error: {} (document 1): not a MachineSet: MachineConfigPool", pool.display())),
        (vec![testdata("rhcos-4.16-stream.json"), ms.clone()], vec!["--default-arch", "mips"], "error: --default-arch: unknown architecture \"mips\"".into()),
        (vec![testdata("rhcos-4.16-stream.json"), ms.clone()], vec!["--infrastructure", infra.to_str().unwrap()], format!("error: {}: expected kind Infrastructure", infra.display())),
    ];
    for (paths, extra, want) in cases {
        let assert = mco()
            .args(["bootimage", "plan", "--known-stream"])
            .arg(testdata("rhcos-4.11-stream.json"))
            .args(&extra)
            .arg("--stream")
            .arg(&paths[0])
            .args(&paths[1..])
            .assert()
            .code(1);
        assert_eq!(stdout(&assert), "", "{want}");
        assert!(stderr(&assert).starts_with(&want), "want {want}\ngot {}", stderr(&assert));
    }
    // A file that cannot be read is a failure of the command (exit 2).
    plan(&[]).arg(dir.path().join("missing.yaml")).assert().code(2).stdout("");
}

fn stub(name: &str) -> PathBuf {
    testdata("stubs").join(name)
}

#[test]
fn upgrade_stub_prints_spec_3_and_checks_the_server_certificate() {
    let assert = mco()
        .args(["ignition", "upgrade-stub", "--server-cert"])
        .arg(stub("server.crt"))
        .arg(stub("stub-2.2.ign"))
        .assert()
        .success();
    let out: Value = serde_json::from_str(&stdout(&assert)).unwrap();
    assert_eq!(out["ignition"]["version"], "3.1.0");
    assert_eq!(out["ignition"]["config"]["merge"][0]["source"], "https://api-int.ci.example.com:22623/config/worker");
    assert_eq!(out["systemd"]["units"][0]["name"], "custom-early.service");
    assert!(
        stderr(&assert).contains("is trusted by the stub's CA and valid for api-int.ci.example.com"),
        "{}",
        stderr(&assert)
    );

    let assert = mco().args(["ignition", "upgrade-stub", "--to", "3.5"]).arg(stub("stub-2.2.ign")).assert().success();
    let out: Value = serde_json::from_str(&stdout(&assert)).unwrap();
    assert_eq!(out["ignition"]["version"], "3.5.0");

    // Spec 3 is printed unchanged.
    let assert = mco().args(["ignition", "upgrade-stub"]).arg(stub("stub-3.1.ign")).assert().success();
    assert_eq!(stdout(&assert), fs::read_to_string(stub("stub-3.1.ign")).unwrap());
    assert!(stderr(&assert).contains("already spec 3.1.0; unchanged"));
}

#[test]
fn upgrade_stub_in_a_secret() {
    let assert = mco().args(["ignition", "upgrade-stub"]).arg(stub("worker-user-data-secret.json")).assert().success();
    let secret: Value = serde_yaml::from_str(&stdout(&assert)).unwrap();
    assert_eq!(
        secret["metadata"]["annotations"]["machineconfiguration.openshift.io/stub-ignition-upgraded-to"],
        "3.1.0"
    );
    let at = secret["metadata"]["annotations"]["machineconfiguration.openshift.io/stub-ignition-upgraded-at"]
        .as_str()
        .unwrap();
    assert!(at.len() == 20 && at.ends_with('Z'), "{at}");
    let typed: mco_bootimage::stub::Secret = serde_yaml::from_str(&stdout(&assert)).unwrap();
    let config: Value = serde_json::from_slice(&typed.data.as_ref().unwrap()["userData"].0).unwrap();
    assert_eq!(config["ignition"]["version"], "3.1.0");
    assert_eq!(config["storage"]["files"][0]["path"], "/etc/custom-marker");
    assert_eq!(secret["data"]["disableTemplating"], "dHJ1ZQo=");
}

#[test]
fn upgrade_stub_refuses_bad_stubs_and_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let not_ignition = dir.path().join("x.ign");
    fs::write(&not_ignition, "{\"hello\": true}").unwrap();
    let cases: Vec<(PathBuf, Option<&str>, &str)> = vec![
        (stub("stub-2.2-two-cas.ign"), None, "the stub has 2 certificate authorities"),
        (not_ignition, None, "not an Ignition config: parsing Ignition config failed"),
        (stub("stub-2.2.ign"), Some("server-no-san.crt"), "has no Subject Alternative Name"),
        (stub("stub-2.2.ign"), Some("server-other-ca.crt"), "is not trusted by the stub's CA"),
        (stub("stub-2.2.ign"), Some("server-other-host.crt"), "is not valid for api-int.ci.example.com"),
    ];
    for (file, cert, want) in cases {
        let mut cmd = mco();
        cmd.args(["ignition", "upgrade-stub"]);
        if let Some(cert) = cert {
            cmd.arg("--server-cert").arg(stub(cert));
        }
        let assert = cmd.arg(&file).assert().code(1);
        assert_eq!(stdout(&assert), "", "{want}");
        assert!(stderr(&assert).contains(want), "want {want}, got {}", stderr(&assert));
    }
    let assert = mco().args(["ignition", "upgrade-stub", "--to", "2.2"]).arg(stub("stub-2.2.ign")).assert().code(1);
    assert!(stderr(&assert).contains("the upgrade target must be an Ignition spec 3 version"));
}

fn machine_configuration(spec: &str, status: &str) -> String {
    format!(
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {{name: cluster}}\nspec: {spec}\nstatus: {status}\n"
    )
}

#[test]
fn skew_check_prints_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        fs::write(&path, text).unwrap();
        path
    };
    let cv = write(
        "cv.yaml",
        "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata: {name: version}\nstatus:\n  desired: {version: 4.18.2}\n  history:\n  - {state: Completed, version: 4.18.2}\n  - {state: Completed, version: 4.12.0}\n",
    );
    let aws = write(
        "infra.yaml",
        "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nstatus: {platformStatus: {type: AWS}}\n",
    );
    let manual_old = write(
        "manual.yaml",
        &machine_configuration(
            "{bootImageSkewEnforcement: {mode: Manual, manual: {mode: RHCOSVersion, rhcosVersion: 411.86.202205051017-0}}}",
            "{}",
        ),
    );
    let assert = mco().args(["skew", "check", "--cluster-version"]).arg(&cv).arg(&manual_old).assert().code(1);
    assert_eq!(
        stdout(&assert),
        "mode: Manual (computed)\nbootImage: rhcosVersion 411.86.202205051017-0\nUpgradeable: False\nreason: ClusterBootImageSkewError\nmessage: Upgrades have been disabled because the cluster is using RHCOS boot image version 411.86.202205051017-0(RHEL version: 8.6), which is below the minimum required RHEL version 9.2. To enable upgrades, please update your boot images or disable boot image skew enforcement by following the documentation at https://docs.redhat.com/en/documentation/openshift_container_platform/4.18/html/machine_configuration/mco-update-boot-skew-mgmt\n"
    );

    // No spec on AWS: every MachineSet is managed by default, so Automatic at the install
    // version; not evaluated until the controller has reconciled (no Progressing condition).
    let default = write("default.yaml", &machine_configuration("{}", "{}"));
    let assert = mco()
        .args(["skew", "check", "--cluster-version"])
        .arg(&cv)
        .arg("--infrastructure")
        .arg(&aws)
        .args(["--boot-image", "9.6.20251023-0"])
        .arg(&default)
        .assert()
        .success();
    assert_eq!(
        stdout(&assert),
        "mode: Automatic (computed)\nbootImage: ocpVersion 4.12.0\nUpgradeable: True\nbootImage 9.6.20251023-0: allowed\n"
    );

    // The recorded status wins; reconciled and at 4.12.0 it blocks; an old node is refused.
    let reconciled = write(
        "status.yaml",
        &machine_configuration(
            "{}",
            "{bootImageSkewEnforcementStatus: {mode: Automatic, automatic: {ocpVersion: 4.12.0}}, conditions: [{type: BootImageUpdateProgressing, status: 'False', reason: x, message: '', lastTransitionTime: '2026-01-01T00:00:00Z'}]}",
        ),
    );
    let assert =
        mco().args(["skew", "check", "--boot-image", "410.84.202201251203-0"]).arg(&reconciled).assert().code(1);
    let out = stdout(&assert);
    assert!(out.starts_with("mode: Automatic (status)\nbootImage: ocpVersion 4.12.0\nUpgradeable: False\n"), "{out}");
    assert!(out.contains("/openshift_container_platform/latest/html/"), "{out}");
    assert!(out.ends_with("bootImage 410.84.202201251203-0: refused: boot image is too old: RHCOS boot image version 410.84.202201251203-0(RHEL version: 8.4) is below the minimum required RHEL version 9.2; update the boot images (or disable boot image skew enforcement) and reprovision this machine\n"), "{out}");

    let none = write("none.yaml", &machine_configuration("{bootImageSkewEnforcement: {mode: None}}", "{}"));
    let assert = mco().args(["skew", "check", "--boot-image", "410.84.202201251203-0"]).arg(&none).assert().success();
    assert_eq!(stdout(&assert), "mode: None (computed)\nUpgradeable: True\nbootImage 410.84.202201251203-0: allowed\n");

    // Unreadable versions and missing objects are errors.
    let garbage = write(
        "garbage.yaml",
        &machine_configuration(
            "{bootImageSkewEnforcement: {mode: Manual, manual: {mode: RHCOSVersion, rhcosVersion: 9.6.2025-0}}}",
            "{}",
        ),
    );
    let assert = mco().args(["skew", "check"]).arg(&garbage).assert().code(1);
    assert!(
        stderr(&assert).contains(
            "invalid RHCOS version \"9.6.2025-0\": the timestamp must have 8 (YYYYMMDD) or 12 (YYYYMMDDHHmm) digits"
        ),
        "{}",
        stderr(&assert)
    );
    let assert = mco().args(["skew", "check", "--boot-image", "nine"]).arg(&none).assert().code(1);
    assert!(stderr(&assert).contains("error: --boot-image: invalid OCP version \"nine\""), "{}", stderr(&assert));
    let assert = mco().args(["skew", "check"]).arg(&cv).assert().code(1).stdout("");
    assert!(stderr(&assert).contains("unknown kind ClusterVersion"), "{}", stderr(&assert));
}
