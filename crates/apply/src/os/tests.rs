use super::*;
use crate::plan::KargsChange;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn lines(cmds: &[Cmd]) -> Vec<String> {
    cmds.iter().map(Cmd::to_string).collect()
}

#[test]
fn rpm_ostree_pulls_ahead_without_deploying_unless_the_host_runs_the_image() {
    let booted = OsStatus { booted_image: Some("reg/os@sha256:1".into()), ..Default::default() };
    let pull = rpm_ostree_pull_ahead("reg/os@sha256:2", &booted).map(|c| c.to_string());
    assert_eq!(
        pull.as_deref(),
        Some("rpm-ostree rebase --experimental --download-only ostree-unverified-registry:reg/os@sha256:2")
    );
    assert_eq!(rpm_ostree_pull_ahead("reg/os@sha256:1", &booted).map(|c| c.to_string()), None);
    let extensions = OsStatus { requested_packages: s(&["usbguard"]), ..booted.clone() };
    assert_eq!(rpm_ostree_pull_ahead("reg/os@sha256:2", &extensions).map(|c| c.to_string()), None);
    let realtime = OsStatus { requested_base_removals: s(&["kernel"]), ..booted };
    assert_eq!(rpm_ostree_pull_ahead("reg/os@sha256:2", &realtime).map(|c| c.to_string()), None);
}

