//! Table tests of the per-MachineSet decision, from real stream metadata and installer-shaped
//! MachineSets of every platform. Each case edits one fixture MachineSet (JSON pointer edits)
//! and states the whole expected outcome; for patches also the exact merge patch, which proves
//! that nothing but the boot image field changed (unknown keys included).

use std::collections::BTreeMap;
use std::path::Path;

use mco_api::MachineSet;
use mco_bootimage::ec2::{AmiOwner, AmiOwnerLookup, KnownOwners, KnownStreams};
use mco_bootimage::machineset::{PlanErrorKind, SkipReason};
use mco_bootimage::stream::VmwareOva;
use mco_bootimage::{Arch, Decision, Infrastructure, PlanContext, Stream, plan};
use serde_json::{Value, json};

fn testdata(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
}

fn stream(name: &str) -> Stream {
    Stream::parse(&std::fs::read(testdata(name)).unwrap()).unwrap()
}

fn machineset(platform: &str, edits: &[(String, Value)]) -> MachineSet {
    let text = std::fs::read_to_string(testdata(&format!("machinesets/{platform}.yaml"))).unwrap();
    let mut value: Value = serde_yaml::from_str(&text).unwrap();
    for (pointer, new) in edits {
        set_pointer(&mut value, pointer, new.clone());
    }
    serde_json::from_value(value).unwrap()
}

/// Sets the value at a JSON pointer (creating objects on the way), or removes it when the new
/// value is [`REMOVE`].
fn set_pointer(root: &mut Value, pointer: &str, new: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let key = key.replace("~1", "/");
    let mut current = root;
    for part in parent.split('/').skip(1) {
        let part = part.replace("~1", "/");
        current = match current {
            Value::Array(items) => &mut items[part.parse::<usize>().unwrap()],
            _ => current.as_object_mut().unwrap().entry(part).or_insert_with(|| json!({})),
        };
    }
    match current {
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = new,
        _ if new == json!(REMOVE) => {
            current.as_object_mut().unwrap().remove(&key);
        }
        _ => {
            current.as_object_mut().unwrap().insert(key, new);
        }
    }
}

const REMOVE: &str = "<remove>";
const PS: &str = "/spec/template/spec/providerSpec/value";
const ARCH: &str = "/metadata/annotations/capacity.cluster-autoscaler.kubernetes.io~1labels";

fn infra(yaml: &str) -> Infrastructure {
    serde_yaml::from_str(yaml).unwrap()
}

