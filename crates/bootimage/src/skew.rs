//! Boot image skew enforcement (`docs/concepts/boot-images.md#boot-image-skew`): which mode is in
//! effect, which boot image version it records, whether upgrades are blocked (the `Upgradeable`
//! verdict and its exact messages), and whether a node booted from a given boot image may be served
//! or pivot.
//!
//! Versions come in two forms: OCP versions (`4.12.0`, parsed leniently like Kubernetes'
//! `ParseGeneric`, so `4.18.0-0.nightly-…` is `4.18.0`) and RHCOS versions, either the new
//! RHEL-aligned `9.6.20251023-0` or the legacy `416.94.202405291527-0`, whose minor part encodes
//! the RHEL version (94 → 9.4, 810 → 8.10).

use std::cmp::Ordering;
use std::fmt;

use mco_api::constants::{OCP_VERSION_BOOT_IMAGE_SKEW_LIMIT, RHCOS_VERSION_BOOT_IMAGE_SKEW_LIMIT};
use mco_api::operator::{
    BootImageSkewEnforcementConfig, BootImageSkewEnforcementConfigMode, BootImageSkewEnforcementModeStatus,
    BootImageSkewEnforcementStatus, ClusterBootImageAutomatic, ClusterBootImageManual, ClusterBootImageManualMode,
    MachineManager, MachineManagerApiGroup, MachineManagerResource, MachineManagerSelector, MachineManagerSelectorMode,
    ManagedBootImages,
    machine_configuration_condition::{BOOT_IMAGE_UPDATE_DEGRADED, BOOT_IMAGE_UPDATE_PROGRESSING},
};
use serde::{Deserialize, Serialize};

use crate::platform::Support;

/// A version string that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("invalid OCP version {value:?}: {problem}")]
    Ocp { value: String, problem: &'static str },
    #[error("invalid RHCOS version {value:?}: {problem}")]
    Rhcos { value: String, problem: &'static str },
}

/// An OCP version, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OcpVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl fmt::Display for OcpVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl OcpVersion {
    /// Kubernetes' `ParseGeneric`: an optional `v`, two or three dot-separated numbers (no
    /// leading zeros), then anything (`-0.nightly-…`, `+build`) that is ignored.
    pub fn parse(value: &str) -> Result<OcpVersion, VersionError> {
        let err = |problem| VersionError::Ocp { value: value.to_string(), problem };
        let rest = value.strip_prefix('v').unwrap_or(value);
        let numeric_end = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
        // A trailing dot belongs to the uninterpreted part (`4.13.` is not a third component).
        let numeric = rest[..numeric_end].trim_end_matches('.');
        let parts: Vec<&str> = numeric.split('.').collect();
        if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
            return Err(err("expected at least major.minor"));
        }
        if parts.len() > 3 {
            return Err(err("more than three numeric components"));
        }
        if parts.iter().any(|p| p.len() > 1 && p.starts_with('0')) {
            return Err(err("a numeric component has a leading zero"));
        }
        let number = |p: &str| p.parse::<u64>().map_err(|_| err("a numeric component is too large"));
        Ok(OcpVersion {
            major: number(parts[0])?,
            minor: number(parts[1])?,
            patch: parts.get(2).map(|p| number(p)).transpose()?.unwrap_or(0),
        })
    }
}

/// A RHEL version `major.minor`, compared numerically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RhelVersion {
    pub major: u64,
    pub minor: u64,
}

impl fmt::Display for RhelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// An RHCOS build version and the RHEL version it is based on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RhcosVersion {
    pub raw: String,
    pub rhel: RhelVersion,
    /// The legacy `<ocp><rhel>.<rhel>.<YYYYMMDDHHmm>-N` form.
    pub legacy: bool,
}

