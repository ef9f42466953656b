//! Skew enforcement tables: version parsing of both RHCOS forms and of OCP versions, mode
//! resolution, automatic bookkeeping, the Upgradeable verdict with upstream's exact messages,
//! and the per-machine check the server and firstboot use.

use mco_api::operator::{
    BootImageSkewEnforcementConfig, BootImageSkewEnforcementConfigMode, BootImageSkewEnforcementModeStatus as Mode,
    BootImageSkewEnforcementStatus, ClusterBootImageAutomatic, ClusterBootImageManual, ClusterBootImageManualMode,
    ManagedBootImages,
};
use mco_bootimage::skew::{
    ClusterVersion, ConditionView, ModeInputs, NodeVerdict, OcpVersion, RhcosVersion, RhelVersion, SKEW_ERROR_REASON,
    SyncOutcome, Verdict, VersionError, automatic_after_sync, check_cluster_boot_image, check_node_boot_image,
    check_stream_boot_image, resolve_mode, stream_major, upgradeable,
};

#[test]
fn rhcos_versions() {
    let ok = |s: &str, major, minor, legacy| {
        assert_eq!(
            RhcosVersion::parse(s),
            Ok(RhcosVersion { raw: s.to_string(), rhel: RhelVersion { major, minor }, legacy }),
            "{s}"
        )
    };
    ok("9.6.20251023-0", 9, 6, false);
    ok("10.0.20260101-3", 10, 0, false);
    ok("9.2.20240101-0", 9, 2, false);
    ok("416.94.202405291527-0", 9, 4, true);
    ok("411.86.202205051017-0", 8, 6, true);
    ok("415.92.202311241643-0", 9, 2, true);
    ok("413.810.202301011200-0", 8, 10, true);
    let bad = |s: &str, problem: &str| match RhcosVersion::parse(s) {
        Err(VersionError::Rhcos { value, problem: p }) => {
            assert_eq!(value, s);
            assert!(p.contains(problem), "{s}: {p}");
        }
        other => panic!("{s}: {other:?}"),
    };
    bad("", "three dot-separated parts");
    bad("9.6", "three dot-separated parts");
    bad("9.6.20251023-0.1", "three dot-separated parts");
    bad("9.6.20251023", "missing -<serial>");
    bad("9.6.2025102-0", "8 (YYYYMMDD) or 12");
    bad("9.6.202510231-0", "8 (YYYYMMDD) or 12");
    bad("9.x.20251023-0", "major and minor must be numbers");
    bad("9.6.2025x023-0", "timestamp and serial must be numbers");
    bad("416.9.202405291527-0", "legacy minor part");
}

#[test]
fn ocp_versions() {
    let ok = |s: &str, want: (u64, u64, u64)| {
        assert_eq!(OcpVersion::parse(s), Ok(OcpVersion { major: want.0, minor: want.1, patch: want.2 }), "{s}")
    };
    ok("4.13.0", (4, 13, 0));
    ok("4.12.5", (4, 12, 5));
    ok("v4.16.3", (4, 16, 3));
    ok("4.18.0-0.nightly-2025-01-01-000000", (4, 18, 0));
    ok("4.14", (4, 14, 0));
    ok("4.20.0+build.1", (4, 20, 0));
    for bad in ["", "4", "four.13", "4.013.0", "4.13.0.1", "x4.13.0"] {
        assert!(matches!(OcpVersion::parse(bad), Err(VersionError::Ocp { .. })), "{bad}");
    }
    assert!(OcpVersion::parse("4.12.99").unwrap() < OcpVersion::parse("4.13.0").unwrap());
    assert!(OcpVersion::parse("4.9.0").unwrap() < OcpVersion::parse("4.13.0").unwrap());
}

fn history(entries: &[(&str, &str)]) -> ClusterVersion {
    let yaml = format!(
        "status:\n  history:\n{}",
        entries.iter().map(|(state, v)| format!("  - {{state: {state}, version: \"{v}\"}}\n")).collect::<String>()
    );
    serde_yaml::from_str(&yaml).unwrap()
}

