//! The per-ControlPlaneMachineSet decision of the original's `syncControlPlaneMachineSet`: the
//! same provider spec rules as MachineSets ([`crate::machineset`]), on AWS, GCP and Azure only,
//! for machines of the controller's own architecture (a ControlPlaneMachineSet carries no
//! architecture annotation).
//!
//! A ControlPlaneMachineSet whose `state` is `Active` replaces every control plane machine
//! whose provider spec differs from its template; its operator ignores the boot image fields,
//! which is why patching them rolls nothing out.

use mco_api::ControlPlaneMachineSet;
use mco_api::constants::MACHINE_OS_ID_LABEL;
use mco_api::machine::ProviderSpecHolder as _;

use crate::arch::Arch;
use crate::machineset::{
    Decision, PlanContext, PlanError, SkipReason, other_os_stream, owners, plan_provider_spec, qualified_name,
};
use crate::platform::Platform;

/// Decides what to do with one ControlPlaneMachineSet, in the original's order: owner
/// references, OS stream, Windows, then the platform (AWS, GCP, Azure; vSphere and the rest are
/// left alone) and its rules, for machines of `arch`. The original counts none of its skips as
/// skipped: a ControlPlaneMachineSet left alone is reconciled.
pub fn plan_control_plane(
    cpms: &ControlPlaneMachineSet,
    arch: Arch,
    ctx: &PlanContext<'_>,
) -> Result<Decision, PlanError> {
    let error = |kind| PlanError { object: format!("ControlPlaneMachineSet {}", qualified_name(&cpms.metadata)), kind };
    if let Some(skip) = owners(&cpms.metadata).or_else(|| other_os_stream(&cpms.metadata)) {
        return Ok(Decision::Skipped(skip));
    }
    if cpms.machine_spec_label(MACHINE_OS_ID_LABEL) == Some("Windows") {
        return Ok(Decision::Skipped(SkipReason::Windows));
    }
    if let Some(infra) = ctx.infrastructure
        && !infra.boot_image_support().cpms_supported
    {
        return Ok(Decision::Skipped(SkipReason::UnsupportedPlatform(infra.platform_type().to_string())));
    }
    match plan_provider_spec(cpms.provider_spec(), arch, ctx).map_err(error)? {
        // vSphere named by the provider spec's kind (without an Infrastructure to say so first).
        Decision::VsphereTemplate { .. } => {
            Ok(Decision::Skipped(SkipReason::UnsupportedPlatform(Platform::VSphere.infrastructure_type().to_string())))
        }
        decision => Ok(decision),
    }
}