impl RhcosVersion {
    /// Reads `9.6.20251023-0` (RHEL 9.6) or legacy `416.94.202405291527-0` (RHEL 9.4).
    pub fn parse(value: &str) -> Result<RhcosVersion, VersionError> {
        let err = |problem| VersionError::Rhcos { value: value.to_string(), problem };
        let parts: Vec<&str> = value.split('.').collect();
        let [major, minor, build] = parts.as_slice() else {
            return Err(err("expected three dot-separated parts, e.g. 9.6.20251023-0 or 416.94.202405291527-0"));
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(major) || !digits(minor) {
            return Err(err("major and minor must be numbers"));
        }
        let (timestamp, serial) = build.split_once('-').ok_or_else(|| err("missing -<serial> after the timestamp"))?;
        if !digits(timestamp) || !digits(serial) {
            return Err(err("the timestamp and serial must be numbers"));
        }
        let number = |s: &str| s.parse::<u64>().map_err(|_| err("a number is too large"));
        let (rhel, legacy) = match timestamp.len() {
            8 => (RhelVersion { major: number(major)?, minor: number(minor)? }, false),
            12 => {
                // Legacy: the minor part is the RHEL version without its dot.
                if minor.len() < 2 {
                    return Err(err("legacy minor part must hold the RHEL major and minor (e.g. 94)"));
                }
                (RhelVersion { major: number(&minor[..1])?, minor: number(&minor[1..])? }, true)
            }
            _ => return Err(err("the timestamp must have 8 (YYYYMMDD) or 12 (YYYYMMDDHHmm) digits")),
        };
        Ok(RhcosVersion { raw: value.to_string(), rhel, legacy })
    }
}

/// The oldest OCP version boot images may have.
pub fn ocp_limit() -> OcpVersion {
    OcpVersion::parse(OCP_VERSION_BOOT_IMAGE_SKEW_LIMIT).expect("the OCP skew limit constant is a version")
}

/// The oldest RHEL version RHCOS boot images may be based on.
pub fn rhel_limit() -> RhelVersion {
    let (major, minor) = RHCOS_VERSION_BOOT_IMAGE_SKEW_LIMIT.split_once('.').expect("the RHEL skew limit has a dot");
    RhelVersion { major: major.parse().expect("RHEL limit major"), minor: minor.parse().expect("RHEL limit minor") }
}

// ---------------------------------------------------------------------------------------------
// ClusterVersion (the parts skew needs)
// ---------------------------------------------------------------------------------------------

/// `config.openshift.io/v1` ClusterVersion, only what skew enforcement reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterVersion {
    #[serde(default)]
    pub status: ClusterVersionStatus,
}

/// `status` of a ClusterVersion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterVersionStatus {
    /// Newest first.
    #[serde(default)]
    pub history: Vec<UpdateHistory>,
    #[serde(default)]
    pub desired: Release,
}

/// One entry of `status.history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateHistory {
    /// `Completed` or `Partial`.
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub version: String,
}

/// `status.desired`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Release {
    #[serde(default)]
    pub version: String,
    /// `Multi` on multi-architecture clusters.
    #[serde(default)]
    pub architecture: String,
}

impl ClusterVersion {
    /// The version the cluster was installed with: the oldest Completed history entry, else
    /// the oldest entry, as `x.y.z`; `0.0.0` when there is none or it does not parse.
    pub fn install_version(&self) -> String {
        let history = &self.status.history;
        let entry = history.iter().rev().find(|h| h.state == "Completed").or_else(|| history.last());
        entry.and_then(|h| OcpVersion::parse(&h.version).ok()).map_or_else(|| "0.0.0".to_string(), |v| v.to_string())
    }

    /// `X.Y` of the newest history entry, for documentation links; `latest` when unknown.
    pub fn docs_version(&self) -> String {
        self.status
            .history
            .first()
            .and_then(|h| OcpVersion::parse(&h.version).ok())
            .map_or_else(|| "latest".to_string(), |v| format!("{}.{}", v.major, v.minor))
    }

    /// The cluster runs several architectures (`status.desired.architecture == Multi`).
    pub fn is_multi_arch(&self) -> bool {
        self.status.desired.architecture == "Multi"
    }
}

// ---------------------------------------------------------------------------------------------
// Mode resolution
// ---------------------------------------------------------------------------------------------

/// What the operator knows when it computes `status.bootImageSkewEnforcementStatus`.
#[derive(Debug, Clone, Default)]
pub struct ModeInputs<'a> {
    /// `spec.bootImageSkewEnforcement`.
    pub spec: Option<&'a BootImageSkewEnforcementConfig>,
    /// `status.platformStatus.type` of the Infrastructure.
    pub platform_type: &'a str,
    /// BareMetal installed through the legacy provisioning path (a Provisioning CR with a
    /// `provisioningOSDownloadURL`, or it could not be read).
    pub baremetal_legacy_provisioning: bool,
    /// `controlPlaneTopology == SingleReplica`.
    pub single_replica: bool,
    /// The platform has managed boot images.
    pub platform_supported: bool,
    /// `status.managedBootImagesStatus`, the effective boot image configuration.
    pub managed_boot_images: Option<&'a ManagedBootImages>,
    /// The current `status.bootImageSkewEnforcementStatus`.
    pub current: Option<&'a BootImageSkewEnforcementStatus>,
    /// [`ClusterVersion::install_version`].
    pub install_version: &'a str,
}