#[test]
fn install_and_docs_versions() {
    // Newest first; the install version is the oldest Completed entry.
    let cv = history(&[("Partial", "4.17.0"), ("Completed", "4.16.2"), ("Completed", "4.15.0-0.nightly-x")]);
    assert_eq!(cv.install_version(), "4.15.0");
    assert_eq!(cv.docs_version(), "4.17");
    let cv = history(&[("Partial", "4.16.0"), ("Partial", "4.15.1")]);
    assert_eq!(cv.install_version(), "4.15.1");
    let cv = history(&[("Completed", "garbage")]);
    assert_eq!(cv.install_version(), "0.0.0");
    assert_eq!(cv.docs_version(), "latest");
    assert_eq!(ClusterVersion::default().install_version(), "0.0.0");
    assert_eq!(ClusterVersion::default().docs_version(), "latest");
}

fn managed(mode: &str) -> ManagedBootImages {
    serde_yaml::from_str(&format!(
        "machineManagers: [{{resource: machinesets, apiGroup: machine.openshift.io, selection: {{mode: {mode}}}}}]"
    ))
    .unwrap()
}

fn manual_ocp(v: &str) -> ClusterBootImageManual {
    ClusterBootImageManual {
        mode: Some(ClusterBootImageManualMode::OcpVersion),
        ocp_version: Some(v.to_string()),
        rhcos_version: None,
    }
}

fn status(
    mode: Mode,
    automatic: Option<ClusterBootImageAutomatic>,
    manual: Option<ClusterBootImageManual>,
) -> BootImageSkewEnforcementStatus {
    BootImageSkewEnforcementStatus { mode: Some(mode), automatic, manual }
}

fn auto_ocp(v: &str) -> Option<ClusterBootImageAutomatic> {
    Some(ClusterBootImageAutomatic { ocp_version: Some(v.to_string()), rhcos_version: None })
}

#[test]
fn mode_resolution() {
    let all = managed("All");
    let partial = managed("Partial");
    let spec_manual = BootImageSkewEnforcementConfig {
        mode: Some(BootImageSkewEnforcementConfigMode::Manual),
        manual: Some(manual_ocp("4.14.0")),
    };
    let spec_none =
        BootImageSkewEnforcementConfig { mode: Some(BootImageSkewEnforcementConfigMode::None), manual: None };
    let existing_auto = status(Mode::Automatic, auto_ocp("4.18.0"), None);
    let base = ModeInputs {
        platform_type: "AWS",
        platform_supported: true,
        managed_boot_images: Some(&all),
        install_version: "4.12.0",
        ..Default::default()
    };
    let cases: Vec<(&str, ModeInputs<'_>, BootImageSkewEnforcementStatus)> = vec![
        (
            "spec Manual wins",
            ModeInputs { spec: Some(&spec_manual), ..base.clone() },
            status(Mode::Manual, None, Some(manual_ocp("4.14.0"))),
        ),
        ("spec None wins", ModeInputs { spec: Some(&spec_none), ..base.clone() }, status(Mode::None, None, None)),
        (
            "BareMetal without legacy provisioning",
            ModeInputs { platform_type: "BareMetal", platform_supported: false, ..base.clone() },
            status(Mode::None, None, None),
        ),
        (
            "BareMetal on the legacy provisioning path is Manual",
            ModeInputs {
                platform_type: "BareMetal",
                platform_supported: false,
                baremetal_legacy_provisioning: true,
                ..base.clone()
            },
            status(Mode::Manual, None, Some(manual_ocp("4.12.0"))),
        ),
        ("single node", ModeInputs { single_replica: true, ..base.clone() }, status(Mode::None, None, None)),
        ("all MachineSets managed", base.clone(), status(Mode::Automatic, auto_ocp("4.12.0"), None)),
        (
            "Automatic keeps the values the controller maintains",
            ModeInputs { current: Some(&existing_auto), ..base.clone() },
            existing_auto.clone(),
        ),
        (
            "Partial selection is Manual at the install version",
            ModeInputs { managed_boot_images: Some(&partial), ..base.clone() },
            status(Mode::Manual, None, Some(manual_ocp("4.12.0"))),
        ),
        (
            "unsupported platform is Manual",
            ModeInputs { platform_type: "OpenStack", platform_supported: false, ..base.clone() },
            status(Mode::Manual, None, Some(manual_ocp("4.12.0"))),
        ),
        (
            "no effective configuration is Manual",
            ModeInputs { managed_boot_images: None, ..base.clone() },
            status(Mode::Manual, None, Some(manual_ocp("4.12.0"))),
        ),
    ];
    for (name, inputs, want) in cases {
        assert_eq!(resolve_mode(&inputs), want, "{name}");
    }
}