/// Expected outcome of a case.
#[derive(Debug)]
enum Want {
    /// from, to, the merge patch of the provider spec value.
    Patch(&'static str, &'static str, Value),
    UpToDate(&'static str),
    Skip(SkipReason),
    Template(Option<&'static str>, &'static str),
    Error(PlanErrorKind),
}

struct Case {
    name: &'static str,
    platform: &'static str,
    edits: Vec<(String, Value)>,
    stream: &'static str,
    infra: Option<&'static str>,
    default_arch: Option<Arch>,
    owners: Option<KnownOwners>,
}

impl Case {
    fn new(name: &'static str, platform: &'static str) -> Case {
        Case {
            name,
            platform,
            edits: vec![],
            stream: "rhcos-4.16-stream.json",
            infra: None,
            default_arch: Some(Arch::X86_64),
            owners: None,
        }
    }
    fn edit(mut self, pointer: impl Into<String>, value: Value) -> Case {
        self.edits.push((pointer.into(), value));
        self
    }
    fn stream(mut self, stream: &'static str) -> Case {
        self.stream = stream;
        self
    }
    fn infra(mut self, yaml: &'static str) -> Case {
        self.infra = Some(yaml);
        self
    }
    fn default_arch(mut self, arch: Option<Arch>) -> Case {
        self.default_arch = arch;
        self
    }
    fn owner(mut self, ami: &str, owner: AmiOwner) -> Case {
        self.owners.get_or_insert_with(|| KnownOwners(BTreeMap::new())).0.insert(ami.to_string(), owner);
        self
    }
}

fn run(cases: Vec<(Case, Want)>) {
    let old = stream("rhcos-4.11-stream.json");
    for (case, want) in cases {
        let target = stream(case.stream);
        let known = KnownStreams::new([&old, &target]);
        let amis: &dyn AmiOwnerLookup = match &case.owners {
            Some(owners) => owners,
            None => &known,
        };
        let infrastructure = case.infra.map(infra);
        let ctx = PlanContext {
            stream: &target,
            infrastructure: infrastructure.as_ref(),
            default_arch: case.default_arch,
            amis,
        };
        let ms = machineset(case.platform, &case.edits);
        let got = plan(&ms, &ctx);
        let name = case.name;
        match (&want, got) {
            (Want::Patch(from, to, merge), Ok(Decision::Patch(patch))) => {
                assert_eq!((patch.from.as_str(), patch.to.as_str()), (*from, *to), "{name}");
                let full = patch.merge_patch(&ms);
                assert_eq!(full.pointer("/spec/template/spec/providerSpec/value").unwrap(), merge, "{name}");
                // Applying the patch changes the provider spec and nothing else.
                let patched = patch.apply(&ms);
                let mut expected = serde_json::to_value(&ms).unwrap();
                set_pointer(&mut expected, PS, patch.provider_spec.clone());
                assert_eq!(serde_json::to_value(&patched).unwrap(), expected, "{name}");
                assert_eq!(patch.user_data_secret.as_deref(), Some("worker-user-data"), "{name}");
            }
            (Want::UpToDate(image), Ok(Decision::UpToDate { image: got })) => assert_eq!(&got, image, "{name}"),
            (Want::Skip(reason), Ok(Decision::Skipped(got))) => assert_eq!(&got, reason, "{name}"),
            (Want::Template(template, release), Ok(Decision::VsphereTemplate { template: got, ova })) => {
                assert_eq!(got.as_deref(), *template, "{name}");
                assert_eq!(ova.release, *release, "{name}");
            }
            (Want::Error(kind), Err(e)) => {
                assert_eq!(&e.kind, kind, "{name}");
                assert!(e.to_string().starts_with("MachineSet openshift-machine-api/"), "{name}: {e}");
            }
            (want, got) => panic!("{name}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn aws() {
    let old = "ami-052ef3d8b962bffa1"; // rhcos-4.11 x86_64 us-east-1
    let new = "ami-05483066c3caaccf5"; // rhcos-4.16 x86_64 us-east-1
    run(vec![
        (Case::new("4.11 AMI to 4.16", "aws"), Want::Patch(old, new, json!({"ami": {"id": new}}))),
        (
            Case::new("arm64 annotation picks the aarch64 AMI", "aws").edit(ARCH, json!("kubernetes.io/arch=arm64")),
            Want::Patch(old, "ami-04859c888566a2c2f", json!({"ami": {"id": "ami-04859c888566a2c2f"}})),
        ),
        (
            Case::new("ARN and filters are dropped with the new id", "aws")
                .edit("/spec/template/spec/providerSpec/value/ami/arn", json!("arn:aws:ec2:x"))
                .edit("/spec/template/spec/providerSpec/value/ami/filters", json!([{"name": "n"}])),
            Want::Patch(old, new, json!({"ami": {"id": new, "arn": null, "filters": null}})),
        ),
        (
            Case::new("already at the stream's AMI", "aws").edit("/spec/template/spec/providerSpec/value/ami/id", json!(new)),
            Want::UpToDate(new),
        ),
        (
            Case::new("an AMI in no known stream is not replaced", "aws")
                .edit("/spec/template/spec/providerSpec/value/ami/id", json!("ami-0123456789abcdef0")),
            Want::Skip(SkipReason::AmiOwnerUnknown { ami: "ami-0123456789abcdef0".into() }),
        ),
        (
            Case::new("a custom AMI (other owner) is not replaced", "aws")
                .owner(old, AmiOwner::Other { owner_id: "123456789012".into() }),
            Want::Skip(SkipReason::AmiCustom { ami: old.into(), owner_id: "123456789012".into() }),
        ),
        (
            Case::new("a marketplace AMI is skipped", "aws").owner(old, AmiOwner::Marketplace { name: "rhcos".into() }),
            Want::Skip(SkipReason::AmiMarketplace { ami: old.into() }),
        ),
        (
            Case::new("Red Hat owner from a lookup", "aws").owner(old, AmiOwner::RedHat),
            Want::Patch(old, new, json!({"ami": {"id": new}})),
        ),
        (
            Case::new("AMI by ARN only", "aws")
                .edit("/spec/template/spec/providerSpec/value/ami", json!({"arn": "arn:aws:ec2:us-east-1::image/ami-1"})),
            Want::Skip(SkipReason::AmiNotById),
        ),
        (
            Case::new("region not in the stream", "aws")
                .edit("/spec/template/spec/providerSpec/value/placement/region", json!("mars-east-1")),
            Want::Skip(SkipReason::RegionNotInStream {
                region: "mars-east-1".into(),
                arch: Arch::X86_64,
                stream: "rhcos-4.16".into(),
            }),
        ),
        (
            Case::new("s390x has no AWS images", "aws").edit(ARCH, json!("kubernetes.io/arch=s390x")),
            Want::Skip(SkipReason::RegionNotInStream {
                region: "us-east-1".into(),
                arch: Arch::S390x,
                stream: "rhcos-4.16".into(),
            }),
        ),
        (
            Case::new("owner references", "aws").edit(
                "/metadata/ownerReferences",
                json!([{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "name": "md", "uid": "u"}]),
            ),
            Want::Skip(SkipReason::OwnerReferences(vec!["MachineDeployment/md".into()])),
        ),
        (
            Case::new("other OS stream", "aws").edit("/metadata/labels/machineconfiguration.openshift.io~1osstream", json!("rhel-10")),
            Want::Skip(SkipReason::OsStream("rhel-10".into())),
        ),
        (
            Case::new("rhel-9 stream label is managed", "aws")
                .edit("/metadata/labels/machineconfiguration.openshift.io~1osstream", json!("rhel-9")),
            Want::Patch(old, new, json!({"ami": {"id": new}})),
        ),
        (
            Case::new("Windows", "aws").edit("/spec/template/metadata/labels/machine.openshift.io~1os-id", json!("Windows")),
            Want::Skip(SkipReason::Windows),
        ),
        (
            Case::new("no arch annotation on a multi-arch cluster", "aws").edit(ARCH, json!(REMOVE)).default_arch(None),
            Want::Skip(SkipReason::ArchitectureUnknown),
        ),
        (
            Case::new("no arch annotation: the control plane's", "aws")
                .edit(ARCH, json!(REMOVE))
                .default_arch(Some(Arch::Aarch64)),
            Want::Patch(old, "ami-04859c888566a2c2f", json!({"ami": {"id": "ami-04859c888566a2c2f"}})),
        ),
        (
            Case::new("unknown arch value", "aws").edit(ARCH, json!("kubernetes.io/arch=riscv64")),
            Want::Error(PlanErrorKind::Architecture(mco_bootimage::arch::ArchAnnotationError::Unknown(
                mco_bootimage::arch::UnknownArch("riscv64".into()),
            ))),
        ),
        (
            Case::new("ami of the wrong shape", "aws").edit("/spec/template/spec/providerSpec/value/ami", json!("ami-1")),
            Want::Error(PlanErrorKind::Field { path: ".ami".into(), problem: "is not an object".into() }),
        ),
        (
            Case::new("no region", "aws").edit("/spec/template/spec/providerSpec/value/placement", json!(REMOVE)),
            Want::Error(PlanErrorKind::Field { path: ".placement.region".into(), problem: "is missing".into() }),
        ),
        (
            Case::new("AWS provider spec on a GCP cluster", "aws").infra("status: {platformStatus: {type: GCP}}"),
            Want::Error(PlanErrorKind::PlatformMismatch { kind: "AWSMachineProviderConfig".into(), platform: "GCP" }),
        ),
        (
            Case::new("AWS cluster", "aws").infra("status: {platformStatus: {type: AWS, aws: {region: us-east-1}}}"),
            Want::Patch(old, new, json!({"ami": {"id": new}})),
        ),
        (
            Case::new("unsupported platform", "aws").infra("status: {platformStatus: {type: BareMetal}}"),
            Want::Skip(SkipReason::UnsupportedPlatform("BareMetal".into())),
        ),
        (
            Case::new("unknown provider kind", "aws").edit("/spec/template/spec/providerSpec/value/kind", json!("FooProviderSpec")),
            Want::Error(PlanErrorKind::UnknownProviderKind("FooProviderSpec".into())),
        ),
        (
            Case::new("no provider spec", "aws").edit("/spec/template/spec/providerSpec", json!(REMOVE)),
            Want::Error(PlanErrorKind::NoProviderSpec),
        ),
    ]);
}

#[test]
fn gcp() {
    let old = "projects/rhcos-cloud/global/images/rhcos-411-86-202205051017-0-gcp-x86-64";
    let new = "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64";
    let image0 = "/spec/template/spec/providerSpec/value/disks/0/image";
    let merge = |image: &str| {
        let mut disks = machineset("gcp", &[]).provider_spec().unwrap()["disks"].clone();
        disks[0]["image"] = json!(image);
        json!({ "disks": disks })
    };
    run(vec![
        (Case::new("4.11 image to 4.16", "gcp"), Want::Patch(old, new, merge(new))),
        (
            Case::new("arm64", "gcp").edit(ARCH, json!("kubernetes.io/arch=arm64")),
            Want::Patch(
                old,
                "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-aarch64",
                merge("projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-aarch64"),
            ),
        ),
        (Case::new("up to date", "gcp").edit(image0, json!(new)), Want::UpToDate(new)),
        (
            Case::new("custom image", "gcp").edit(image0, json!("projects/my-project/global/images/golden")),
            Want::Skip(SkipReason::GcpCustomImage("projects/my-project/global/images/golden".into())),
        ),
        (
            Case::new("prefix without the slash is not Red Hat's", "gcp")
                .edit(image0, json!("projects/rhcos-cloud/global/images-mine/x")),
            Want::Skip(SkipReason::GcpCustomImage("projects/rhcos-cloud/global/images-mine/x".into())),
        ),
        (
            Case::new("the boot disk at the target and a second custom boot disk", "gcp")
                .edit(image0, json!(new))
                .edit("/spec/template/spec/providerSpec/value/disks/1/boot", json!(true))
                .edit("/spec/template/spec/providerSpec/value/disks/1/image", json!("projects/p/global/images/x")),
            Want::Skip(SkipReason::GcpCustomImage("projects/p/global/images/x".into())),
        ),
        (
            Case::new("ppc64le has no GCP image", "gcp").edit(ARCH, json!("kubernetes.io/arch=ppc64le")),
            Want::Error(PlanErrorKind::Stream(mco_bootimage::stream::StreamError::MissingGcpImage {
                stream: "rhcos-4.16".into(),
                arch: "ppc64le",
            })),
        ),
        (
            Case::new("disks of the wrong shape", "gcp")
                .edit("/spec/template/spec/providerSpec/value/disks", json!({})),
            Want::Error(PlanErrorKind::Field { path: ".disks".into(), problem: "is not an array".into() }),
        ),
        (
            Case::new("boot of the wrong shape", "gcp")
                .edit("/spec/template/spec/providerSpec/value/disks/0/boot", json!("yes")),
            Want::Error(PlanErrorKind::Field { path: ".disks[0].boot".into(), problem: "is not a boolean".into() }),
        ),
        (
            Case::new("no boot disk", "gcp").edit("/spec/template/spec/providerSpec/value/disks/0/boot", json!(false)),
            Want::Error(PlanErrorKind::Field {
                path: ".disks".into(),
                problem: "has no boot disk with an image".into(),
            }),
        ),
    ]);
}

#[test]
fn azure() {
    const MP: &str = "rhcos-4.16-azure-marketplace.json";
    let image = "/spec/template/spec/providerSpec/value/image";
    let nop = |sku: &str, version: &str| json!({"image": {"sku": sku, "version": version}});
    let paid = |publisher: &str, offer: &str, sku: &str| json!({"publisher": publisher, "offer": offer, "sku": sku, "version": "413.92.2023101600", "resourceID": "", "type": "MarketplaceWithPlan"});
    // Paid images of the same offer and generation only move to the stream's version.
    let paid_merge = json!({"image": {"version": "413.92.2023101700"}});
    run(vec![
        (
            Case::new("unpaid Gen2", "azure").stream(MP),
            Want::Patch(
                "azureopenshift:aro4:413-v2:413.92.20230614",
                "azureopenshift:aro4:416-v2:416.94.20240701",
                nop("416-v2", "416.94.20240701"),
            ),
        ),
        (
            Case::new("unpaid Gen1", "azure").stream(MP).edit(format!("{image}/sku"), json!("aro_413")),
            Want::Patch(
                "azureopenshift:aro4:aro_413:413.92.20230614",
                "azureopenshift:aro4:aro_416:416.94.20240701",
                nop("aro_416", "416.94.20240701"),
            ),
        ),
        (
            Case::new("unpaid arm64 is Gen2", "azure")
                .stream(MP)
                .edit(ARCH, json!("kubernetes.io/arch=arm64"))
                .edit(format!("{image}/sku"), json!("413-arm")),
            Want::Patch(
                "azureopenshift:aro4:413-arm:413.92.20230614",
                "azureopenshift:aro4:416-arm:416.94.20240701",
                nop("416-arm", "416.94.20240701"),
            ),
        ),
        (
            Case::new("paid OCP Gen2", "azure").stream(MP).edit(image, paid("redhat", "rh-ocp-worker", "rh-ocp-worker")),
            Want::Patch(
                "redhat:rh-ocp-worker:rh-ocp-worker:413.92.2023101600",
                "redhat:rh-ocp-worker:rh-ocp-worker:413.92.2023101700",
                paid_merge.clone(),
            ),
        ),
        (
            Case::new("paid OPP Gen1", "azure").stream(MP).edit(image, paid("redhat", "rh-opp-worker", "rh-opp-worker-gen1")),
            Want::Patch(
                "redhat:rh-opp-worker:rh-opp-worker-gen1:413.92.2023101600",
                "redhat:rh-opp-worker:rh-opp-worker-gen1:413.92.2023101700",
                paid_merge.clone(),
            ),
        ),
        (
            Case::new("paid OKE EMEA", "azure").stream(MP).edit(image, paid("redhat-limited", "rh-oke-worker", "rh-oke-worker")),
            Want::Patch(
                "redhat-limited:rh-oke-worker:rh-oke-worker:413.92.2023101600",
                "redhat-limited:rh-oke-worker:rh-oke-worker:413.92.2023101700",
                paid_merge.clone(),
            ),
        ),
        (
            Case::new("legacy gen2 upload moves to the unpaid marketplace image", "azure").stream(MP).edit(
                image,
                json!({"resourceID": "/resourceGroups/rg/providers/Microsoft.Compute/galleries/gallery_x/images/x-gen2/versions/latest", "offer": "", "publisher": "", "sku": "", "version": ""}),
            ),
            Want::Patch(
                "/resourceGroups/rg/providers/Microsoft.Compute/galleries/gallery_x/images/x-gen2/versions/latest",
                "azureopenshift:aro4:416-v2:416.94.20240701",
                json!({"image": {"publisher": "azureopenshift", "offer": "aro4", "sku": "416-v2", "version": "416.94.20240701", "resourceID": "", "type": "MarketplaceNoPlan"}}),
            ),
        ),
        (
            Case::new("up to date", "azure").stream(MP).edit(
                image,
                json!({"publisher": "azureopenshift", "offer": "aro4", "sku": "416-v2", "version": "416.94.20240701", "resourceID": "", "type": "MarketplaceNoPlan"}),
            ),
            Want::UpToDate("azureopenshift:aro4:416-v2:416.94.20240701"),
        ),
        (
            Case::new("unknown marketplace offer", "azure")
                .stream(MP)
                .edit(image, json!({"publisher": "acme", "offer": "golden", "sku": "1", "version": "1", "resourceID": ""})),
            Want::Error(PlanErrorKind::AzureVariant { publisher: "acme".into(), offer: "golden".into() }),
        ),
        (
            Case::new("trusted launch keeps its image", "azure")
                .stream(MP)
                .edit("/spec/template/spec/providerSpec/value/securityProfile", json!({"settings": {"securityType": "TrustedLaunch"}})),
            Want::Skip(SkipReason::AzureSecurityType("TrustedLaunch".into())),
        ),
        (
            Case::new("ppc64le", "azure").stream(MP).edit(ARCH, json!("kubernetes.io/arch=ppc64le")),
            Want::Skip(SkipReason::AzureArchitecture(Arch::Ppc64le)),
        ),
        (
            Case::new("stream without marketplace images", "azure"),
            Want::Skip(SkipReason::AzureNoMarketplace { arch: Arch::X86_64, stream: "rhcos-4.16".into() }),
        ),
        (
            Case::new("arm64 has no unpaid Gen1", "azure")
                .stream(MP)
                .edit(ARCH, json!("kubernetes.io/arch=arm64"))
                .edit(format!("{image}/type"), json!("MarketplaceWithPlan"))
                .edit(format!("{image}/sku"), json!("aro_gen1")),
            Want::Error(PlanErrorKind::Stream(mco_bootimage::stream::StreamError::MissingAzureImage {
                stream: "rhcos-4.16".into(),
                arch: "aarch64",
                variant: mco_bootimage::stream::AzureVariant::NoPurchasePlan,
                generation: mco_bootimage::stream::HyperVGen::Gen1,
            })),
        ),
        (
            Case::new("no image", "azure").stream(MP).edit(image, json!(REMOVE)),
            Want::Error(PlanErrorKind::Field { path: ".image".into(), problem: "is missing".into() }),
        ),
    ]);
}

#[test]
fn vsphere() {
    let template = Some("ci-ln-6vjqx8t-c1627-bwxkr-rhcos-generated-region-generated-zone");
    run(vec![
        (
            Case::new("configured vSphere names the template and release", "vsphere")
                .infra("spec: {platformSpec: {type: VSphere, vsphere: {vcenters: []}}}\nstatus: {platformStatus: {type: VSphere}}"),
            Want::Template(template, "416.94.202405291527-0"),
        ),
        (Case::new("without an Infrastructure", "vsphere"), Want::Template(template, "416.94.202405291527-0")),
        (
            Case::new("no platformSpec.vsphere", "vsphere").infra("status: {platformStatus: {type: VSphere}}"),
            Want::Skip(SkipReason::VsphereNotConfigured),
        ),
        (
            Case::new("aarch64 has no OVA", "vsphere").default_arch(Some(Arch::Aarch64)),
            Want::Error(PlanErrorKind::Stream(mco_bootimage::stream::StreamError::MissingVmwareRelease {
                stream: "rhcos-4.16".into(),
                arch: "aarch64",
            })),
        ),
        (
            Case::new("template of the wrong shape", "vsphere").edit("/spec/template/spec/providerSpec/value/template", json!(7)),
            Want::Error(PlanErrorKind::Field { path: ".template".into(), problem: "is not a string".into() }),
        ),
    ]);
}

#[test]
fn vsphere_ova_from_the_real_stream() {
    let ova = stream("rhcos-4.16-stream.json").vmware_ova(Arch::X86_64).unwrap();
    assert_eq!(
        ova,
        VmwareOva {
            release: "416.94.202405291527-0".into(),
            location: "https://rhcos.mirror.openshift.com/art/storage/prod/streams/4.16-9.4/builds/416.94.202405291527-0/x86_64/rhcos-416.94.202405291527-0-vmware.x86_64.ova".into(),
            sha256: "3be3bdfb8e835635ee16ac3a2693bed52c1c5eabf28e6402a01419cb69aa36f7".into(),
        }
    );
}

#[test]
fn skip_reasons_that_reset_the_skew_baseline() {
    assert!(SkipReason::OwnerReferences(vec![]).counts_as_skipped());
    assert!(SkipReason::GcpCustomImage(String::new()).counts_as_skipped());
    assert!(SkipReason::AmiOwnerUnknown { ami: String::new() }.counts_as_skipped());
    assert!(!SkipReason::Windows.counts_as_skipped());
    assert!(!SkipReason::OsStream("rhel-10".into()).counts_as_skipped());
    assert!(!SkipReason::AzureSecurityType("ConfidentialVM".into()).counts_as_skipped());
}
