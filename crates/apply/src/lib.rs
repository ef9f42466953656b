//! What the node daemon applies to a node's filesystem and OS (`mco daemon apply`, and `mco-daemon`
//! in the cluster), with no cluster in sight: moves a node from one rendered MachineConfig to
//! another the way the original machine-config-daemon does (`docs/concepts/node-update.md`), with
//! every step idempotent and journaled so that a failure or a crash leaves the node on the old
//! config.
//!
//! * [`plan`]: pure — the ordered steps of an update, every input problem found before writing.
//! * [`files`], [`units`], [`ssh`]: the writers (atomic, with OS originals kept and restored).
//! * [`os`]: the [`os::OsBackend`] trait; rpm-ostree and bootc command lines.
//! * [`journal`], [`apply`]: snapshot → write → roll back on error or after a crash → record.
//! * [`state`]: the on-disk state files; [`validate`]: on-disk drift checks.
//! * [`bake`]: a MachineConfig written into a directory tree for an OS image build.

pub mod actions;
pub mod apply;
pub mod bake;
pub mod failpoint;
pub mod files;
pub mod firstboot;
pub mod fsutil;
pub mod journal;
pub mod os;
pub mod plan;
pub mod runner;
pub mod shadow;
pub mod skew;
pub mod ssh;
pub mod state;
pub mod units;
pub mod validate;

pub use apply::{Applied, ApplyError, Disruption, Node, Recovered, apply};
