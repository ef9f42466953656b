//! A cluster for the boot image controller: the real API server of `mco-testenv` plus minimal
//! CRDs for the two `config.openshift.io` kinds the controller reads (Infrastructure,
//! ClusterVersion), the namespaces, and real-shaped objects from `crates/bootimage/testdata`.

#![allow(dead_code)] // Each test binary uses a part.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use mco_api::constants::{MACHINE_API_NAMESPACE, MACHINE_CONFIGURATION_NAME, MCO_NAMESPACE};
use mco_api::operator::MachineConfiguration;
use mco_api::{ControlPlaneMachineSet, MachineSet};
use mco_bootimage_controller::Options;
use mco_testenv::TestEnv;
pub use mco_testenv::{eventually, satisfying};
use serde_json::{Value, json};

pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Controller logs in the test output, filtered by `MCO_LOG`.
pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCO_LOG").unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

pub fn testdata(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bootimage/testdata").join(file)
}

/// A MachineSet fixture, renamed.
pub fn machineset(fixture: &str, name: &str) -> MachineSet {
    let text = std::fs::read_to_string(testdata(&format!("machinesets/{fixture}"))).unwrap();
    let mut ms: MachineSet = serde_yaml::from_str(&text).unwrap();
    ms.metadata.name = Some(name.to_string());
    // Fixtures are `oc get -o yaml` output: what the API server sets must go.
    ms.metadata.resource_version = None;
    ms.metadata.uid = None;
    ms.metadata.creation_timestamp = None;
    ms.metadata.generation = None;
    ms
}

/// The ControlPlaneMachineSet fixture `cluster`.
pub fn control_plane(fixture: &str) -> ControlPlaneMachineSet {
    let text = std::fs::read_to_string(testdata(&format!("controlplanemachinesets/{fixture}"))).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// The running API server and the controller task (aborted on drop).
pub struct Cluster {
    pub env: TestEnv,
    pub client: Client,
    controller: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(controller) = self.controller.take() {
            controller.abort();
        }
    }
}

pub fn config_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("config.openshift.io", "v1", kind), plural)
}

impl Cluster {
    /// An API server with the CRDs and namespaces, an Infrastructure of `platform` and a
    /// ClusterVersion whose history (newest first) is `history` (version, state).
    pub async fn start(platform: &str, history: &[(&str, &str)]) -> Cluster {
        init_logs();
        let env = TestEnv::start().await.unwrap();
        let client = env.client();
        let crds = [
            mco_testenv::config_openshift_crd("Infrastructure", "infrastructures"),
            mco_testenv::config_openshift_crd("ClusterVersion", "clusterversions"),
        ];
        mco_testenv::install_crds(&client, &crds).await.unwrap();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for ns in [MACHINE_API_NAMESPACE, MCO_NAMESPACE] {
            let object: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
            match namespaces.create(&PostParams::default(), &object).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => panic!("creating namespace {ns}: {e}"),
            }
        }
        let cluster = Cluster { env, client, controller: None };
        cluster
            .apply_config(
                "Infrastructure",
                "infrastructures",
                "cluster",
                json!({"status": {"platformStatus": {"type": platform}}}),
            )
            .await;
        cluster.set_history(history).await;
        cluster
    }

    /// Server-side applies a `config.openshift.io/v1` object (no status subresource here).
    pub async fn apply_config(&self, kind: &str, plural: &str, name: &str, body: Value) {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &config_resource(kind, plural));
        let mut object = json!({"apiVersion": "config.openshift.io/v1", "kind": kind, "metadata": {"name": name}});
        object.as_object_mut().unwrap().extend(body.as_object().unwrap().clone());
        api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&object)).await.unwrap();
    }

    /// ClusterVersion `version` with this history, newest first.
    pub async fn set_history(&self, history: &[(&str, &str)]) {
        let history: Vec<Value> = history.iter().map(|(v, s)| json!({"version": v, "state": s})).collect();
        self.apply_config("ClusterVersion", "clusterversions", "version", json!({"status": {"history": history}}))
            .await;
    }

    pub fn start_controller(&mut self, options: Options) {
        let client = self.client.clone();
        self.controller = Some(tokio::spawn(mco_bootimage_controller::run(client, options)));
    }

    /// `coreos-bootimages` with the stream file's JSON (or any text) and the OCP version.
    pub async fn set_boot_images(&self, stream: &str, release_version: &str) {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "coreos-bootimages", "namespace": MCO_NAMESPACE},
            "data": {"stream": stream, "releaseVersion": release_version},
        }))
        .unwrap();
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), MCO_NAMESPACE);
        api.patch("coreos-bootimages", &PatchParams::apply("test").force(), &Patch::Apply(&cm)).await.unwrap();
    }

    /// The installer's `worker-user-data` secret with a spec 2.2 stub.
    pub async fn create_user_data_secret(&self) -> Secret {
        self.create_user_data_secret_named("worker-user-data").await
    }

    /// The same stub secret under another name (`master-user-data`).
    pub async fn create_user_data_secret_named(&self, name: &str) -> Secret {
        let text = std::fs::read_to_string(testdata("stubs/worker-user-data-secret.json")).unwrap();
        let mut secret: Secret = serde_json::from_str(&text).unwrap();
        secret.metadata.name = Some(name.to_string());
        self.secrets().create(&PostParams::default(), &secret).await.unwrap()
    }

    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), MACHINE_API_NAMESPACE)
    }

    pub fn machinesets(&self) -> Api<MachineSet> {
        Api::namespaced(self.client.clone(), MACHINE_API_NAMESPACE)
    }

    pub async fn create_machineset(&self, ms: &MachineSet) -> MachineSet {
        self.machinesets().create(&PostParams::default(), ms).await.unwrap()
    }

    pub fn control_planes(&self) -> Api<ControlPlaneMachineSet> {
        Api::namespaced(self.client.clone(), MACHINE_API_NAMESPACE)
    }

    pub fn configurations(&self) -> Api<MachineConfiguration> {
        Api::all(self.client.clone())
    }

    pub async fn configuration(&self) -> Option<MachineConfiguration> {
        self.configurations().get_opt(MACHINE_CONFIGURATION_NAME).await.unwrap()
    }

    /// Waits for a condition of MachineConfiguration `cluster` matching `check` (type, status,
    /// message) and returns its message.
    pub async fn condition(&self, type_: &str, check: impl Fn(&str, &str) -> bool) -> String {
        eventually(&format!("condition {type_}"), || async {
            let conditions = self.configuration().await.and_then(|c| c.status?.conditions).unwrap_or_default();
            match conditions.iter().find(|c| c.type_ == type_) {
                Some(c) if check(&c.status, &c.message) => Ok(c.message.clone()),
                _ => Err(conditions),
            }
        })
        .await
    }
}

/// The first boot disk image of a GCP MachineSet.
pub fn gcp_boot_image(ms: &MachineSet) -> String {
    ms.provider_spec().unwrap()["disks"][0]["image"].as_str().unwrap().to_string()
}

pub fn set_gcp_boot_image(ms: &mut MachineSet, image: &str) {
    ms.provider_spec_mut().unwrap()["disks"][0]["image"] = json!(image);
}
