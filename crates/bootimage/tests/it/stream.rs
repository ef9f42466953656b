//! Reading stream metadata: the real streams, and the errors for broken ones.

use std::path::Path;

use mco_bootimage::ec2::{AmiOwner, AmiOwnerLookup, KnownStreams};
use mco_bootimage::stream::{AwsImage, AzureMarketplaceImage, AzureVariant, HyperVGen, StreamError};
use mco_bootimage::{Arch, Stream};

fn read(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)).unwrap()
}

#[test]
fn real_streams() {
    let s416 = Stream::parse(&read("rhcos-4.16-stream.json")).unwrap();
    assert_eq!(s416.name(), "rhcos-4.16");
    assert_eq!(
        s416.aws_image(Arch::X86_64, "eu-west-1").unwrap(),
        AwsImage { ami: "ami-0e48f85ec57bd7baa".into(), release: "416.94.202405291527-0".into() }
    );
    assert_eq!(s416.all_amis().len(), 62, "31 regions for each of x86_64 and aarch64");
    assert_eq!(
        s416.gcp_image(Arch::Aarch64).unwrap(),
        "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-aarch64"
    );
    assert_eq!(s416.azure_image(Arch::X86_64, AzureVariant::NoPurchasePlan, HyperVGen::Gen2), Ok(None));
    assert_eq!(
        s416.aws_image(Arch::Ppc64le, "us-east-1"),
        Err(StreamError::MissingAwsRegion { stream: "rhcos-4.16".into(), arch: "ppc64le", region: "us-east-1".into() })
    );

    let s411 = Stream::parse(&read("rhcos-4.11-stream.json")).unwrap();
    assert_eq!(
        s411.gcp_image(Arch::X86_64).unwrap(),
        "projects/openshift-rhcos-devel/global/images/rhcos-411-86-202205051017-0-gcp-x86-64"
    );
    assert_eq!(s411.vmware_ova(Arch::X86_64).unwrap().release, "411.86.202205051017-0");

    let known = KnownStreams::new([&s411]);
    assert_eq!(known.owner("ami-052ef3d8b962bffa1", "us-east-1"), Ok(AmiOwner::RedHat));
    assert_eq!(known.owner("ami-05483066c3caaccf5", "us-east-1"), Ok(AmiOwner::Unknown), "a 4.16 AMI is not in 4.11");

    let mp = Stream::parse(&read("rhcos-4.16-azure-marketplace.json")).unwrap();
    assert_eq!(
        mp.azure_image(Arch::X86_64, AzureVariant::OkeEmea, HyperVGen::Gen1),
        Ok(Some(AzureMarketplaceImage {
            publisher: "redhat-limited".into(),
            offer: "rh-oke-worker".into(),
            sku: "rh-oke-worker-gen1".into(),
            version: "413.92.2023101700".into(),
        }))
    );
}

#[test]
fn broken_streams() {
    let cases: &[(&str, &str)] = &[
        ("", "stream metadata is not valid: EOF while parsing a value at line 1 column 0"),
        ("{", "stream metadata is not valid: EOF while parsing an object at line 1 column 1"),
        ("[]", "stream metadata is not valid: not a JSON object"),
        (r#"{"stream": "x"}"#, "stream metadata is not valid: missing field `architectures`"),
        (r#"{"architectures": {}}"#, "stream metadata is not valid: missing field `stream`"),
        (r#"{"stream": "x", "architectures": {}}"#, "stream metadata is not valid: stream x lists no architectures"),
        (
            r#"{"stream": "x", "architectures": {"x86_64": {"artifacts": {"aws": {"release": 5, "formats": {}}}}}}"#,
            "stream metadata is not valid: invalid type: integer `5`, expected a string",
        ),
        (
            r#"{"stream": "x", "architectures": {"x86_64": {"artifacts": {}, "images": {"aws": {"regions": {"r": {"image": "ami-1"}}}}}}}"#,
            "stream metadata is not valid: missing field `release`",
        ),
    ];
    for (json, want) in cases {
        let err = Stream::parse(json.as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), *want, "{json}");
    }
    let minimal = Stream::parse(br#"{"stream": "x", "architectures": {"x86_64": {"artifacts": {}}}}"#).unwrap();
    assert_eq!(
        minimal.aws_image(Arch::Aarch64, "us-east-1"),
        Err(StreamError::MissingArchitecture { stream: "x".into(), arch: "aarch64" })
    );
    assert_eq!(
        minimal.gcp_image(Arch::X86_64).unwrap_err().to_string(),
        "stream x has no GCP image for architecture x86_64"
    );
    assert_eq!(
        minimal.vmware_ova(Arch::X86_64).unwrap_err().to_string(),
        "stream x has no vmware release for architecture x86_64"
    );
}
