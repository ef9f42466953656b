//! The lab end to end, as named scenarios run in order on one lab per platform: `mco lab up` with
//! real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy, registry,
//! images, and nodes that are machines booting their OSTree deployment with systemd as PID 1
//! (Ignition and firstboot on their first boot, the kubelet and containerd started by their
//! systemd), with mco's pods (installed from deploy/) on every node; then rollouts under a running
//! workload, watched through the API with the maxUnavailable invariant and the workload's
//! disruption budget checked at every observed moment, OS updates, units and users as the
//! machines' systemd sees them, skew enforcement, on-cluster builds, boot images on GCP.
//!
//! Each scenario is reported on its own, with its time at the end. A scenario starts from what
//! the ones before left (every node Done on the pool's config) and makes what it needs (the
//! workload, say), with the worker pool updating every worker at once: those about a rollout's
//! pace, or that need one worker at a time, set their own maxUnavailable. The lab is on GCP, so
//! that the boot image controller manages MachineSets too; the skew scenarios enforce skew by
//! hand (Manual), as an administrator may on any platform. After one fails, the rest run on a
//! fresh lab, as the failed one may have left anything behind. Filters select scenarios as test
//! names do (`cargo test -p mco --features lab --test lab -- skew`).
//!
//! Needs root and the binaries `bash hack/setup.sh` and `bash hack/kube-binaries.sh` provide.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/transitions.rs"]
mod transitions;

mod boot;
mod builds;
mod gcp;
mod host;
mod images;
mod rbac;
mod rollout;
mod skew;
mod streams;
mod support;
mod updates;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use support::Lab;

type ScenarioFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

struct Scenario {
    name: &'static str,
    run: for<'a> fn(&'a mut Lab) -> ScenarioFuture<'a>,
}

/// `scenario!(module::function)`: the scenario named after its function's path.
macro_rules! scenario {
    ($module:ident :: $function:ident) => {
        Scenario {
            name: concat!(stringify!($module), "::", stringify!($function)),
            run: |lab| Box::pin($module::$function(lab)),
        }
    };
}

/// Every scenario, in the order they run: each starts where the one before left the lab.
fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(boot::nodes_boot_with_ignition_pivot_and_join),
        scenario!(boot::prometheus_scrapes_every_mco_pod),
        scenario!(boot::a_workload_runs_on_the_real_control_plane),
        scenario!(rollout::rollouts_keep_max_unavailable_and_the_disruption_budget),
        scenario!(rollout::a_budget_holds_the_drain_and_mcc_drain_error_fires),
        scenario!(rollout::kubelet_health_checks_never_failed),
        scenario!(streams::each_pool_rolls_out_on_its_os_stream),
        scenario!(updates::an_os_update_is_booted_by_a_real_reboot),
        scenario!(updates::a_kubelet_config_reaches_the_kubelets),
        scenario!(updates::an_image_mirror_set_reaches_every_workers_registries_conf),
        scenario!(updates::a_pinned_image_set_is_pulled_and_pinned_on_every_worker),
        scenario!(updates::a_paused_pool_moves_no_node),
        scenario!(updates::a_bad_machine_config_degrades_the_render_and_touches_no_node),
        scenario!(updates::a_node_that_cannot_apply_degrades_and_recovers),
        scenario!(updates::a_daemon_restarted_mid_update_leaves_no_half_done_node),
        scenario!(host::units_are_enabled_masked_and_acted_on_by_the_machines_systemd),
        scenario!(host::the_core_users_ssh_keys_and_password_are_set_without_a_reboot),
        scenario!(updates::upgrading_mco_rolls_its_pods_and_reboots_no_node),
        scenario!(builds::a_pools_os_image_is_built_in_the_cluster),
        scenario!(gcp::an_old_rhcos_machineset_is_moved_and_a_custom_one_blocks_upgrades),
        scenario!(rbac::every_component_uses_exactly_its_grants),
        scenario!(rbac::a_daemon_pods_token_touches_no_node_and_only_its_own_mcn),
        scenario!(skew::manual_skew_refuses_a_too_old_boot_image_until_reprovisioned),
        scenario!(skew::an_old_recorded_boot_image_blocks_upgrades),
        scenario!(skew::a_pool_whose_image_has_no_kubelet_leaves_its_new_node_not_joined),
        scenario!(images::an_os_image_tag_is_resolved_once_before_any_node),
        scenario!(images::signed_os_images_are_checked_before_any_node),
        scenario!(images::a_canary_soaks_a_moved_tag_is_resolved_and_a_window_holds_the_revert),
        scenario!(images::a_failed_node_halts_the_pool_and_heals_when_reverted),
        scenario!(images::an_os_without_a_kubelet_takes_its_first_worker_down),
        scenario!(boot::lab_down_stops_everything),
    ]
}