/// The effective skew enforcement (first match wins): the admin's spec; None on BareMetal
/// (unless legacy provisioning) and on single-node clusters; Automatic when every MachineSet's
/// boot image is managed; otherwise Manual at the install version.
pub fn resolve_mode(inputs: &ModeInputs<'_>) -> BootImageSkewEnforcementStatus {
    let none =
        BootImageSkewEnforcementStatus { mode: Some(BootImageSkewEnforcementModeStatus::None), ..Default::default() };
    if let Some(spec) = inputs.spec {
        match spec.mode {
            Some(BootImageSkewEnforcementConfigMode::Manual) => {
                return BootImageSkewEnforcementStatus {
                    mode: Some(BootImageSkewEnforcementModeStatus::Manual),
                    manual: spec.manual.clone(),
                    ..Default::default()
                };
            }
            Some(BootImageSkewEnforcementConfigMode::None) => return none,
            None => {}
        }
    }
    if inputs.platform_type == "BareMetal" && !inputs.baremetal_legacy_provisioning {
        return none;
    }
    if inputs.single_replica {
        return none;
    }
    if inputs.platform_supported && all_machinesets_managed(inputs.managed_boot_images) {
        // The controller maintains `automatic` once in this mode; only entering it resets it.
        if let Some(current) = inputs.current
            && current.mode == Some(BootImageSkewEnforcementModeStatus::Automatic)
        {
            return current.clone();
        }
        return BootImageSkewEnforcementStatus {
            mode: Some(BootImageSkewEnforcementModeStatus::Automatic),
            automatic: Some(ClusterBootImageAutomatic {
                ocp_version: Some(inputs.install_version.to_string()),
                rhcos_version: None,
            }),
            ..Default::default()
        };
    }
    BootImageSkewEnforcementStatus {
        mode: Some(BootImageSkewEnforcementModeStatus::Manual),
        manual: Some(ClusterBootImageManual {
            mode: Some(ClusterBootImageManualMode::OcpVersion),
            ocp_version: Some(inputs.install_version.to_string()),
            rhcos_version: None,
        }),
        ..Default::default()
    }
}

/// `status.managedBootImagesStatus` as the operator derives it from the spec: an explicit empty
/// list opts out of everything; the spec's managers are used as written; without a `machinesets`
/// one, supported platforms default to `All`; without a `controlplanemachinesets` one, platforms
/// that support it get one at `None` (opt-in only, as the original). `None` on platforms without
/// managed boot images (the status stays empty there).
pub fn effective_managed_boot_images(spec: Option<&ManagedBootImages>, support: &Support) -> Option<ManagedBootImages> {
    if !support.supported {
        return None;
    }
    let spec_managers = spec.and_then(|s| s.machine_managers.as_ref());
    if spec_managers.is_some_and(Vec::is_empty) {
        return Some(ManagedBootImages { machine_managers: Some(vec![]) });
    }
    let mut managers: Vec<MachineManager> = spec_managers.cloned().unwrap_or_default();
    let manager = |resource, mode| MachineManager {
        resource,
        api_group: MachineManagerApiGroup::MachineApi,
        selection: MachineManagerSelector { mode, partial: None },
    };
    if !managers.iter().any(is_machinesets) {
        let mode = if support.default_on { MachineManagerSelectorMode::All } else { MachineManagerSelectorMode::None };
        managers.push(manager(MachineManagerResource::MachineSets, mode));
    }
    // ControlPlaneMachineSets only when the admin opts in.
    if support.cpms_supported && !managers.iter().any(is_control_plane_machinesets) {
        managers.push(manager(MachineManagerResource::ControlPlaneMachineSets, MachineManagerSelectorMode::None));
    }
    Some(ManagedBootImages { machine_managers: Some(managers) })
}

