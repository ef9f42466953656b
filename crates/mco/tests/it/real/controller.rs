//! `mco controller` as a process against a real API server (mco-testenv): it takes the leader
//! Lease, gives each pool the rendered config `mco render` computes offline, keeps the pools'
//! status (node controller) next to the render controller's condition, and releases the Lease
//! on SIGTERM.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use mco_api::MachineConfigPool;
use mco_api::constants::MCO_NAMESPACE;
use mco_testenv::k8s_openapi::api::coordination::v1::Lease;
use mco_testenv::k8s_openapi::api::core::v1::Namespace;
use mco_testenv::kube::Api;
use mco_testenv::kube::api::{ObjectMeta, PostParams};
use mco_testenv::{TestEnv, eventually};

const RAW: &str = "v0.0.0-was-not-built-properly";
const HASH: &str = "was-not-built-properly";

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster")
}

/// The rendered config name `mco render` prints for `pool`.
fn offline_name(pool: &str) -> String {
    let output = Command::cargo_bin("mco")
        .unwrap()
        .args(["render", "--pool", pool, "-o", "name", "--controller-version-raw", RAW, "--controller-version", HASH])
        .arg(examples())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let name = String::from_utf8(output.stdout).unwrap();
    name.trim().strip_prefix("machineconfig/").unwrap().to_string()
}

/// The controller process; killed if the test ends without stopping it.
struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    fn start(kubeconfig: &Path, log: PathBuf) -> Controller {
        let child = Command::cargo_bin("mco")
            .unwrap()
            .arg("controller")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--render-delay", "0.5", "--retry-delay", "0.5"])
            .args(["--lease-duration", "10", "--renew-deadline", "8", "--retry-period", "0.5"])
            .args(["--identity", "e2e", "--controller-version-raw", RAW, "--controller-version", HASH])
            .env("MCO_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Controller { child, log }
    }

    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("mco controller exited with {status}:\n{}", std::fs::read_to_string(&self.log).unwrap());
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn mco_controller_targets_what_mco_render_computes() {
    let expected: Vec<(&str, String)> =
        ["master", "worker", "infra"].into_iter().map(|p| (p, offline_name(p))).collect();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    // The installer creates the namespace the controller's Lease lives in.
    let namespace = Namespace {
        metadata: ObjectMeta { name: Some(MCO_NAMESPACE.into()), ..Default::default() },
        ..Default::default()
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.create(&PostParams::default(), &namespace).await.unwrap();
    env.create_manifests(&examples()).await.unwrap();
    env.mark_controller_config_completed().await.unwrap();

    let mut controller = Controller::start(env.kubeconfig(), env.dir().join("controller.log"));
    let pools: Api<MachineConfigPool> = Api::all(client.clone());
    for (pool, name) in &expected {
        eventually(&format!("pool {pool} to target {name}"), || {
            controller.assert_running();
            async {
                let target = pools.get(pool).await.unwrap().spec.configuration.and_then(|c| c.name);
                if target.as_ref() == Some(name) { Ok(()) } else { Err(target) }
            }
        })
        .await;
    }

    // The node controller runs too: pools without nodes are updated (status.configuration
    // moves to the target), and its conditions sit next to the render controller's.
    let condition = |pool: &MachineConfigPool, kind: &str| {
        let conditions = pool.status.as_ref()?.conditions.as_ref()?;
        conditions.iter().find(|c| c.type_ == kind).map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
    };
    for (pool, name) in &expected {
        let want = ("True".to_string(), format!("All nodes are updated with MachineConfig {name}"));
        let current = eventually(&format!("pool {pool} Updated with {name}, RenderDegraded set"), || {
            controller.assert_running();
            async {
                let current = pools.get(pool).await.unwrap();
                let settled = condition(&current, "Updated").as_ref() == Some(&want)
                    && condition(&current, "RenderDegraded").is_some();
                if settled { Ok(current) } else { Err(current.status) }
            }
        })
        .await;
        assert_eq!(condition(&current, "RenderDegraded").unwrap().0, "False");
        assert_eq!(condition(&current, "Degraded").unwrap().0, "False");
        let status = current.status.unwrap();
        assert_eq!(status.configuration.and_then(|c| c.name).as_ref(), Some(name));
        assert_eq!(status.machine_count, Some(0));
    }

    let leases: Api<Lease> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let holder = |lease: Lease| lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder(leases.get("machine-config-controller").await.unwrap()).as_deref(), Some("e2e"));

    // SIGTERM: a clean exit that hands the Lease over.
    let status = Command::new("kill").args(["-TERM", &controller.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = eventually("mco controller to exit on SIGTERM", || {
        let exited = controller.child.try_wait().unwrap().ok_or("still running");
        async move { exited }
    })
    .await;
    assert!(exit.success(), "{exit}:\n{}", std::fs::read_to_string(&controller.log).unwrap());
    assert_eq!(holder(leases.get("machine-config-controller").await.unwrap()).as_deref(), Some(""));
}
