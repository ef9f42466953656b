//! Firstboot's boot image skew check (seed 003, "Reactive" 2.): a machine installed from a boot
//! image too old for the OS image it would pivot to must not pivot. The server puts the cluster's
//! skew enforcement status into every config it serves ([`SKEW_STATUS_FILE`]); the machine's
//! boot image is the aleph file's `build` ([`mco_os::aleph`]); the verdict is
//! [`mco_bootimage::skew::check_node_boot_image`]. A refused machine says why on its console
//! ([`ISSUE_FILE`]) and stays as it is, so it can be re-provisioned from a newer boot image.

use std::path::Path;

use mco_api::operator::{BootImageSkewEnforcementModeStatus, BootImageSkewEnforcementStatus};
use mco_bootimage::skew::{NodeVerdict, SKEW_STATUS_FILE, check_node_boot_image};
use mco_os::aleph::{AlephError, BootImage};

/// What the login console shows (agetty reads `/etc/issue.d/*.issue`).
pub const ISSUE_FILE: &str = "/etc/issue.d/mco-boot-image-skew.issue";

/// Whether a machine may pivot: `status` is the served skew file (`None`: no file, no check; a
/// parse error: the file's problem); `aleph` is what reading the boot image's aleph file at
/// `aleph_path` gave. Enforcement off allows everything; with it on, a boot image that cannot be
/// read cannot be judged and is refused.
pub fn firstboot_verdict(
    status: Option<Result<BootImageSkewEnforcementStatus, String>>,
    aleph_path: &Path,
    aleph: Result<Option<BootImage>, AlephError>,
) -> NodeVerdict {
    let refused = |detail: String| NodeVerdict::Refused {
        message: format!("cannot judge this machine's boot image against boot image skew enforcement: {detail}"),
    };
    let status = match status {
        None => return NodeVerdict::Allowed,
        Some(Ok(status)) => status,
        Some(Err(problem)) => return refused(format!("{SKEW_STATUS_FILE}: {problem}")),
    };
    if status.mode.is_none_or(|mode| mode == BootImageSkewEnforcementModeStatus::None) {
        return NodeVerdict::Allowed;
    }
    let build = match aleph {
        Ok(Some(image)) => image.build,
        Ok(None) => return refused(format!("{} does not exist", aleph_path.display())),
        Err(e) => return refused(e.to_string()),
    };
    match check_node_boot_image(Some(&status), &build) {
        Ok(verdict) => verdict,
        Err(e) => refused(format!("{}: build: {e}", aleph_path.display())),
    }
}

/// Reads the served skew file from the node root `root`; `None` when there is none.
pub fn read_status(root: &Path) -> Option<Result<BootImageSkewEnforcementStatus, String>> {
    let path = match crate::fsutil::host_path_followed(root, SKEW_STATUS_FILE) {
        Ok(path) => path,
        Err(e) => return Some(Err(format!("{e:#}"))),
    };
    match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(format!("reading it: {e}"))),
        Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(|e| format!("not a skew enforcement status: {e}"))),
    }
}

/// The console text of a refusal.
pub fn issue_text(message: &str) -> String {
    format!("\nThis machine was not provisioned: {message}\n\n")
}

#[cfg(test)]
mod tests {
    use mco_api::operator::{ClusterBootImageManual, ClusterBootImageManualMode};

    use super::*;
    use BootImageSkewEnforcementModeStatus as Mode;

    fn status(mode: Mode) -> BootImageSkewEnforcementStatus {
        let manual = (mode == Mode::Manual).then(|| ClusterBootImageManual {
            mode: Some(ClusterBootImageManualMode::RhcosVersion),
            ocp_version: None,
            rhcos_version: Some("9.6.20260101-0".into()),
        });
        BootImageSkewEnforcementStatus { mode: Some(mode), manual, ..Default::default() }
    }

    fn image(build: &str) -> Result<Option<BootImage>, AlephError> {
        Ok(Some(BootImage { build: build.into(), ostree_commit: "abc".into() }))
    }

    fn unreadable() -> Result<Option<BootImage>, AlephError> {
        let source = serde_json::from_str::<BootImage>("{}").unwrap_err();
        Err(AlephError::Invalid { path: "/s/.coreos-aleph-version.json".into(), source })
    }

    #[test]
    fn refuses_old_or_unknown_boot_images_only_under_enforcement() {
        let aleph = Path::new("/s/.coreos-aleph-version.json");
        type Aleph = fn() -> Result<Option<BootImage>, AlephError>;
        type Served = Option<Result<BootImageSkewEnforcementStatus, String>>;
        // (served status, aleph, refusal message contains; None = allowed)
        let cases: &[(Served, Aleph, Option<&str>)] = &[
            (None, || image("412.86.202301010000-0"), None),
            (None, unreadable, None),
            (Some(Ok(status(Mode::None))), || image("412.86.202301010000-0"), None),
            (Some(Ok(status(Mode::None))), || Ok(None), None),
            (Some(Ok(BootImageSkewEnforcementStatus::default())), || Ok(None), None),
            (Some(Ok(status(Mode::Manual))), || image("9.6.20260101-0"), None),
            (Some(Ok(status(Mode::Automatic))), || image("416.94.202405211741-0"), None),
            (
                Some(Ok(status(Mode::Manual))),
                || image("412.86.202301010000-0"),
                Some(
                    "boot image is too old: RHCOS boot image version 412.86.202301010000-0(RHEL version: 8.6) is \
                     below the minimum required RHEL version 9.2",
                ),
            ),
            (Some(Ok(status(Mode::Automatic))), || image("4.12.0"), Some("OCP boot image version 4.12.0 is below")),
            (
                Some(Ok(status(Mode::Manual))),
                || Ok(None),
                Some(
                    "cannot judge this machine's boot image against boot image skew enforcement: /s/.coreos-aleph-version.json does not exist",
                ),
            ),
            (Some(Ok(status(Mode::Manual))), unreadable, Some("/s/.coreos-aleph-version.json: not an aleph file")),
            (
                Some(Ok(status(Mode::Manual))),
                || image("nightly"),
                Some("/s/.coreos-aleph-version.json: build: invalid OCP version \"nightly\""),
            ),
            (
                Some(Err("not a skew enforcement status: EOF".into())),
                || image("9.6.20260101-0"),
                Some("/etc/machine-config-daemon/boot-image-skew-enforcement.json: not a skew enforcement status"),
            ),
        ];
        for (served, aleph_result, want) in cases {
            let verdict = firstboot_verdict(served.clone(), aleph, aleph_result());
            match (want, &verdict) {
                (None, NodeVerdict::Allowed) => {}
                (Some(want), NodeVerdict::Refused { message }) => assert!(message.contains(want), "{message}"),
                _ => panic!("{served:?}: {verdict:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn reads_the_served_file() {
        let root = tempfile::tempdir().unwrap();
        assert!(read_status(root.path()).is_none());
        let path = crate::fsutil::host_path(root.path(), SKEW_STATUS_FILE).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, r#"{"mode":"Manual","manual":{"mode":"RHCOSVersion","rhcosVersion":"9.6.20260101-0"}}"#)
            .unwrap();
        assert_eq!(read_status(root.path()).unwrap().unwrap(), status(Mode::Manual));
        std::fs::write(&path, "{").unwrap();
        let err = read_status(root.path()).unwrap().unwrap_err();
        assert!(err.starts_with("not a skew enforcement status: "), "{err}");
    }
}