#[test]
fn rpm_ostree_command_lines_match_upstream() {
    let plain = OsStatus { booted_image: Some("reg/os@sha256:1".into()), ..Default::default() };
    let rt_booted = OsStatus {
        booted_image: Some("reg/os@sha256:1".into()),
        requested_packages: s(&["kernel-rt-core", "kernel-rt-modules", "usbguard"]),
        requested_base_removals: s(&["kernel", "kernel-core", "kernel-modules"]),
        ..Default::default()
    };
    let cases: Vec<(&str, OsChanges, &OsStatus, &str, Vec<&str>)> = vec![
        (
            "rebase",
            OsChanges {
                image: Some("reg/os@sha256:2".into()),
                kernel: Some(KernelType::Default),
                ..Default::default()
            },
            &plain,
            "x86_64",
            vec![
                "rpm-ostree cleanup -p",
                "rpm-ostree rebase --experimental ostree-unverified-registry:reg/os@sha256:2",
            ],
        ),
        (
            "already booted into the image",
            OsChanges { image: Some("reg/os@sha256:1".into()), ..Default::default() },
            &plain,
            "x86_64",
            vec!["rpm-ostree cleanup -p"],
        ),
        (
            "kargs: upstream TestKernelAguments vector",
            OsChanges {
                kargs: Some(KargsChange {
                    delete: s(&["foo", "bar=1", "hello=world", "baz"]),
                    append: s(&["foo", "bar=1", "hello=world"]),
                }),
                ..Default::default()
            },
            &plain,
            "x86_64",
            vec![
                "rpm-ostree cleanup -p",
                "rpm-ostree kargs --delete-if-present=foo --delete-if-present=bar=1 --delete-if-present=hello=world \
                 --delete-if-present=baz --append=foo --append=bar=1 --append=hello=world",
            ],
        ),
        (
            "to realtime",
            OsChanges { kernel: Some(KernelType::Realtime), ..Default::default() },
            &plain,
            "x86_64",
            vec![
                "rpm-ostree cleanup -p",
                "rpm-ostree override remove kernel kernel-core kernel-modules kernel-modules-core kernel-modules-extra \
                 --install kernel-rt-core --install kernel-rt-modules --install kernel-rt-modules-extra",
            ],
        ),
        (
            "realtime back to default resets the override",
            OsChanges { kernel: Some(KernelType::Default), ..Default::default() },
            &rt_booted,
            "x86_64",
            vec![
                "rpm-ostree cleanup -p",
                "rpm-ostree override reset kernel kernel-core kernel-modules --uninstall kernel-rt-core \
                 --uninstall kernel-rt-modules",
            ],
        ),
        (
            "64k-pages on aarch64",
            OsChanges { kernel: Some(KernelType::SixtyFourKPages), ..Default::default() },
            &plain,
            "aarch64",
            vec![
                "rpm-ostree cleanup -p",
                "rpm-ostree override remove kernel kernel-core kernel-modules kernel-modules-core kernel-modules-extra \
                 --install kernel-64k-core --install kernel-64k-modules --install kernel-64k-modules-core \
                 --install kernel-64k-modules-extra",
            ],
        ),
        (
            "extensions: install missing, uninstall dropped allow-listed packages",
            OsChanges { extensions: Some(s(&["kerberos"])), ..Default::default() },
            &rt_booted,
            "x86_64",
            vec![
                "rpm-ostree cleanup -p",
                "rpm-ostree update --install krb5-workstation --install libkadm5 --uninstall usbguard",
            ],
        ),
    ];
    for (name, changes, status, arch, want) in cases {
        let want: Vec<String> = want.into_iter().map(|w| w.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(lines(&rpm_ostree_commands(&changes, status, arch).unwrap()), want, "{name}");
    }
    let err = rpm_ostree_commands(
        &OsChanges { kernel: Some(KernelType::SixtyFourKPages), ..Default::default() },
        &plain,
        "x86_64",
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "kernelType 64k-pages is only supported on aarch64, this node is x86_64");
}

#[test]
fn extension_packages_are_sorted_and_unknown_ones_refused() {
    let (install, uninstall) =
        extension_packages(&s(&["sysstat", "kerberos"]), &s(&["sysstat", "vim", "libkadm5"])).unwrap();
    assert_eq!(install, s(&["krb5-workstation"]));
    assert_eq!(uninstall, Vec::<String>::new(), "vim is not allow-listed; the rest is required");
    assert_eq!(extension_packages(&s(&["nope"]), &[]).unwrap_err().to_string(), "extension \"nope\" is not supported");
}

#[test]
fn rpm_ostree_status_reads_the_booted_deployment() {
    let json = r#"{"deployments": [
        {"id": "rhcos-abc.1", "osname": "rhcos", "booted": false, "staged": true,
         "container-image-reference": "ostree-unverified-registry:quay.io/os@sha256:new",
         "requested-packages": [], "requested-base-removals": []},
        {"id": "rhcos-def.0", "osname": "rhcos", "booted": true, "staged": false,
         "container-image-reference": "ostree-unverified-registry:quay.io/os@sha256:cur",
         "custom-origin": ["pivot://quay.io/old@sha256:x", "x"],
         "requested-packages": ["usbguard"], "requested-base-removals": ["kernel"]}],
        "transaction": null, "cached-update": null}"#;
    let status = parse_rpm_ostree_status(json, "rw ostree=/ostree/boot.1 foo=bar\n").unwrap();
    assert_eq!(
        status,
        OsStatus {
            booted_image: Some("quay.io/os@sha256:cur".into()),
            kargs: s(&["rw", "ostree=/ostree/boot.1", "foo=bar"]),
            requested_packages: s(&["usbguard"]),
            requested_base_removals: s(&["kernel"]),
            staged: true,
        }
    );
    let pivot = r#"{"deployments": [{"booted": true, "custom-origin": ["pivot://quay.io/old@sha256:x"]}]}"#;
    assert_eq!(parse_rpm_ostree_status(pivot, "").unwrap().booted_image.as_deref(), Some("quay.io/old@sha256:x"));
    assert!(parse_rpm_ostree_status(r#"{"deployments": []}"#, "").is_err());
}

#[test]
fn bootc_switches_images_and_refuses_what_it_cannot_do() {
    let status = parse_bootc_status(
        r#"{"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "host"},
            "spec": {"image": {"image": "quay.io/os:1", "transport": "registry"}},
            "status": {"staged": null, "rollback": null,
                       "booted": {"image": {"image": {"image": "quay.io/os@sha256:1", "transport": "registry"},
                                            "version": "1", "imageDigest": "sha256:1"},
                                  "incompatible": false, "pinned": false}}}"#,
        "BOOT_IMAGE=/vmlinuz root=UUID=x\n",
    )
    .unwrap();
    assert_eq!(status.booted_image.as_deref(), Some("quay.io/os@sha256:1"));
    assert!(!status.staged);
    assert_eq!(status.kargs, s(&["BOOT_IMAGE=/vmlinuz", "root=UUID=x"]));
    let switch = OsChanges {
        image: Some("quay.io/os@sha256:2".into()),
        kernel: Some(KernelType::Default),
        ..Default::default()
    };
    assert_eq!(lines(&bootc_commands(&switch, &status).unwrap()), ["bootc switch quay.io/os@sha256:2"]);
    let same = OsChanges { image: Some("quay.io/os@sha256:1".into()), ..Default::default() };
    assert!(bootc_commands(&same, &status).unwrap().is_empty());
    for refused in [
        OsChanges { kargs: Some(KargsChange::default()), ..Default::default() },
        OsChanges { kernel: Some(KernelType::Realtime), ..Default::default() },
        OsChanges { extensions: Some(s(&["usbguard"])), ..Default::default() },
    ] {
        assert!(bootc_commands(&refused, &status).is_err(), "{refused:?}");
    }
}
