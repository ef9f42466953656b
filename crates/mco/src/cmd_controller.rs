//! `mco controller`: the machine-config controller (render, node and drain controllers,
//! leader-elected).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mco_api::constants::MCO_NAMESPACE;
use mco_controller::leader::Timing;
use mco_controller::render::controller::Options;
use mco_controller::{LeaseSettings, Settings};
use mco_render::ControllerVersion;
use mco_rollout::drain::RetryPolicy;

#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// Kubeconfig file. Without it: $KUBECONFIG, ~/.kube/config or the in-cluster service account.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Seconds without changes to a pool's inputs before it is rendered (absorbs bursts).
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = seconds)]
    render_delay: Duration,
    /// Seconds before an object whose sync failed is first tried again (doubled with each
    /// failure in a row, up to five minutes).
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = seconds)]
    retry_delay: Duration,
    /// Seconds one drain attempt may take (cordon, evictions, evicted pods gone) before it fails
    /// and is retried later.
    #[arg(long, value_name = "SECONDS", default_value = "90", value_parser = seconds)]
    drain_timeout: Duration,
    /// Seconds before a failed drain is tried again (while it has failed for less than ten
    /// minutes; then every five).
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = seconds)]
    drain_retry_delay: Duration,
    /// Seconds a drain may keep failing before it is reported as failed (a DrainFailed event
    /// at each further attempt, `mcc_drain_err` 1); it is still retried.
    #[arg(long, value_name = "SECONDS", default_value = "3600", value_parser = seconds)]
    drain_failed_after: Duration,
    /// Seconds before an eviction a PodDisruptionBudget refused is asked for again.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = seconds)]
    eviction_retry: Duration,
    /// Namespace of on-cluster builds' Jobs and ConfigMaps, and of MachineOSConfigs' Secrets.
    #[arg(long, default_value = MCO_NAMESPACE)]
    build_namespace: String,
    /// Image of the build pods [default: this controller's own, read from its pod, named by
    /// $POD_NAMESPACE and $POD_NAME].
    #[arg(long, value_name = "IMAGE")]
    build_image: Option<String>,
    /// Build pods use their node's network namespace (for a registry the pod network cannot reach).
    #[arg(long)]
    build_host_network: bool,
    /// Build pods keep buildah's storage in memory (a memory-backed emptyDir), not on their node's
    /// disk: faster, and gentler on the node's other work, for nodes with memory to spare (about
    /// 2 GB for a 500-MB OS image while a build runs).
    #[arg(long)]
    build_scratch_in_memory: bool,
    /// Namespace of the leader election Lease.
    #[arg(long, default_value = MCO_NAMESPACE)]
    lease_namespace: String,
    /// Name of the leader election Lease.
    #[arg(long, default_value = "machine-config-controller")]
    lease_name: String,
    /// This instance's name in the Lease [default: <hostname>_<pid>].
    #[arg(long)]
    identity: Option<String>,
    /// Seconds a Lease lasts without renewal.
    #[arg(long, value_name = "SECONDS", default_value = "137", value_parser = seconds)]
    lease_duration: Duration,
    /// Seconds the leader keeps trying to renew before it gives up (and exits).
    #[arg(long, value_name = "SECONDS", default_value = "107", value_parser = seconds)]
    renew_deadline: Duration,
    /// Seconds between Lease renewals and acquisition attempts.
    #[arg(long, value_name = "SECONDS", default_value = "26", value_parser = seconds)]
    retry_period: Duration,
    /// Version hash written to rendered configs (`generated-by-controller-version`).
    #[arg(long, value_name = "HASH")]
    controller_version: Option<String>,
    /// Do not run the boot image controller (MachineSets' boot images, stub user-data, skew status).
    #[arg(long)]
    no_boot_images: bool,
    /// The raw version the ControllerConfig's `generated-by-version` annotation must equal.
    #[arg(long, value_name = "RAW")]
    controller_version_raw: Option<String>,
    /// Answer `GET /healthz` (the pod's probes) on this address.
    #[arg(long, value_name = "ADDR", value_parser = crate::listen_address)]
    health_listen: Option<std::net::SocketAddr>,
    /// Answer `GET /metrics` (Prometheus) on this address, without authentication (upstream:
    /// 127.0.0.1:8797).
    #[arg(long, value_name = "ADDR", value_parser = crate::listen_address)]
    metrics_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    secure_metrics: crate::SecureMetricsArgs,
}

/// A non-negative number of seconds, fractions allowed.
fn seconds(value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("{value:?} is not a number of seconds"))
}

pub fn run(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    if args.renew_deadline >= args.lease_duration {
        anyhow::bail!("--renew-deadline must be shorter than --lease-duration");
    }
    let this_build = ControllerVersion::this_build();
    // The pod this controller runs in (the Downward API's variables, as deploy/ sets them).
    let own_pod = std::env::var("POD_NAMESPACE").ok().zip(std::env::var("POD_NAME").ok());
    mco_controller::main(Settings {
        kubeconfig: args.kubeconfig,
        version: ControllerVersion {
            raw: args.controller_version_raw.unwrap_or(this_build.raw),
            hash: args.controller_version.unwrap_or(this_build.hash),
        },
        render: Options { render_delay: args.render_delay, retry_delay: args.retry_delay, ..Default::default() },
        node: mco_controller::node::controller::Options { retry_delay: args.retry_delay, ..Default::default() },
        drain: mco_controller::drain::controller::Options {
            retry: RetryPolicy {
                delay: args.drain_retry_delay,
                timeout: args.drain_failed_after,
                ..Default::default()
            },
            attempt_timeout: args.drain_timeout,
            eviction_retry: args.eviction_retry,
            own_pod: own_pod.clone(),
            ..Default::default()
        },
        kubelet_configs: mco_controller::kubeletconfig::Options { retry_delay: args.retry_delay, ..Default::default() },
        builds: mco_controller::BuildSettings {
            namespace: args.build_namespace,
            image: args.build_image,
            own_pod,
            pod: mco_controller::BuildPod {
                host_network: args.build_host_network,
                scratch_in_memory: args.build_scratch_in_memory,
            },
            retry_delay: args.retry_delay,
        },
        boot_images: (!args.no_boot_images).then(mco_bootimage_controller::Options::default),
        health: args.health_listen,
        metrics: args.metrics_listen,
        secure_metrics: args.secure_metrics.options(),
        lease: LeaseSettings {
            namespace: args.lease_namespace,
            name: args.lease_name,
            identity: args.identity.unwrap_or_else(mco_controller::default_identity),
            timing: Timing {
                lease_duration: args.lease_duration,
                renew_deadline: args.renew_deadline,
                retry_period: args.retry_period,
            },
        },
    })?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parses_fractions_and_refuses_the_rest() {
        let cases = [
            ("5", Ok(Duration::from_secs(5))),
            ("0.25", Ok(Duration::from_millis(250))),
            ("0", Ok(Duration::ZERO)),
            ("-1", Err("\"-1\" is not a number of seconds".to_string())),
            ("5s", Err("\"5s\" is not a number of seconds".to_string())),
            ("NaN", Err("\"NaN\" is not a number of seconds".to_string())),
        ];
        for (input, want) in cases {
            assert_eq!(seconds(input), want, "{input}");
        }
    }
}
