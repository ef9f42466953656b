//! The boot image controller (upstream `pkg/controller/bootimage`): keeps the MAPI
//! MachineSets of supported platforms on the boot images of the `coreos-bootimages` stream,
//! upgrades their stub Ignition first, and maintains the boot image skew status.
//!
//! Decisions are pure and live in `mco-bootimage` (per-MachineSet planning, skew rules) and in
//! [`status`], [`hotloop`] and [`events`]; [`run`] is the kube-rs shell: it watches the inputs
//! and runs one full sync per batch of events, as upstream's single worker does. It also does
//! the operator's share of the work (the effective `managedBootImagesStatus` and skew mode), since
//! nothing else in this project writes them.
//!
//! A crate of its own rather than a module of `mco-controller`, which runs it: it is one full sync
//! over every MachineSet per batch of events (not a kube-rs Controller over one kind, so not
//! `mco_controller::reconciler`'s shape), it talks to clouds (EC2's image owners, [`ec2`]) that
//! nothing else does, and its tests need a cloud's API (moto) but none of the other controllers.

pub mod ec2;
pub mod events;
pub mod hotloop;
pub mod status;
mod sync;

use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use mco_bootimage::Arch;

/// Settings of the controller.
#[derive(Debug, Clone)]
pub struct Options {
    /// Delay before a failed sync (API errors) is tried again.
    pub retry_delay: Duration,
    /// Architecture of MachineSets without the autoscaler labels annotation, on clusters that
    /// are not multi-architecture: the control plane's (upstream: the controller binary's).
    pub control_plane_arch: Arch,
    /// Replaces the regional EC2 endpoints (tests: a local EC2-compatible server).
    pub ec2_endpoint_url: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retry_delay: Duration::from_secs(10),
            control_plane_arch: std::env::consts::ARCH.parse().unwrap_or(Arch::X86_64),
            ec2_endpoint_url: None,
        }
    }
}

/// Runs the controller until its watches end (they retry errors, so: forever). A sync that
/// fails is retried after [`Options::retry_delay`] unless new events come first.
pub async fn run(client: kube::Client, options: Options) -> anyhow::Result<()> {
    let mut events = sync::watch_events(&client);
    let mut controller = sync::Controller::new(client, options);
    let mut failed: Option<&'static str> = None;
    loop {
        let event = match failed.take() {
            Some(event) => {
                tokio::select! {
                    next = events.next() => next,
                    () = tokio::time::sleep(controller.options.retry_delay) => Some(event),
                }
            }
            None => events.next().await,
        };
        let Some(mut event) = event else { return Ok(()) };
        // A burst of events needs one sync; the latest names it.
        while let Some(Some(next)) = events.next().now_or_never() {
            event = next;
        }
        if let Err(e) = controller.sync_all(event).await {
            tracing::warn!(event, "boot image sync failed: {e:#}");
            failed = Some(event);
        }
    }
}
