//! The MachineConfiguration status the controller writes, decided without IO: the
//! `BootImageUpdateProgressing` / `BootImageUpdateDegraded` conditions with upstream's count
//! messages, the `Upgradeable` condition from the skew verdict, and the effective configuration
//! the operator derives from the spec.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use mco_api::operator::machine_configuration_condition::{BOOT_IMAGE_UPDATE_DEGRADED, BOOT_IMAGE_UPDATE_PROGRESSING};
use mco_api::operator::{BootImageSkewEnforcementModeStatus, MachineConfiguration, MachineConfigurationStatus};
use mco_bootimage::platform::Support;
use mco_bootimage::skew::{
    ClusterVersion, ConditionView, ModeInputs, SyncOutcome, Verdict, automatic_after_sync, default_opt_in,
    effective_managed_boot_images, resolve_mode, upgradeable,
};

/// Condition type carrying the skew verdict, read by `mco status` (upstream sets `Upgradeable`
/// on the `machine-config` ClusterOperator, which this project does not have).
pub const UPGRADEABLE: &str = "Upgradeable";
/// Reason of `Upgradeable=True`.
pub const UPGRADEABLE_REASON: &str = "AsExpected";
/// Reason of `Upgradeable=False` when the recorded boot image version cannot be read.
pub const UNREADABLE_VERSION_REASON: &str = "BootImageVersionUnreadable";
/// Reason of the default conditions, before the first sync.
const DEFAULT_REASON: &str = "NA";

/// One pass over the objects of one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: usize,
    /// Synced without error (patched, already current, or skipped).
    pub in_progress: usize,
    pub skipped: usize,
    pub errored: usize,
}

impl Counts {
    /// `Reconciled <ok> of <total> <what>[ (<n> skipped)]`.
    fn reconciled(&self, what: &str) -> String {
        if self.skipped > 0 {
            let ok = self.in_progress.saturating_sub(self.skipped);
            format!("Reconciled {ok} of {} {what} ({} skipped)", self.total, self.skipped)
        } else {
            format!("Reconciled {} of {} {what}", self.in_progress, self.total)
        }
    }

    /// Every object synced or errored.
    fn finished(&self) -> bool {
        self.total == self.in_progress + self.errored
    }
}

/// The result of one pass over the MachineSets and ControlPlaneMachineSets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// The MAPI MachineSets.
    pub counts: Counts,
    /// The ControlPlaneMachineSets.
    pub control_plane: Counts,
    /// ControlPlaneMachineSets left on a boot image of their own (a custom image, another
    /// controller's): reconciled in the conditions, as upstream counts them, but for skew their
    /// boot image is as unknown as a skipped MachineSet's.
    pub control_plane_left_alone: usize,
    /// One per errored object.
    pub errors: Vec<String>,
    /// (MachineSet, reason) of the skipped ones.
    pub skip_reasons: Vec<(String, String)>,
    /// `releaseVersion` of `coreos-bootimages`: the OCP version of its boot images.
    pub release_version: Option<String>,
}

/// Records a pass triggered by `event` in the status: both conditions, and in Automatic skew
/// mode the boot image version now in effect ([`automatic_after_sync`]).
pub fn record_pass(
    status: &mut MachineConfigurationStatus,
    pass: &Pass,
    event: &str,
    install_version: &str,
    now: &Time,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_condition(conditions, progressing(pass, event, now));
    set_condition(conditions, degraded(pass, event, now));
    if let Some(skew) = status.boot_image_skew_enforcement_status.as_mut()
        && skew.mode == Some(BootImageSkewEnforcementModeStatus::Automatic)
    {
        // Marketplace AMIs are skipped, so no pass reports an RHCOS version yet. Unlike upstream,
        // whose skew looks at MachineSets only, the control plane's machine set counts too: a new
        // control plane machine boots its image.
        let outcome = SyncOutcome {
            skipped: pass.counts.skipped + pass.control_plane_left_alone,
            errored: pass.counts.errored + pass.control_plane.errored,
            lowest_marketplace_rhcos: None,
        };
        if let Some(automatic) = automatic_after_sync(&outcome, pass.release_version.as_deref(), install_version) {
            skew.automatic = Some(automatic);
        }
    }
}

