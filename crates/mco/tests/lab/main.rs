//! The lab end to end, as named scenarios run in order on one lab per platform: `mco lab up` with
//! real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy, registry,
//! images, and nodes that are machines booting their OSTree deployment with systemd as PID 1
//! (Ignition and firstboot on their first boot, the kubelet and containerd started by their
//! systemd), with mco's pods (installed from deploy/) on every node; then rollouts under a running
//! workload, watched through the API with the maxUnavailable invariant and the workload's
//! disruption budget checked at every observed moment, OS updates, units and users as the
//! machines' systemd sees them, skew enforcement, on-cluster builds, boot images on GCP.
//!
//! Each scenario is reported on its own, with its time at the end. The scenarios run on a few
//! labs ([`LabName`]): one lab's in order, each starting from what the ones before left (every
//! node Done on the pool's config) and making what it needs (the workload, say), with the worker
//! pool updating every worker at once (those about a rollout's pace, or that need one worker at a
//! time, set their own maxUnavailable); different labs' side by side. After one fails, the rest
//! of its lab's scenarios run on a fresh lab, as the failed one may have left anything behind.
//! Filters select scenarios as test names do (`cargo test -p mco --features lab --test lab --
//! skew`); only the labs of the selected scenarios come up.
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

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use support::{Lab, Platform};

type ScenarioFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// The labs the scenarios run on. A lab mostly waits (on its machines' reboots, its controllers'
/// delays, its in-cluster builds), so two side by side share the two cores well: the suite's
/// longest wait was one lab running every scenario after the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LabName {
    /// On GCP (whose MachineSets the boot image controller manages), with Prometheus: rollouts,
    /// updates, the machines' host side, boot images and, last, least privilege over all of them.
    Rollouts,
    /// On no cloud (the boot image skew an administrator manages): in-cluster builds, paused
    /// pools, boot image skew, tags, signatures, canaries.
    Images,
}

impl LabName {
    fn platform(self) -> Platform {
        match self {
            LabName::Rollouts => Platform::Gcp,
            LabName::Images => Platform::None,
        }
    }

    /// Whether its scenarios look at mco's alerts and metrics in Prometheus.
    fn prometheus(self) -> bool {
        self == LabName::Rollouts
    }
}

struct Scenario {
    name: &'static str,
    lab: LabName,
    run: for<'a> fn(&'a mut Lab) -> ScenarioFuture<'a>,
}

/// `scenario!(LabName, module::function)`: the scenario named after its function's path.
macro_rules! scenario {
    ($lab:expr, $module:ident :: $function:ident) => {
        Scenario {
            name: concat!(stringify!($module), "::", stringify!($function)),
            lab: $lab,
            run: |lab| Box::pin($module::$function(lab)),
        }
    };
}

