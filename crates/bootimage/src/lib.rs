//! Boot image planning, pure: which boot image each MachineSet should use according to CoreOS
//! stream metadata ([`machineset::plan`]) and each ControlPlaneMachineSet
//! ([`control_plane::plan_control_plane`]), the upgrade of stub Ignition configs
//! ([`stub::upgrade_stub`]) and boot image skew decisions ([`skew`]).
//!
//! Nothing here does IO. The callers (the `mco bootimage` CLI, later the controller, the server
//! and firstboot) read the inputs, call these functions and apply the results; the one lookup
//! that needs a cloud API, the owner of an AMI, goes through [`ec2::AmiOwnerLookup`].

pub mod arch;
pub mod control_plane;
pub mod ec2;
pub mod machineset;
pub mod platform;
pub mod skew;
pub mod stream;
pub mod stub;

pub use arch::Arch;
pub use control_plane::plan_control_plane;
pub use machineset::{Decision, Patch, PlanContext, PlanError, SkipReason, plan};
pub use platform::Infrastructure;
pub use stream::Stream;
