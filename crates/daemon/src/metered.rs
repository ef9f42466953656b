//! The node's OS backend and reboot as the daemon uses them: their failures counted (the
//! original's `mcd_pivot_errors_total` and `mcd_reboots_failed_total`), each reboot request
//! recorded on the node, so that the daemon on the new boot can observe how long the reboot took,
//! and the update's reports made just before the request ([`BeforeReboot`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use mco_apply::apply::{Node, Reboot};
use mco_apply::journal;
use mco_apply::os::{OsBackend, OsStatus};
use mco_apply::plan::OsChanges;
use mco_apply::state::{self, RebootRequest};
use mco_metrics::daemon::{DaemonMetrics, UpdatePhase};

/// `node` with its OS backend and reboot metered into `metrics`, its reboot preceded by what
/// `before` holds then.
pub fn metered(node: Node, metrics: &DaemonMetrics, before: BeforeReboot) -> Node {
    let Node { root, systemd, os, originals, reboot } = node;
    let os = os.map(|inner| -> Box<dyn OsBackend> { Box::new(CountedOs { inner, metrics: metrics.clone() }) });
    let reboot = Box::new(RecordedReboot { inner: reboot, root: root.clone(), metrics: metrics.clone(), before });
    Node { root, systemd, os, originals, reboot }
}

/// Work to do just before a reboot is requested, set for one update: once the request is made the
/// node may go down at any moment, so what must be reported before it (upstream records its
/// `RebootedNode` condition before it reboots) cannot wait until the apply returns.
#[derive(Clone, Default)]
pub struct BeforeReboot(Arc<Mutex<Option<Work>>>);

type Work = Box<dyn FnOnce() + Send>;

impl BeforeReboot {
    pub fn set(&self, work: impl FnOnce() + Send + 'static) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(work));
    }

    /// Drops the work if no reboot ran it.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    fn run(&self) {
        let work = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(work) = work {
            work();
        }
    }
}

/// Counts the failures of an OS update: pulling the image or staging the deployment.
struct CountedOs {
    inner: Box<dyn OsBackend>,
    metrics: DaemonMetrics,
}

impl CountedOs {
    fn counted<T>(&self, result: anyhow::Result<T>) -> anyhow::Result<T> {
        if result.is_err() {
            self.metrics.pivot_errors.inc();
        }
        result
    }
}

impl OsBackend for CountedOs {
    fn status(&self) -> anyhow::Result<OsStatus> {
        self.inner.status()
    }

    fn pull_ahead(&self, image: &str) -> anyhow::Result<bool> {
        self.counted(self.inner.pull_ahead(image))
    }

    fn prestage(&self, image: &str) -> anyhow::Result<bool> {
        self.inner.prestage(image)
    }

    fn drop_pulled(&self) -> anyhow::Result<Vec<String>> {
        self.inner.drop_pulled()
    }

    fn apply(&self, changes: &OsChanges) -> anyhow::Result<()> {
        self.counted(self.inner.apply(changes))
    }

    fn discard_staged(&self) -> anyhow::Result<()> {
        self.inner.discard_staged()
    }

    fn carry_into_staged(&self, root: &std::path::Path, paths: &[String]) -> anyhow::Result<()> {
        self.inner.carry_into_staged(root, paths)
    }
}

/// Records each reboot request and counts the ones that fail.
struct RecordedReboot {
    inner: Box<dyn Reboot>,
    root: PathBuf,
    metrics: DaemonMetrics,
    before: BeforeReboot,
}

impl Reboot for RecordedReboot {
    fn reboot(&self, rationale: &str) -> anyhow::Result<()> {
        self.before.run();
        // Recorded before the request: once it is made the node may go down at any moment. A
        // record that cannot be written costs only the measurement.
        let recorded = record_request(&self.root)
            .inspect_err(|e| tracing::warn!("the reboot's duration will not be measured: {e:#}"))
            .is_ok();
        let requested = self.inner.reboot(rationale);
        if requested.is_err() {
            self.metrics.reboots_failed.inc();
            if recorded && let Err(e) = state::remove_reboot_request(&self.root) {
                tracing::warn!("{e:#}");
            }
        }
        requested
    }
}

fn record_request(root: &Path) -> anyhow::Result<()> {
    let request = RebootRequest { boot_id: journal::boot_id(root)?, unix_millis: unix_millis(SystemTime::now()) };
    state::write_reboot_request(root, &request)
}