/// Every scenario, in the order each lab runs them.
fn scenarios() -> Vec<Scenario> {
    use LabName::{Images, Rollouts};
    vec![
        scenario!(Rollouts, boot::nodes_boot_with_ignition_pivot_and_join),
        scenario!(Rollouts, boot::prometheus_scrapes_every_mco_pod),
        scenario!(Rollouts, boot::a_workload_runs_on_the_real_control_plane),
        scenario!(Rollouts, rollout::rollouts_keep_max_unavailable_and_the_disruption_budget),
        scenario!(Rollouts, rollout::a_budget_holds_the_drain_and_mcc_drain_error_fires),
        scenario!(Rollouts, rollout::kubelet_health_checks_never_failed),
        scenario!(Rollouts, streams::each_pool_rolls_out_on_its_os_stream),
        scenario!(Rollouts, updates::an_os_update_is_booted_by_a_real_reboot),
        scenario!(Rollouts, updates::a_kubelet_config_reaches_the_kubelets),
        scenario!(Rollouts, updates::an_image_mirror_set_reaches_every_workers_registries_conf),
        scenario!(Rollouts, updates::a_pinned_image_set_is_pulled_and_pinned_on_every_worker),
        scenario!(Rollouts, updates::a_bad_machine_config_degrades_the_render_and_touches_no_node),
        scenario!(Rollouts, updates::a_node_that_cannot_apply_degrades_and_recovers),
        scenario!(Rollouts, updates::a_daemon_restarted_mid_update_leaves_no_half_done_node),
        scenario!(Rollouts, host::units_are_enabled_masked_and_acted_on_by_the_machines_systemd),
        scenario!(Rollouts, host::the_core_users_ssh_keys_and_password_are_set_without_a_reboot),
        scenario!(Rollouts, updates::upgrading_mco_rolls_its_pods_and_reboots_no_node),
        scenario!(Rollouts, gcp::an_old_rhcos_machineset_is_moved_and_a_custom_one_blocks_upgrades),
        scenario!(Rollouts, rbac::every_component_uses_exactly_its_grants),
        scenario!(Rollouts, rbac::a_daemon_pods_token_touches_no_node_and_only_its_own_mcn),
        scenario!(Images, builds::a_pools_os_image_is_built_in_the_cluster),
        scenario!(Images, updates::a_paused_pool_moves_no_node),
        scenario!(Images, skew::manual_skew_refuses_a_too_old_boot_image_until_reprovisioned),
        scenario!(Images, skew::an_old_recorded_boot_image_blocks_upgrades),
        scenario!(Images, skew::a_pool_whose_image_has_no_kubelet_leaves_its_new_node_not_joined),
        scenario!(Images, images::an_os_image_tag_is_resolved_once_before_any_node),
        scenario!(Images, images::signed_os_images_are_checked_before_any_node),
        scenario!(Images, images::a_canary_soaks_a_moved_tag_is_resolved_and_a_window_holds_the_revert),
        scenario!(Images, images::a_failed_node_halts_the_pool_and_heals_when_reverted),
        scenario!(Images, images::an_os_without_a_kubelet_takes_its_first_worker_down),
        scenario!(Images, boot::lab_down_stops_everything),
    ]
}

/// One lab, brought up by its first scenario, and the scenarios it has still to run.
struct LabRun {
    name: LabName,
    lab: Option<Lab>,
    /// Why the lab did not come up: its other scenarios fail at once.
    broken: Option<String>,
    /// Its selected scenarios not yet run, in order: the first is the one to run now.
    pending: VecDeque<&'static str>,
}

impl LabRun {
    /// The lab: the running one, or a new one.
    fn lab(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        ups: &Mutex<Vec<(LabName, Duration)>>,
    ) -> Result<&mut Lab, Failed> {
        if let Some(why) = &self.broken {
            return Err(format!("the {:?} lab did not come up: {why}", self.name).into());
        }
        if self.lab.as_ref().is_none_or(Lab::is_down) {
            self.lab = None;
            let started = Instant::now();
            match runtime.block_on(Lab::up(self.name.platform(), self.name.prometheus())) {
                Ok(lab) => self.lab = Some(lab),
                Err(why) => {
                    let failed = format!("the {:?} lab did not come up: {why}", self.name);
                    self.broken = Some(why);
                    return Err(failed.into());
                }
            }
            lock(ups).push((self.name, started.elapsed()));
        }
        Ok(self.lab.as_mut().expect("a lab"))
    }
}

