//! The node-side decision of an update, as the original daemon makes it (`update()` steps 2, 6–8):
//! [`diff::ConfigDiff`] says what changes between two rendered MachineConfigs;
//! [`policy`] turns that into node disruption actions (Reboot, Drain, Reload, Restart,
//! DaemonReload, None, Special) with the cluster's policies, or with the fixed rules used at
//! first boot; [`registries`] decides whether a registries.conf change is safe without a drain.
//!
//! Everything here is pure: the daemon, `mco diff` and the tests call the same functions.

pub mod diff;
pub mod policy;
pub mod registries;

pub use diff::{ConfigDiff, DiffError, UnitChanges};
pub use policy::{
    Plan, cluster_plan, default_cluster_policies, describe, firstboot_plan, merge_cluster_policies, policies_of,
};