/// Whether computing the effective configuration opts the cluster in by default (the original's
/// `defaultOptInEvent`, recorded in the `boot-image-updates-opted-in-at` annotation): the spec
/// says nothing about MachineSets, the platform is default-on, and the status either had no
/// managers yet or had MachineSets at `None` (a cluster upgraded to a default-on release).
pub fn default_opt_in(
    spec: Option<&ManagedBootImages>,
    current: Option<&ManagedBootImages>,
    support: &Support,
) -> bool {
    let spec_managers = spec.and_then(|s| s.machine_managers.as_ref());
    if !support.supported || !support.default_on || spec_managers.is_some_and(Vec::is_empty) {
        return false;
    }
    if spec_managers.into_iter().flatten().any(is_machinesets) {
        return false;
    }
    match current.and_then(|c| c.machine_managers.as_ref()) {
        None => true,
        Some(managers) => {
            managers.iter().any(|m| is_machinesets(m) && m.selection.mode == MachineManagerSelectorMode::None)
        }
    }
}

/// The MAPI MachineSet manager (as opposed to ControlPlaneMachineSets).
pub fn is_machinesets(manager: &MachineManager) -> bool {
    manager.resource == MachineManagerResource::MachineSets && manager.api_group == MachineManagerApiGroup::MachineApi
}

/// The ControlPlaneMachineSet manager.
pub fn is_control_plane_machinesets(manager: &MachineManager) -> bool {
    manager.resource == MachineManagerResource::ControlPlaneMachineSets
        && manager.api_group == MachineManagerApiGroup::MachineApi
}

fn all_machinesets_managed(managed: Option<&ManagedBootImages>) -> bool {
    managed
        .and_then(|m| m.machine_managers.as_ref())
        .into_iter()
        .flatten()
        .any(|m| is_machinesets(m) && m.selection.mode == MachineManagerSelectorMode::All)
}

/// The result of one pass over the MachineSets, as skew bookkeeping needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncOutcome {
    pub skipped: usize,
    pub errored: usize,
    /// The lowest RHCOS version among marketplace AMIs chosen (by RHEL version).
    pub lowest_marketplace_rhcos: Option<String>,
}

/// The new `automatic` after a MachineSet pass in Automatic mode, or `None` to leave it:
/// errors leave it (Degraded already blocks upgrades); skips reset it to the install version;
/// a clean pass records the boot images now in use (`releaseVersion` of `coreos-bootimages`).
pub fn automatic_after_sync(
    outcome: &SyncOutcome,
    release_version: Option<&str>,
    install_version: &str,
) -> Option<ClusterBootImageAutomatic> {
    if outcome.errored > 0 {
        return None;
    }
    if outcome.skipped > 0 {
        return Some(ClusterBootImageAutomatic { ocp_version: Some(install_version.to_string()), rhcos_version: None });
    }
    if let Some(rhcos) = &outcome.lowest_marketplace_rhcos {
        return Some(ClusterBootImageAutomatic { ocp_version: None, rhcos_version: Some(rhcos.clone()) });
    }
    let version = OcpVersion::parse(release_version?).ok()?;
    Some(ClusterBootImageAutomatic { ocp_version: Some(version.to_string()), rhcos_version: None })
}

// ---------------------------------------------------------------------------------------------
// Upgradeable verdict
// ---------------------------------------------------------------------------------------------

/// Reason of `Upgradeable=False` when boot images are too old.
pub const SKEW_ERROR_REASON: &str = "ClusterBootImageSkewError";

/// Whether boot image skew blocks cluster upgrades.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Upgradeable,
    Blocked { reason: &'static str, message: String },
}

/// A condition of the MachineConfiguration status, as far as the verdict reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionView<'a> {
    pub type_: &'a str,
    pub status: &'a str,
    pub message: &'a str,
}