/// The labs, and what their scenarios took.
struct Labs {
    /// Each lab, with what tells its scenarios' threads that the next one's turn has come.
    runs: Vec<(LabName, Mutex<LabRun>, Condvar)>,
    /// How long each lab took to come up (again, after a failed scenario).
    ups: Mutex<Vec<(LabName, Duration)>>,
    /// How long each scenario ran.
    times: Mutex<Vec<(&'static str, Duration)>>,
    /// Whether a failed scenario's lab state was kept already.
    kept_a_state: AtomicBool,
}

/// A lock whichever scenario's panic poisoned it: a failed scenario fails alone.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Labs {
    /// The labs of the `selected` scenarios, each to run them in the order given.
    fn new(selected: &[&Scenario]) -> Labs {
        let mut runs: Vec<LabRun> = Vec::new();
        for scenario in selected {
            match runs.iter_mut().find(|run| run.name == scenario.lab) {
                Some(run) => run.pending.push_back(scenario.name),
                None => runs.push(LabRun {
                    name: scenario.lab,
                    lab: None,
                    broken: None,
                    pending: VecDeque::from([scenario.name]),
                }),
            }
        }
        Labs {
            runs: runs.into_iter().map(|run| (run.name, Mutex::new(run), Condvar::new())).collect(),
            ups: Mutex::default(),
            times: Mutex::default(),
            kept_a_state: AtomicBool::new(false),
        }
    }

    /// Runs `scenario` on its lab once the scenarios before it there have run.
    fn run(&self, scenario: &Scenario, runtime: &tokio::runtime::Runtime) -> Result<(), Failed> {
        let (_, run, turn) = self.runs.iter().find(|(name, ..)| *name == scenario.lab).expect("the scenario's lab");
        let mut run = turn
            .wait_while(lock(run), |run| run.pending.front() != Some(&scenario.name))
            .unwrap_or_else(PoisonError::into_inner);
        let outcome = self.run_on(&mut run, scenario, runtime);
        run.pending.pop_front();
        turn.notify_all();
        outcome
    }

    fn run_on(&self, run: &mut LabRun, scenario: &Scenario, runtime: &tokio::runtime::Runtime) -> Result<(), Failed> {
        let lab = run.lab(runtime, &self.ups)?;
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(mco_testenv::WAITER.scope(scenario.name, async {
                support::set_pool(&lab.client, serde_json::json!({ "maxUnavailable": support::EVERY_WORKER })).await;
                (scenario.run)(lab).await
            }))
        }));
        lock(&self.times).push((scenario.name, started.elapsed()));
        outcome.map_err(|panic| {
            if let Some(lab) = run.lab.take() {
                // The first failure's whole state, only the logs of later ones.
                let only_logs = self.kept_a_state.swap(true, Ordering::SeqCst);
                let kept = runtime.block_on(async { lab.down_keeping(only_logs) });
                eprintln!(
                    "scenario {} failed: its lab's {} kept in {}; the {:?} lab's next scenario gets a fresh lab",
                    scenario.name,
                    if only_logs { "logs are" } else { "state is" },
                    kept.display(),
                    scenario.lab
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
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime"),
    );
    let scenarios = scenarios();
    // The scenarios the filters select (as libtest-mimic will: by name), which decide each lab's
    // order and which labs come up.
    let selected: Vec<&Scenario> =
        scenarios.iter().filter(|scenario| !args.is_filtered_out(&Trial::test(scenario.name, || Ok(())))).collect();
    let labs = Arc::new(Labs::new(&selected));
    // A thread for every scenario: each waits for its turn on its lab, the labs run side by side.
    args.test_threads = Some(selected.len().max(1));
    let trials = scenarios
        .into_iter()
        .map(|scenario| {
            let (labs, runtime) = (labs.clone(), runtime.clone());
            Trial::test(scenario.name, move || labs.run(&scenario, &runtime))
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // Taken down inside the runtime: a lab's client lives there.
    runtime.block_on(async {
        for (_, run, _) in &labs.runs {
            lock(run).lab = None;
        }
    });
    for (lab, took) in lock(&labs.ups).iter() {
        println!("lab up time: {lab:?} ({:?}) {:.1}s", lab.platform(), took.as_secs_f64());
    }
    for (name, took) in lock(&labs.times).iter() {
        println!("scenario time: {name} {:.1}s", took.as_secs_f64());
    }
    conclusion.exit_code()
}