fn unix_millis(now: SystemTime) -> u64 {
    now.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// How long the reboot `request` took, for a node in boot `boot_id` confirming its update at
/// `now_millis` (pure): `None` while the node is still in the boot that requested it. A clock set
/// back during the reboot counts as no time.
pub fn reboot_took(request: &RebootRequest, boot_id: &str, now_millis: u64) -> Option<Duration> {
    (request.boot_id != boot_id).then(|| Duration::from_millis(now_millis.saturating_sub(request.unix_millis)))
}

/// Observes the `reboot` phase once the node under `root` runs a boot after the one that
/// requested the recorded reboot; the record is consumed.
pub fn observe_reboot(root: &Path, metrics: &DaemonMetrics) -> anyhow::Result<()> {
    let Some(request) = state::read_reboot_request(root)? else { return Ok(()) };
    if let Some(took) = reboot_took(&request, &journal::boot_id(root)?, unix_millis(SystemTime::now())) {
        // Removed first: a record that stays would be observed again.
        state::remove_reboot_request(root)?;
        metrics.observe_phase(UpdatePhase::Reboot, took);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reboot_took_the_time_since_its_request_once_the_boot_changed() {
        let request = RebootRequest { boot_id: "boot-1".to_string(), unix_millis: 10_000 };
        let cases = [
            ("still the requesting boot", "boot-1", 95_000, None),
            ("a new boot", "boot-2", 95_000, Some(Duration::from_secs(85))),
            ("the clock set back", "boot-2", 9_000, Some(Duration::ZERO)),
        ];
        for (name, boot_id, now, want) in cases {
            assert_eq!(reboot_took(&request, boot_id, now), want, "{name}");
        }
    }

    use mco_apply::apply::REBOOT_REQUEST;

    /// What was carried: the root and the paths of each call.
    type Carried = Arc<Mutex<Vec<(PathBuf, Vec<String>)>>>;

    /// An OS backend that records what it was asked to carry into its staged deployment.
    #[derive(Default)]
    struct RecordingCarry(Carried);

    impl OsBackend for RecordingCarry {
        fn status(&self) -> anyhow::Result<OsStatus> {
            Ok(OsStatus::default())
        }
        fn apply(&self, _: &mco_apply::plan::OsChanges) -> anyhow::Result<()> {
            Ok(())
        }
        fn discard_staged(&self) -> anyhow::Result<()> {
            Ok(())
        }
        fn carry_into_staged(&self, root: &Path, paths: &[String]) -> anyhow::Result<()> {
            self.0.lock().unwrap().push((root.to_path_buf(), paths.to_vec()));
            Ok(())
        }
    }

    #[test]
    fn the_counted_backend_passes_on_what_the_staged_deployment_must_carry() {
        let carried = RecordingCarry::default();
        let seen = carried.0.clone();
        let mut registry = mco_metrics::Registry::default();
        let counted = CountedOs { inner: Box::new(carried), metrics: DaemonMetrics::register(&mut registry) };
        counted.carry_into_staged(Path::new("/rootfs"), &["/etc/a".to_string()]).unwrap();
        assert_eq!(*seen.lock().unwrap(), [(PathBuf::from("/rootfs"), vec!["/etc/a".to_string()])]);
    }

    struct FailingReboot;

    impl Reboot for FailingReboot {
        fn reboot(&self, _: &str) -> anyhow::Result<()> {
            anyhow::bail!("systemd-run failed")
        }
    }

    /// The directory root's boot id, as the booter of a directory root (the lab) records it.
    fn boot(root: &Path, id: &str) {
        let path = mco_apply::fsutil::host_path(root, journal::DIRECTORY_ROOT_BOOT_ID).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{id}\n")).unwrap();
    }

    #[test]
    fn a_reboot_is_observed_on_the_next_boot_and_a_failed_request_is_counted_not_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        boot(root, "boot-1");
        let mut registry = mco_metrics::Registry::default();
        let metrics = DaemonMetrics::register(&mut registry);
        let reboots_observed = || {
            let text = mco_metrics::render(&registry);
            let count =
                text.lines().find_map(|l| l.strip_prefix("mco_daemon_update_phase_seconds_count{phase=\"reboot\"} "));
            count.map_or(0, |n| n.parse::<u64>().unwrap())
        };

        let failing = RecordedReboot {
            inner: Box::new(FailingReboot),
            root: root.into(),
            metrics: metrics.clone(),
            before: BeforeReboot::default(),
        };
        assert!(failing.reboot("Node will reboot into config b").is_err());
        assert_eq!(metrics.reboots_failed.get(), 1);
        assert_eq!(state::read_reboot_request(root).unwrap(), None, "a failed request leaves no record");

        // What was set before the reboot runs before the request is made, once.
        let before = BeforeReboot::default();
        let node = metered(Node::directory_root(root.into(), None), &metrics, before.clone());
        let requested_before: Arc<Mutex<Vec<bool>>> = Arc::default();
        let (seen, request) = (requested_before.clone(), mco_apply::fsutil::host_path(root, REBOOT_REQUEST).unwrap());
        before.set(move || seen.lock().unwrap().push(request.exists()));
        node.reboot.reboot("Node will reboot into config b").unwrap();
        assert_eq!(*requested_before.lock().unwrap(), [false], "run once, before the request");
        node.reboot.reboot("Node will reboot into config b").unwrap();
        assert_eq!(requested_before.lock().unwrap().len(), 1, "not again");
        let (cleared, ran) = (BeforeReboot::default(), requested_before.clone());
        cleared.set(move || ran.lock().unwrap().push(true));
        cleared.clear();
        cleared.run();
        assert_eq!(requested_before.lock().unwrap().len(), 1, "cleared work does not run");
        let recorded = state::read_reboot_request(root).unwrap().expect("the request recorded");
        assert_eq!(recorded.boot_id, "boot-1");
        assert_eq!(metrics.reboots_failed.get(), 1, "only the failed request counted");

        observe_reboot(root, &metrics).unwrap();
        assert_eq!(reboots_observed(), 0, "not before the reboot");
        boot(root, "boot-2");
        observe_reboot(root, &metrics).unwrap();
        assert_eq!(reboots_observed(), 1);
        assert_eq!(state::read_reboot_request(root).unwrap(), None, "consumed");
        observe_reboot(root, &metrics).unwrap();
        assert_eq!(reboots_observed(), 1, "observed once");
    }
}