#[test]
fn automatic_bookkeeping() {
    let clean = SyncOutcome::default();
    assert_eq!(automatic_after_sync(&clean, Some("4.18.3"), "4.12.0"), auto_ocp("4.18.3"));
    assert_eq!(automatic_after_sync(&clean, Some("4.18.0-rc.1"), "4.12.0"), auto_ocp("4.18.0"));
    assert_eq!(automatic_after_sync(&clean, None, "4.12.0"), None);
    assert_eq!(automatic_after_sync(&clean, Some("nope"), "4.12.0"), None);
    let marketplace = SyncOutcome { lowest_marketplace_rhcos: Some("9.6.20251023-0".into()), ..Default::default() };
    assert_eq!(
        automatic_after_sync(&marketplace, Some("4.18.3"), "4.12.0"),
        Some(ClusterBootImageAutomatic { ocp_version: None, rhcos_version: Some("9.6.20251023-0".into()) })
    );
    let skipped = SyncOutcome { skipped: 1, ..Default::default() };
    assert_eq!(automatic_after_sync(&skipped, Some("4.18.3"), "4.12.0"), auto_ocp("4.12.0"));
    let errored = SyncOutcome { skipped: 1, errored: 1, ..Default::default() };
    assert_eq!(automatic_after_sync(&errored, Some("4.18.3"), "4.12.0"), None);
}

const DOCS: &str = "To enable upgrades, please update your boot images or disable boot image skew enforcement by following the documentation at https://docs.redhat.com/en/documentation/openshift_container_platform/4.18/html/machine_configuration/mco-update-boot-skew-mgmt";

fn blocked(detail: &str) -> Verdict {
    Verdict::Blocked {
        reason: SKEW_ERROR_REASON,
        message: format!("Upgrades have been disabled because {detail}. {DOCS}"),
    }
}