/// The lab the scenarios run on, and what they took.
#[derive(Default)]
struct Labs {
    current: Option<Lab>,
    /// Why the lab did not come up: the other scenarios fail at once.
    broken: Option<String>,
    /// How long each lab took to come up (a fresh one after a failed scenario).
    ups: Vec<Duration>,
    /// How long each scenario ran.
    times: Vec<(&'static str, Duration)>,
    /// Whether a failed scenario's lab state was kept already.
    kept_a_state: bool,
}

impl Labs {
    /// The running lab, or a new one.
    fn lab(&mut self, runtime: &tokio::runtime::Runtime) -> Result<&mut Lab, Failed> {
        if let Some(why) = &self.broken {
            return Err(format!("the lab did not come up: {why}").into());
        }
        if self.current.as_ref().is_none_or(Lab::is_down) {
            self.current = None;
            let started = Instant::now();
            match runtime.block_on(Lab::up()) {
                Ok(lab) => self.current = Some(lab),
                Err(why) => {
                    let failed = format!("the lab did not come up: {why}");
                    self.broken = Some(why);
                    return Err(failed.into());
                }
            }
            self.ups.push(started.elapsed());
        }
        Ok(self.current.as_mut().expect("a lab"))
    }
}

fn run(scenario: &Scenario, labs: &Mutex<Labs>, runtime: &tokio::runtime::Runtime) -> Result<(), Failed> {
    let mut labs = labs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let lab = labs.lab(runtime)?;
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            support::set_pool(&lab.client, serde_json::json!({ "maxUnavailable": support::EVERY_WORKER })).await;
            (scenario.run)(lab).await
        })
    }));
    labs.times.push((scenario.name, started.elapsed()));
    outcome.map_err(|panic| {
        if let Some(lab) = labs.current.take() {
            // The first failure's whole state, only the logs of later ones.
            let only_logs = labs.kept_a_state;
            labs.kept_a_state = true;
            let kept = runtime.block_on(async { lab.down_keeping(only_logs) });
            eprintln!(
                "scenario {} failed: its lab's {} kept in {} (`mco lab down --state-dir {}` removes it); the next \
                 scenario gets a fresh lab",
                scenario.name,
                if only_logs { "logs are" } else { "state is" },
                kept.display(),
                kept.display(),
            );
        }
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into());
        message.into()
    })
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // One lab, the scenarios in order.
    args.test_threads = Some(1);
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime"),
    );
    let labs = Arc::new(Mutex::new(Labs::default()));
    let trials = scenarios()
        .into_iter()
        .map(|scenario| {
            let (labs, runtime) = (labs.clone(), runtime.clone());
            Trial::test(scenario.name, move || run(&scenario, &labs, &runtime))
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    let mut labs = labs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Taken down inside the runtime: the lab's client lives there.
    runtime.block_on(async { labs.current = None });
    for (number, took) in labs.ups.iter().enumerate() {
        println!("lab up time: #{} {:.1}s", number + 1, took.as_secs_f64());
    }
    for (name, took) in &labs.times {
        println!("scenario time: {name} {:.1}s", took.as_secs_f64());
    }
    conclusion.exit_code()
}