/// `checkBootImageSkewUpgradeableGuard`: the verdict for the effective skew status.
/// `conditions` are the MachineConfiguration's status conditions; `docs_version` is
/// [`ClusterVersion::docs_version`]. A version that cannot be read is an error (the original
/// silently does not block).
pub fn upgradeable(
    status: Option<&BootImageSkewEnforcementStatus>,
    conditions: &[ConditionView<'_>],
    docs_version: &str,
) -> Result<Verdict, VersionError> {
    let Some(status) = status else { return Ok(Verdict::Upgradeable) };
    let condition = |t: &str| conditions.iter().find(|c| c.type_ == t);
    if status.mode == Some(BootImageSkewEnforcementModeStatus::Automatic) {
        if let Some(degraded) = condition(BOOT_IMAGE_UPDATE_DEGRADED).filter(|c| c.status == "True") {
            return Ok(Verdict::Blocked {
                reason: SKEW_ERROR_REASON,
                message: format!(
                    "Upgrades have been disabled due to boot image update failures: boot image controller is degraded: {}",
                    degraded.message
                ),
            });
        }
        // Still reconciling: the recorded version is about to change.
        if condition(BOOT_IMAGE_UPDATE_PROGRESSING).is_none_or(|c| c.status == "True") {
            return Ok(Verdict::Upgradeable);
        }
    }
    let Some((ocp, rhcos)) = recorded_versions(status) else { return Ok(Verdict::Upgradeable) };
    let Some(detail) = too_old(ocp, rhcos)? else { return Ok(Verdict::Upgradeable) };
    Ok(Verdict::Blocked {
        reason: SKEW_ERROR_REASON,
        message: format!(
            "Upgrades have been disabled because {detail}. To enable upgrades, please update your boot images or disable boot image skew enforcement by following the documentation at https://docs.redhat.com/en/documentation/openshift_container_platform/{docs_version}/html/machine_configuration/mco-update-boot-skew-mgmt"
        ),
    })
}

/// The boot image versions (OCP, RHCOS) the status records for its mode; `None` when
/// enforcement is off.
fn recorded_versions(status: &BootImageSkewEnforcementStatus) -> Option<(Option<&str>, Option<&str>)> {
    match status.mode? {
        BootImageSkewEnforcementModeStatus::Automatic => {
            let automatic = status.automatic.as_ref();
            Some((automatic.and_then(|a| a.ocp_version.as_deref()), automatic.and_then(|a| a.rhcos_version.as_deref())))
        }
        BootImageSkewEnforcementModeStatus::Manual => {
            let manual = status.manual.as_ref();
            Some((manual.and_then(|m| m.ocp_version.as_deref()), manual.and_then(|m| m.rhcos_version.as_deref())))
        }
        BootImageSkewEnforcementModeStatus::None => None,
    }
}

/// Why the recorded boot image is below the limit, or `None` when it is not. The OCP version
/// wins when both are given.
fn too_old(ocp: Option<&str>, rhcos: Option<&str>) -> Result<Option<String>, VersionError> {
    if let Some(ocp) = ocp.filter(|v| !v.is_empty()) {
        let version = OcpVersion::parse(ocp)?;
        return Ok((version < ocp_limit()).then(|| {
            format!(
                "the cluster is using OCP boot image version {ocp}, which is below the minimum required version {OCP_VERSION_BOOT_IMAGE_SKEW_LIMIT}"
            )
        }));
    }
    if let Some(rhcos) = rhcos.filter(|v| !v.is_empty()) {
        let version = RhcosVersion::parse(rhcos)?;
        return Ok((version.rhel < rhel_limit()).then(|| {
            format!(
                "the cluster is using RHCOS boot image version {rhcos}(RHEL version: {}), which is below the minimum required RHEL version {RHCOS_VERSION_BOOT_IMAGE_SKEW_LIMIT}",
                version.rhel
            )
        }));
    }
    Ok(None)
}

// ---------------------------------------------------------------------------------------------
// One node's boot image
// ---------------------------------------------------------------------------------------------

/// Request header in which a booting machine names its boot image version (the aleph `build`).
pub const BOOT_IMAGE_VERSION_HEADER: &str = "X-MCO-Boot-Image-Version";
/// Query parameter of `/config/<pool>` carrying the same, for spec 2.x stubs (no `httpHeaders`);
/// the header wins when both are given.
pub const BOOT_IMAGE_VERSION_QUERY: &str = "bootImageVersion";
/// Added by the server (cluster mode) to every config it serves when the cluster has a skew
/// status: that status as JSON; firstboot judges the machine's boot image against it.
pub const SKEW_STATUS_FILE: &str = "/etc/machine-config-daemon/boot-image-skew-enforcement.json";

/// Whether a machine booted from a given boot image may get its config (server) or pivot to
/// the OS image (firstboot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeVerdict {
    Allowed,
    Refused { message: String },
}

/// The boot image version of one machine: an RHCOS build (the aleph `build`, e.g.
/// `415.92.202311241643-0`) or an OCP version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootImageVersion {
    Rhcos(RhcosVersion),
    Ocp(OcpVersion),
}