/// `BootImageUpdateProgressing`: `Reconciled <ok> of <total> MAPI MachineSets[ (<n> skipped)] |
/// Reconciled … ControlPlaneMachineSets | …`, then (where upstream only logs them) the skipped
/// objects with their reasons.
pub fn progressing_message(pass: &Pass) -> String {
    let mut message = format!(
        "{} | {} | Reconciled 0 of 0 CAPI MachineSets | Reconciled 0 of 0 CAPI MachineDeployments",
        pass.counts.reconciled("MAPI MachineSets"),
        pass.control_plane.reconciled("ControlPlaneMachineSets"),
    );
    if !pass.skip_reasons.is_empty() {
        let reasons: Vec<String> = pass.skip_reasons.iter().map(|(name, reason)| format!("{name}: {reason}")).collect();
        message.push_str(&format!(" | Skipped: {}", reasons.join("; ")));
    }
    message
}

/// `BootImageUpdateDegraded`: the error counts, then the errors (Kubernetes' aggregate form: one
/// error as is, several as `[a, b]`).
pub fn degraded_message(pass: &Pass) -> String {
    let mut message = format!(
        "{} Degraded MAPI MachineSets | {} Degraded ControlPlaneMachineSets | 0 Degraded CAPI MachineSets | 0 Degraded CAPI MachineDeployments",
        pass.counts.errored, pass.control_plane.errored
    );
    match &pass.errors[..] {
        [] => {}
        [one] => message.push_str(&format!(" | Error(s): {one}")),
        several => message.push_str(&format!(" | Error(s): [{}]", several.join(", "))),
    }
    message
}

fn condition(type_: &str, status: bool, reason: &str, message: String, now: &Time) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message,
        last_transition_time: now.clone(),
        observed_generation: None,
    }
}

/// Sets `new` in `conditions` (by type). The transition time moves only when the status
/// changes, as `meta.SetStatusCondition` does (upstream bumps it on any change of the
/// condition, which makes the time say nothing about when the status flipped).
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            if existing.status == new.status {
                new.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = new;
        }
        None => conditions.push(new),
    }
}

/// The two boot image conditions as upstream creates them before the first sync.
pub fn ensure_default_conditions(conditions: &mut Vec<Condition>, now: &Time) {
    let defaults = [
        condition(
            BOOT_IMAGE_UPDATE_PROGRESSING,
            false,
            DEFAULT_REASON,
            progressing_message(&Pass::default()),
            now,
        ),
        // Upstream's default message lacks "Degraded" before "CAPI MachineDeployments".
        condition(
            BOOT_IMAGE_UPDATE_DEGRADED,
            false,
            DEFAULT_REASON,
            "0 Degraded MAPI MachineSets | 0 Degraded ControlPlaneMachineSets | 0 Degraded CAPI MachineSets | 0 CAPI MachineDeployments".to_string(),
            now,
        ),
    ];
    for default in defaults {
        if !conditions.iter().any(|c| c.type_ == default.type_) {
            conditions.push(default);
        }
    }
}

/// `BootImageUpdateProgressing` for a pass triggered by `event`: True while some object is
/// neither done nor errored.
pub fn progressing(pass: &Pass, event: &str, now: &Time) -> Condition {
    let done = pass.counts.finished() && pass.control_plane.finished();
    condition(BOOT_IMAGE_UPDATE_PROGRESSING, !done, event, progressing_message(pass), now)
}

/// `BootImageUpdateDegraded`: True iff some object failed.
pub fn degraded(pass: &Pass, event: &str, now: &Time) -> Condition {
    condition(BOOT_IMAGE_UPDATE_DEGRADED, !pass.errors.is_empty(), event, degraded_message(pass), now)
}