#[test]
fn upgradeable_verdicts() {
    let settled = [
        ConditionView { type_: "BootImageUpdateProgressing", status: "False", message: "" },
        ConditionView { type_: "BootImageUpdateDegraded", status: "False", message: "" },
    ];
    let progressing = [ConditionView { type_: "BootImageUpdateProgressing", status: "True", message: "" }];
    let degraded = [
        ConditionView { type_: "BootImageUpdateProgressing", status: "False", message: "" },
        ConditionView {
            type_: "BootImageUpdateDegraded",
            status: "True",
            message: "1 Degraded MAPI MachineSets | boom",
        },
    ];
    let rhcos = |v: &str| ClusterBootImageManual {
        mode: Some(ClusterBootImageManualMode::RhcosVersion),
        ocp_version: None,
        rhcos_version: Some(v.to_string()),
    };
    let auto_rhcos =
        |v: &str| Some(ClusterBootImageAutomatic { ocp_version: None, rhcos_version: Some(v.to_string()) });
    let ocp_old =
        "the cluster is using OCP boot image version 4.12.0, which is below the minimum required version 4.13.0";
    let cases: Vec<(&str, Option<BootImageSkewEnforcementStatus>, &[ConditionView<'_>], Verdict)> = vec![
        ("no status", None, &settled, Verdict::Upgradeable),
        ("mode None", Some(status(Mode::None, None, None)), &settled, Verdict::Upgradeable),
        ("manual old OCP", Some(status(Mode::Manual, None, Some(manual_ocp("4.12.0")))), &settled, blocked(ocp_old)),
        ("manual OCP at the limit", Some(status(Mode::Manual, None, Some(manual_ocp("4.13.0")))), &settled, Verdict::Upgradeable),
        (
            "manual legacy RHCOS on RHEL 8.6",
            Some(status(Mode::Manual, None, Some(rhcos("411.86.202205051017-0")))),
            &settled,
            blocked("the cluster is using RHCOS boot image version 411.86.202205051017-0(RHEL version: 8.6), which is below the minimum required RHEL version 9.2"),
        ),
        (
            "manual new RHCOS 9.1",
            Some(status(Mode::Manual, None, Some(rhcos("9.1.20240101-0")))),
            &settled,
            blocked("the cluster is using RHCOS boot image version 9.1.20240101-0(RHEL version: 9.1), which is below the minimum required RHEL version 9.2"),
        ),
        ("manual legacy RHCOS on RHEL 9.2", Some(status(Mode::Manual, None, Some(rhcos("415.92.202311241643-0")))), &settled, Verdict::Upgradeable),
        ("manual new RHCOS 9.6", Some(status(Mode::Manual, None, Some(rhcos("9.6.20251023-0")))), &settled, Verdict::Upgradeable),
        (
            "OCP version wins over RHCOS",
            Some(status(
                Mode::Manual,
                None,
                Some(ClusterBootImageManual { ocp_version: Some("4.12.0".into()), ..rhcos("9.6.20251023-0") }),
            )),
            &settled,
            blocked(ocp_old),
        ),
        ("automatic old, settled", Some(status(Mode::Automatic, auto_ocp("4.12.0"), None)), &settled, blocked(ocp_old)),
        ("automatic old, still progressing", Some(status(Mode::Automatic, auto_ocp("4.12.0"), None)), &progressing, Verdict::Upgradeable),
        ("automatic old, no conditions yet", Some(status(Mode::Automatic, auto_ocp("4.12.0"), None)), &[], Verdict::Upgradeable),
        (
            "automatic RHCOS 8.6",
            Some(status(Mode::Automatic, auto_rhcos("411.86.202205051017-0"), None)),
            &settled,
            blocked("the cluster is using RHCOS boot image version 411.86.202205051017-0(RHEL version: 8.6), which is below the minimum required RHEL version 9.2"),
        ),
        (
            "automatic degraded",
            Some(status(Mode::Automatic, auto_ocp("4.18.0"), None)),
            &degraded,
            Verdict::Blocked {
                reason: SKEW_ERROR_REASON,
                message: "Upgrades have been disabled due to boot image update failures: boot image controller is degraded: 1 Degraded MAPI MachineSets | boom".into(),
            },
        ),
        ("manual without versions", Some(status(Mode::Manual, None, Some(ClusterBootImageManual::default()))), &settled, Verdict::Upgradeable),
    ];
    for (name, status, conditions, want) in cases {
        assert_eq!(upgradeable(status.as_ref(), conditions, "4.18"), Ok(want), "{name}");
    }
    let unparseable = status(Mode::Manual, None, Some(rhcos("9.6.2025-0")));
    assert!(matches!(upgradeable(Some(&unparseable), &settled, "4.18"), Err(VersionError::Rhcos { .. })));
    let latest = upgradeable(Some(&status(Mode::Manual, None, Some(manual_ocp("4.1.0")))), &settled, "latest").unwrap();
    let Verdict::Blocked { message, .. } = latest else { panic!("{latest:?}") };
    assert!(
        message.ends_with("/openshift_container_platform/latest/html/machine_configuration/mco-update-boot-skew-mgmt")
    );
}

#[test]
fn node_boot_image_check() {
    let manual = status(Mode::Manual, None, Some(manual_ocp("4.14.0")));
    let automatic = status(Mode::Automatic, auto_ocp("4.18.0"), None);
    let none = status(Mode::None, None, None);
    let refused = |detail: &str| NodeVerdict::Refused {
        message: format!(
            "boot image is too old: {detail}; update the boot images (or disable boot image skew enforcement) and reprovision this machine"
        ),
    };
    let cases = [
        (
            Some(&manual),
            "411.86.202205051017-0",
            refused(
                "RHCOS boot image version 411.86.202205051017-0(RHEL version: 8.6) is below the minimum required RHEL version 9.2",
            ),
        ),
        (
            Some(&automatic),
            "9.1.20240101-0",
            refused(
                "RHCOS boot image version 9.1.20240101-0(RHEL version: 9.1) is below the minimum required RHEL version 9.2",
            ),
        ),
        (
            Some(&manual),
            "4.12.0",
            refused("OCP boot image version 4.12.0 is below the minimum required version 4.13.0"),
        ),
        (Some(&manual), "415.92.202311241643-0", NodeVerdict::Allowed),
        (Some(&automatic), "9.6.20251023-0", NodeVerdict::Allowed),
        (Some(&automatic), "4.16.0", NodeVerdict::Allowed),
        // Enforcement off: even an ancient or unreadable version is allowed.
        (Some(&none), "410.84.202201251203-0", NodeVerdict::Allowed),
        (None, "garbage", NodeVerdict::Allowed),
    ];
    for (status, version, want) in cases {
        assert_eq!(check_node_boot_image(status, version), Ok(want), "{version}");
    }
    assert!(matches!(check_node_boot_image(Some(&manual), "garbage"), Err(VersionError::Ocp { .. })));
    assert!(matches!(check_node_boot_image(Some(&manual), "9.6.2025102-0"), Err(VersionError::Rhcos { .. })));
}

/// A machine that does not say its boot image is judged by the one the cluster records.
#[test]
fn cluster_boot_image_check() {
    let refused = |detail: &str| NodeVerdict::Refused {
        message: format!(
            "boot image is too old: {detail}; update the boot images (or disable boot image skew enforcement) and reprovision this machine"
        ),
    };
    let manual_rhcos = |v: &str| ClusterBootImageManual {
        mode: Some(ClusterBootImageManualMode::RhcosVersion),
        ocp_version: None,
        rhcos_version: Some(v.to_string()),
    };
    let cases = [
        ("no status", None, NodeVerdict::Allowed),
        ("mode None", Some(status(Mode::None, None, Some(manual_ocp("4.1.0")))), NodeVerdict::Allowed),
        (
            "manual old OCP",
            Some(status(Mode::Manual, None, Some(manual_ocp("4.12.0")))),
            refused(
                "the cluster is using OCP boot image version 4.12.0, which is below the minimum required version 4.13.0",
            ),
        ),
        ("manual OCP at the limit", Some(status(Mode::Manual, None, Some(manual_ocp("4.13.0")))), NodeVerdict::Allowed),
        (
            "manual legacy RHCOS",
            Some(status(Mode::Manual, None, Some(manual_rhcos("412.86.202301010000-0")))),
            refused(
                "the cluster is using RHCOS boot image version 412.86.202301010000-0(RHEL version: 8.6), which is below the minimum required RHEL version 9.2",
            ),
        ),
        (
            "manual current RHCOS",
            Some(status(Mode::Manual, None, Some(manual_rhcos("9.6.20260101-0")))),
            NodeVerdict::Allowed,
        ),
        // Unlike the Upgradeable verdict, conditions do not matter: the recorded version is judged.
        (
            "automatic old OCP",
            Some(status(Mode::Automatic, auto_ocp("4.10.0"), None)),
            refused(
                "the cluster is using OCP boot image version 4.10.0, which is below the minimum required version 4.13.0",
            ),
        ),
        ("automatic current OCP", Some(status(Mode::Automatic, auto_ocp("4.18.0"), None)), NodeVerdict::Allowed),
        (
            "manual without versions",
            Some(status(Mode::Manual, None, Some(ClusterBootImageManual::default()))),
            NodeVerdict::Allowed,
        ),
    ];
    for (name, status, want) in cases {
        assert_eq!(check_cluster_boot_image(status.as_ref()), Ok(want), "{name}");
    }
    let unreadable = status(Mode::Manual, None, Some(manual_rhcos("9.6.2025-0")));
    assert!(matches!(check_cluster_boot_image(Some(&unreadable)), Err(VersionError::Rhcos { .. })));
}

/// Managers of (resource, mode), in order.
fn managers(
    of: &[(mco_api::operator::MachineManagerResource, mco_api::operator::MachineManagerSelectorMode)],
) -> ManagedBootImages {
    use mco_api::operator::{
        MachineManager, MachineManagerApiGroup, MachineManagerResource, MachineManagerSelector,
        MachineManagerSelectorMode,
    };
    let manager = |(resource, mode): &(MachineManagerResource, MachineManagerSelectorMode)| MachineManager {
        resource: *resource,
        api_group: MachineManagerApiGroup::MachineApi,
        selection: MachineManagerSelector { mode: *mode, partial: None },
    };
    ManagedBootImages { machine_managers: Some(of.iter().map(manager).collect()) }
}

#[test]
fn effective_managed_boot_images_and_default_opt_in() {
    use mco_api::operator::MachineManagerResource::{ControlPlaneMachineSets as Cpms, MachineSets};
    use mco_api::operator::MachineManagerSelectorMode::{All, None as Off};
    use mco_bootimage::platform::Support;
    use mco_bootimage::skew::{default_opt_in, effective_managed_boot_images};
    let on = Support { supported: true, cpms_supported: true, default_on: true, platform: None };
    // vSphere: MachineSets, no ControlPlaneMachineSets.
    let no_cpms = Support { cpms_supported: false, ..on };
    let unsupported = Support { supported: false, cpms_supported: false, default_on: false, platform: None };
    let empty = ManagedBootImages { machine_managers: Some(vec![]) };
    let unset = ManagedBootImages { machine_managers: None };
    let (all, off) = (managers(&[(MachineSets, All)]), managers(&[(MachineSets, Off)]));
    // Where ControlPlaneMachineSets are supported, they are managed only when the admin says so.
    let all_cpms_off = managers(&[(MachineSets, All), (Cpms, Off)]);
    let off_cpms_off = managers(&[(MachineSets, Off), (Cpms, Off)]);
    let cpms_all = managers(&[(Cpms, All)]);
    let cpms_all_then_all = managers(&[(Cpms, All), (MachineSets, All)]);
    // (spec, current status, support, effective, opted in by default)
    type Case<'a> =
        (Option<&'a ManagedBootImages>, Option<&'a ManagedBootImages>, Support, Option<&'a ManagedBootImages>, bool);
    let table: [Case<'_>; 11] = [
        // A fresh default-on cluster: All, and that is a default opt-in.
        (None, None, on, Some(&all_cpms_off), true),
        (Some(&unset), Some(&unset), on, Some(&all_cpms_off), true),
        (None, None, no_cpms, Some(&all), true),
        // Already All in the status: not a new opt-in.
        (None, Some(&all_cpms_off), on, Some(&all_cpms_off), false),
        // Opted out (None) before a default-on release: opted in again.
        (None, Some(&off), on, Some(&all_cpms_off), true),
        // The admin's choice wins and is never a default opt-in.
        (Some(&off), None, on, Some(&off_cpms_off), false),
        (Some(&all), None, on, Some(&all_cpms_off), false),
        // Opting ControlPlaneMachineSets in leaves MachineSets to the default.
        (Some(&cpms_all), None, on, Some(&cpms_all_then_all), true),
        // An explicit empty list is a total opt-out.
        (Some(&empty), None, on, Some(&empty), false),
        (Some(&empty), None, no_cpms, Some(&empty), false),
        // Unsupported platforms: no status at all.
        (None, None, unsupported, None, false),
    ];
    for (i, (spec, current, support, effective, opted_in)) in table.into_iter().enumerate() {
        assert_eq!(effective_managed_boot_images(spec, &support).as_ref(), effective, "case {i}");
        assert_eq!(default_opt_in(spec, current, &support), opted_in, "case {i}");
    }
}

#[test]
fn a_pools_os_stream_needs_a_boot_image_of_its_rhel_major() {
    assert_eq!(
        [stream_major("rhel-9"), stream_major("rhel-10"), stream_major("centos-10")],
        [Some(9), Some(10), Some(10)]
    );
    assert_eq!([stream_major("rhel"), stream_major("fedora-coreos-next")], [None, None]);
    for (stream, version, allowed) in [
        ("rhel-9", "9.6.20260101-0", true),
        ("rhel-9", "416.94.202405291527-0", true),
        ("rhel-10", "10.1.20261101-0", true),
        ("centos-10", "10.0.20260101-0", true),
        // Another major: refused, either way.
        ("rhel-10", "9.6.20260101-0", false),
        ("rhel-9", "10.1.20261101-0", false),
        ("rhel-10", "412.86.202301010000-0", false),
        // RHEL 8 boot images pivot to RHEL 9 (skew enforcement judges how old they may be).
        ("rhel-9", "412.86.202301010000-0", true),
        // Nothing to judge: an OCP version says no RHEL major, a stream name without a major.
        ("rhel-10", "4.19.0", true),
        ("custom", "9.6.20260101-0", true),
    ] {
        let verdict = check_stream_boot_image(stream, version).unwrap();
        assert_eq!(verdict == NodeVerdict::Allowed, allowed, "{stream} {version}: {verdict:?}");
    }
    assert_eq!(
        check_stream_boot_image("rhel-10", "9.6.20260101-0").unwrap(),
        NodeVerdict::Refused {
            message: "boot image is of another RHEL major: RHCOS boot image version 9.6.20260101-0(RHEL version: 9.6) \
                      cannot pivot to the pool's OS stream rhel-10 (RHEL 10); RHEL major versions are not \
                      cross-compatible"
                .into()
        }
    );
    assert!(check_stream_boot_image("rhel-10", "9.x").is_err());
}