impl BootImageVersion {
    /// An RHCOS build has a `-<serial>` after a long numeric timestamp (8 or 12 digits; from 4
    /// digits on it is taken for an attempt at one, to be reported as such); anything else is
    /// read as an OCP version (whose patch numbers are short).
    pub fn parse(value: &str) -> Result<BootImageVersion, VersionError> {
        let looks_rhcos = value
            .split('.')
            .nth(2)
            .and_then(|b| b.split_once('-'))
            .is_some_and(|(t, _)| t.len() >= 4 && t.bytes().all(|b| b.is_ascii_digit()));
        if looks_rhcos {
            RhcosVersion::parse(value).map(BootImageVersion::Rhcos)
        } else {
            OcpVersion::parse(value).map(BootImageVersion::Ocp)
        }
    }
}

/// Refuses a machine whose boot image is too old to pivot to the current OS image, unless skew
/// enforcement is off (`None` or not configured).
pub fn check_node_boot_image(
    status: Option<&BootImageSkewEnforcementStatus>,
    boot_image_version: &str,
) -> Result<NodeVerdict, VersionError> {
    let enforced = status.and_then(|s| s.mode).is_some_and(|m| m != BootImageSkewEnforcementModeStatus::None);
    if !enforced {
        return Ok(NodeVerdict::Allowed);
    }
    Ok(match BootImageVersion::parse(boot_image_version)? {
        BootImageVersion::Rhcos(v) if v.rhel < rhel_limit() => too_old_boot_image(format!(
            "RHCOS boot image version {}(RHEL version: {}) is below the minimum required RHEL version {RHCOS_VERSION_BOOT_IMAGE_SKEW_LIMIT}",
            v.raw, v.rhel
        )),
        BootImageVersion::Ocp(v) if v.cmp(&ocp_limit()) == Ordering::Less => too_old_boot_image(format!(
            "OCP boot image version {boot_image_version} is below the minimum required version {OCP_VERSION_BOOT_IMAGE_SKEW_LIMIT}"
        )),
        _ => NodeVerdict::Allowed,
    })
}

/// The RHEL major of an OS stream (upstream's names: `rhel-9`, `rhel-10`, `centos-10`), if its
/// name ends in one.
pub fn stream_major(stream: &str) -> Option<u64> {
    stream.rsplit_once('-')?.1.parse().ok()
}

/// The first RHEL major that is not cross-compatible with others (seed 003): RHEL 8 boot images
/// still pivot to RHEL 9 (skew enforcement judges those), no boot image pivots to or from 10.
const FIRST_INCOMPATIBLE_MAJOR: u64 = 10;

/// Seed 003: from RHEL 10 on, majors are not cross-compatible, so a machine whose pool runs the
/// OS stream `stream` must boot from a boot image of that stream's RHEL major when either is 10
/// or later. Boot image versions that say no RHEL version (OCP versions) and streams named
/// without a major are not judged.
pub fn check_stream_boot_image(stream: &str, boot_image_version: &str) -> Result<NodeVerdict, VersionError> {
    let Some(major) = stream_major(stream) else { return Ok(NodeVerdict::Allowed) };
    let incompatible = |boot: u64| boot != major && boot.max(major) >= FIRST_INCOMPATIBLE_MAJOR;
    Ok(match BootImageVersion::parse(boot_image_version)? {
        BootImageVersion::Rhcos(v) if incompatible(v.rhel.major) => NodeVerdict::Refused {
            message: format!(
                "boot image is of another RHEL major: RHCOS boot image version {}(RHEL version: {}) cannot pivot to the \
                 pool's OS stream {stream} (RHEL {major}); RHEL major versions are not cross-compatible",
                v.raw, v.rhel
            ),
        },
        _ => NodeVerdict::Allowed,
    })
}

/// For a machine that does not say which boot image it booted from: the boot image the cluster
/// records (`automatic` or `manual`) stands for it, judged as upgrades are (seed 003: the server
/// "rejects new Ignition requests if the cluster's boot images are out of date"). Enforcement
/// off (`None` or not configured) allows it.
pub fn check_cluster_boot_image(status: Option<&BootImageSkewEnforcementStatus>) -> Result<NodeVerdict, VersionError> {
    let Some((ocp, rhcos)) = status.and_then(recorded_versions) else { return Ok(NodeVerdict::Allowed) };
    Ok(too_old(ocp, rhcos)?.map_or(NodeVerdict::Allowed, too_old_boot_image))
}

fn too_old_boot_image(detail: String) -> NodeVerdict {
    NodeVerdict::Refused {
        message: format!(
            "boot image is too old: {detail}; update the boot images (or disable boot image skew enforcement) and reprovision this machine"
        ),
    }
}