/// The `Upgradeable` condition for the status as it stands. A recorded version that cannot be
/// read blocks upgrades with the parse error (the original silently allows them).
pub fn upgradeable_condition(status: &MachineConfigurationStatus, docs_version: &str, now: &Time) -> Condition {
    let conditions: Vec<ConditionView<'_>> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| ConditionView { type_: &c.type_, status: &c.status, message: &c.message })
        .collect();
    match upgradeable(status.boot_image_skew_enforcement_status.as_ref(), &conditions, docs_version) {
        Ok(Verdict::Upgradeable) => condition(UPGRADEABLE, true, UPGRADEABLE_REASON, String::new(), now),
        Ok(Verdict::Blocked { reason, message }) => condition(UPGRADEABLE, false, reason, message, now),
        Err(e) => condition(
            UPGRADEABLE,
            false,
            UNREADABLE_VERSION_REASON,
            format!("Upgrades have been disabled because the recorded boot image version cannot be read: {e}"),
            now,
        ),
    }
}

/// The operator's part of the status: the effective `managedBootImagesStatus`,
/// the skew enforcement mode, `observedGeneration`; and whether this opted the cluster in by
/// default (recorded in an annotation).
pub fn effective_configuration(
    configuration: &MachineConfiguration,
    support: &Support,
    platform_type: &str,
    single_replica: bool,
    cluster_version: &ClusterVersion,
) -> (MachineConfigurationStatus, bool) {
    let mut status = configuration.status.clone().unwrap_or_default();
    let spec = configuration.spec.managed_boot_images.as_ref();
    let opted_in = default_opt_in(spec, status.managed_boot_images_status.as_ref(), support);
    if support.supported {
        status.managed_boot_images_status = effective_managed_boot_images(spec, support);
    }
    let install_version = cluster_version.install_version();
    status.boot_image_skew_enforcement_status = Some(resolve_mode(&ModeInputs {
        spec: configuration.spec.boot_image_skew_enforcement.as_ref(),
        platform_type,
        // BareMetal has no managed boot images; its Provisioning object is not read here.
        baremetal_legacy_provisioning: false,
        single_replica,
        platform_supported: support.supported,
        managed_boot_images: status.managed_boot_images_status.as_ref(),
        current: status.boot_image_skew_enforcement_status.as_ref(),
        install_version: &install_version,
    }));
    status.observed_generation = configuration.metadata.generation;
    (status, opted_in)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use mco_api::operator::{
        BootImageSkewEnforcementModeStatus as Mode, BootImageSkewEnforcementStatus, ClusterBootImageAutomatic,
        MachineManagerResource, MachineManagerSelectorMode,
    };
    use mco_bootimage::skew::UpdateHistory;

    use super::*;

    fn time(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn pass(machinesets: Counts, control_plane: Counts, errors: &[&str], skip_reasons: &[(&str, &str)]) -> Pass {
        Pass {
            counts: machinesets,
            control_plane,
            errors: errors.iter().map(|e| e.to_string()).collect(),
            skip_reasons: skip_reasons.iter().map(|(n, r)| (n.to_string(), r.to_string())).collect(),
            ..Default::default()
        }
    }

    fn counts(total: usize, in_progress: usize, skipped: usize, errored: usize) -> Counts {
        Counts { total, in_progress, skipped, errored }
    }

    #[test]
    fn messages_match_upstream() {
        let tail = " | Reconciled 0 of 0 CAPI MachineSets | Reconciled 0 of 0 CAPI MachineDeployments";
        let none = " | Reconciled 0 of 0 ControlPlaneMachineSets";
        let table = [
            (counts(0, 0, 0, 0), counts(0, 0, 0, 0), format!("Reconciled 0 of 0 MAPI MachineSets{none}")),
            (counts(3, 3, 0, 0), counts(0, 0, 0, 0), format!("Reconciled 3 of 3 MAPI MachineSets{none}")),
            (counts(3, 3, 1, 0), counts(0, 0, 0, 0), format!("Reconciled 2 of 3 MAPI MachineSets (1 skipped){none}")),
            (counts(3, 2, 0, 1), counts(0, 0, 0, 0), format!("Reconciled 2 of 3 MAPI MachineSets{none}")),
            (
                counts(2, 2, 0, 0),
                counts(1, 1, 0, 0),
                "Reconciled 2 of 2 MAPI MachineSets | Reconciled 1 of 1 ControlPlaneMachineSets".to_string(),
            ),
            (
                counts(0, 0, 0, 0),
                counts(1, 0, 0, 1),
                "Reconciled 0 of 0 MAPI MachineSets | Reconciled 0 of 1 ControlPlaneMachineSets".to_string(),
            ),
        ];
        for (machinesets, control_plane, head) in table {
            assert_eq!(progressing_message(&pass(machinesets, control_plane, &[], &[])), format!("{head}{tail}"));
        }
        assert_eq!(
            progressing_message(&pass(counts(2, 2, 1, 0), counts(0, 0, 0, 0), &[], &[("ms-a", "custom image")])),
            format!("Reconciled 1 of 2 MAPI MachineSets (1 skipped){none}{tail} | Skipped: ms-a: custom image")
        );
        let degraded_tail = " | 0 Degraded CAPI MachineSets | 0 Degraded CAPI MachineDeployments";
        let degraded = |machinesets, control_plane, errors: &[&str]| {
            degraded_message(&pass(machinesets, control_plane, errors, &[]))
        };
        assert_eq!(
            degraded(counts(1, 1, 0, 0), counts(0, 0, 0, 0), &[]),
            format!("0 Degraded MAPI MachineSets | 0 Degraded ControlPlaneMachineSets{degraded_tail}")
        );
        assert_eq!(
            degraded(counts(1, 0, 0, 1), counts(0, 0, 0, 0), &["boom"]),
            format!("1 Degraded MAPI MachineSets | 0 Degraded ControlPlaneMachineSets{degraded_tail} | Error(s): boom")
        );
        assert_eq!(
            degraded(counts(2, 0, 0, 1), counts(1, 0, 0, 1), &["a", "b"]),
            format!(
                "1 Degraded MAPI MachineSets | 1 Degraded ControlPlaneMachineSets{degraded_tail} | Error(s): [a, b]"
            )
        );
    }

    #[test]
    fn progressing_and_degraded_status() {
        let now = time(10);
        let done = pass(counts(2, 1, 0, 1), counts(1, 1, 0, 0), &["e"], &[]);
        assert_eq!(progressing(&done, "MAPIMachineSetAdded", &now).status, "False");
        assert_eq!(progressing(&done, "MAPIMachineSetAdded", &now).reason, "MAPIMachineSetAdded");
        assert_eq!(degraded(&done, "x", &now).status, "True");
        let running = pass(counts(2, 1, 0, 0), counts(0, 0, 0, 0), &[], &[]);
        assert_eq!(progressing(&running, "x", &now).status, "True");
        assert_eq!(degraded(&running, "x", &now).status, "False");
        // Progressing until the ControlPlaneMachineSets are done too.
        let control_plane_running = pass(counts(1, 1, 0, 0), counts(1, 0, 0, 0), &[], &[]);
        assert_eq!(progressing(&control_plane_running, "x", &now).status, "True");
    }

    #[test]
    fn set_condition_keeps_transition_time_unless_status_flips() {
        let mut conditions = Vec::new();
        ensure_default_conditions(&mut conditions, &time(1));
        assert_eq!(conditions.len(), 2);
        assert!(conditions.iter().all(|c| c.status == "False" && c.reason == "NA"));
        // Defaults never overwrite.
        ensure_default_conditions(&mut conditions, &time(2));
        assert!(conditions.iter().all(|c| c.last_transition_time == time(1)));

        let done = pass(counts(1, 1, 0, 0), Counts::default(), &[], &[]);
        set_condition(&mut conditions, progressing(&done, "MAPIMachineSetAdded", &time(5)));
        let p = conditions.iter().find(|c| c.type_ == BOOT_IMAGE_UPDATE_PROGRESSING).unwrap();
        assert_eq!((p.last_transition_time.clone(), p.reason.as_str()), (time(1), "MAPIMachineSetAdded"));
        set_condition(
            &mut conditions,
            degraded(&pass(counts(1, 1, 0, 0), Counts::default(), &["e"], &[]), "x", &time(6)),
        );
        let d = conditions.iter().find(|c| c.type_ == BOOT_IMAGE_UPDATE_DEGRADED).unwrap();
        assert_eq!((d.status.as_str(), d.last_transition_time.clone()), ("True", time(6)));
        assert_eq!(conditions.len(), 2);
    }

    fn status_with(
        skew: BootImageSkewEnforcementStatus,
        progressing: &str,
        degraded: &str,
    ) -> MachineConfigurationStatus {
        let c = |type_: &str, status: &str| Condition {
            type_: type_.into(),
            status: status.into(),
            reason: String::new(),
            message: "m".into(),
            last_transition_time: time(0),
            observed_generation: None,
        };
        MachineConfigurationStatus {
            conditions: Some(vec![
                c(BOOT_IMAGE_UPDATE_PROGRESSING, progressing),
                c(BOOT_IMAGE_UPDATE_DEGRADED, degraded),
            ]),
            boot_image_skew_enforcement_status: Some(skew),
            ..Default::default()
        }
    }

    #[test]
    fn upgradeable_condition_from_the_verdict() {
        let automatic = |ocp: &str| BootImageSkewEnforcementStatus {
            mode: Some(Mode::Automatic),
            automatic: Some(ClusterBootImageAutomatic { ocp_version: Some(ocp.into()), rhcos_version: None }),
            ..Default::default()
        };
        let now = time(3);
        let old = upgradeable_condition(&status_with(automatic("4.12.0"), "False", "False"), "4.18", &now);
        assert_eq!((old.status.as_str(), old.reason.as_str()), ("False", "ClusterBootImageSkewError"));
        assert!(old.message.contains("OCP boot image version 4.12.0"), "{}", old.message);
        let current = upgradeable_condition(&status_with(automatic("4.16.0"), "False", "False"), "4.18", &now);
        assert_eq!((current.status.as_str(), current.reason.as_str()), ("True", UPGRADEABLE_REASON));
        // Still progressing: not evaluated.
        let busy = upgradeable_condition(&status_with(automatic("4.12.0"), "True", "False"), "4.18", &now);
        assert_eq!(busy.status, "True");
        let degraded = upgradeable_condition(&status_with(automatic("4.16.0"), "False", "True"), "4.18", &now);
        assert_eq!(degraded.status, "False");
        assert!(degraded.message.starts_with("Upgrades have been disabled due to boot image update failures"));
        let garbage = upgradeable_condition(&status_with(automatic("four"), "False", "False"), "4.18", &now);
        assert_eq!((garbage.status.as_str(), garbage.reason.as_str()), ("False", UNREADABLE_VERSION_REASON));
    }

    #[test]
    fn record_pass_maintains_automatic() {
        let automatic = |ocp: &str| BootImageSkewEnforcementStatus {
            mode: Some(Mode::Automatic),
            automatic: Some(ClusterBootImageAutomatic { ocp_version: Some(ocp.into()), rhcos_version: None }),
            ..Default::default()
        };
        let recorded = |pass: &Pass, skew: BootImageSkewEnforcementStatus| {
            let mut status =
                MachineConfigurationStatus { boot_image_skew_enforcement_status: Some(skew), ..Default::default() };
            record_pass(&mut status, pass, "MAPIMachineSetAdded", "4.12.0", &time(1));
            assert_eq!(status.conditions.as_ref().unwrap().len(), 2);
            status.boot_image_skew_enforcement_status.unwrap()
        };
        let clean = Pass {
            counts: Counts { total: 1, in_progress: 1, ..Default::default() },
            release_version: Some("4.16.0".into()),
            ..Default::default()
        };
        assert_eq!(recorded(&clean, automatic("4.12.0")), automatic("4.16.0"));
        let skipped = Pass { counts: Counts { total: 1, in_progress: 1, skipped: 1, errored: 0 }, ..clean.clone() };
        assert_eq!(recorded(&skipped, automatic("4.16.0")), automatic("4.12.0"));
        let errored = Pass {
            counts: Counts { total: 1, errored: 1, ..Default::default() },
            errors: vec!["e".into()],
            ..clean.clone()
        };
        assert_eq!(recorded(&errored, automatic("4.13.0")), automatic("4.13.0"));
        // The ControlPlaneMachineSet counts as a MachineSet does: one that failed leaves the
        // version, one left on its own image resets it to the install version.
        let control_plane_failed = Pass {
            control_plane: Counts { total: 1, errored: 1, ..Default::default() },
            errors: vec!["e".into()],
            ..clean.clone()
        };
        assert_eq!(recorded(&control_plane_failed, automatic("4.13.0")), automatic("4.13.0"));
        let control_plane_left_alone = Pass {
            control_plane: Counts { total: 1, in_progress: 1, ..Default::default() },
            control_plane_left_alone: 1,
            ..clean.clone()
        };
        assert_eq!(recorded(&control_plane_left_alone, automatic("4.16.0")), automatic("4.12.0"));
        // Manual mode is the admin's: a pass never changes it.
        let manual = BootImageSkewEnforcementStatus { mode: Some(Mode::Manual), ..Default::default() };
        assert_eq!(recorded(&clean, manual.clone()), manual);
    }

    #[test]
    fn effective_configuration_defaults_on_and_resolves_automatic() {
        let support = Support { supported: true, cpms_supported: true, default_on: true, platform: None };
        let mut configuration = MachineConfiguration::new("cluster", Default::default());
        configuration.metadata.generation = Some(4);
        let cluster_version = ClusterVersion {
            status: mco_bootimage::skew::ClusterVersionStatus {
                history: vec![UpdateHistory { state: "Completed".into(), version: "4.16.3".into() }],
                ..Default::default()
            },
        };
        let (status, opted_in) = effective_configuration(&configuration, &support, "GCP", false, &cluster_version);
        assert!(opted_in);
        assert_eq!(status.observed_generation, Some(4));
        let managers = status.managed_boot_images_status.as_ref().unwrap().machine_managers.as_ref().unwrap();
        assert_eq!(managers[0].selection.mode, MachineManagerSelectorMode::All);
        // ControlPlaneMachineSets only when opted in.
        assert_eq!(managers[1].resource, MachineManagerResource::ControlPlaneMachineSets);
        assert_eq!(managers[1].selection.mode, MachineManagerSelectorMode::None);
        assert_eq!(managers.len(), 2);
        let skew = status.boot_image_skew_enforcement_status.as_ref().unwrap();
        assert_eq!(skew.mode, Some(Mode::Automatic));
        assert_eq!(skew.automatic.as_ref().unwrap().ocp_version.as_deref(), Some("4.16.3"));

        // Computed again from its own output: nothing changes, no new opt-in.
        configuration.status = Some(status.clone());
        let (again, opted_in) = effective_configuration(&configuration, &support, "GCP", false, &cluster_version);
        assert_eq!((again, opted_in), (status, false));

        // Single-node clusters do not enforce skew.
        configuration.status = None;
        let (sno, _) = effective_configuration(&configuration, &support, "GCP", true, &cluster_version);
        assert_eq!(sno.boot_image_skew_enforcement_status.unwrap().mode, Some(Mode::None));
    }
}
