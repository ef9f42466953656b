//! One sync of the original's container runtime config controller
//! (`syncContainerRuntimeConfig`), without the registries part (that comes from the cluster's
//! image configuration, not from ContainerRuntimeConfigs).

use mco_api::ContainerRuntimeConfig;

use crate::common::{self, Cluster, Failure, Sync, Writer, overwriting_file};
use crate::crio;
use mco_api::quantity::Quantity;

/// The smallest `pidsLimit` (other than 0) and the largest refused positive `logSizeMax`.
const MIN_PIDS_LIMIT: i64 = 20;
const MIN_LOG_SIZE: i64 = 8192;

/// Syncs `crc` against `cluster`, as the original's `syncContainerRuntimeConfig` does;
/// `additional_storage` is whether the `AdditionalStorageConfig` feature gate is on.
pub fn sync_container_runtime(
    cluster: &Cluster<ContainerRuntimeConfig>,
    additional_storage: bool,
    crc: &ContainerRuntimeConfig,
) -> Sync {
    let mut writer = Writer::new(cluster, crc);
    match run(cluster, additional_storage, crc, &mut writer) {
        Ok(true) => Sync { up_to_date: true, ..writer.sync },
        // Generated container runtime MachineConfigs of other controller versions go.
        Ok(false) => writer.finish("generated-containerruntime", |_| false),
        Err(failure) => Sync { outcome: Err(failure), ..writer.sync },
    }
}

/// Whether it stopped early on an up-to-date MachineConfig.
fn run(
    cluster: &Cluster<ContainerRuntimeConfig>,
    additional_storage: bool,
    crc: &ContainerRuntimeConfig,
    writer: &mut Writer<ContainerRuntimeConfig>,
) -> Result<bool, Failure> {
    let runtime = &crc.spec.container_runtime_config;
    validate(crc).map_err(Failure::plain)?;
    let name = crc.metadata.name.as_deref().unwrap_or_default();
    let none = format!("could not find any MachineConfigPool set for ContainerRuntimeConfig {name}");
    let pools = common::pools_for(crc, cluster.pools, none)?;
    let platform = cluster.platform();
    for pool in pools {
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        let (key, current) = writer.target(pool).map_err(Failure::context("could not get ctrcfg key"))?;
        let status = crc.status.as_ref();
        let observed = status.and_then(|s| s.observed_generation).unwrap_or_default();
        let succeeded = status.and_then(|s| s.conditions.as_ref()?.last()).is_some_and(|c| c.type_ == "Success");
        if let Some(mc) = &current
            && observed >= crc.metadata.generation.unwrap_or_default()
            && succeeded
            && writer.current_version(mc)
        {
            return Ok(true);
        }
        if let Some(error) = common::platform_error(platform) {
            return Err(Failure::context("could not generate origin ContainerRuntime Configs")(format!(
                "generateMachineConfigsforRole failed with error {error}"
            )));
        }
        let mut files = Vec::new();
        let overlay = quantity(runtime.overlay_size.as_ref())?.is_some_and(|q| q.value() != 0);
        let more_stores = [&runtime.additional_layer_stores, &runtime.additional_image_stores]
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| !s.is_empty()));
        if overlay || (additional_storage && more_stores) {
            let template = storage_template()?;
            let storage = crio::storage_conf(&template, runtime, additional_storage).map_err(Failure::plain)?;
            files.push(overwriting_file(crio::STORAGE_CONF, &storage));
        }
        for (path, contents) in crio::dropins(runtime, additional_storage).map_err(Failure::plain)? {
            files.push(overwriting_file(&path, &contents));
        }
        writer.write(&pool_name, &key.name, current, files, false);
    }
    Ok(false)
}

fn quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> Result<Option<Quantity>, Failure> {
    q.map(|q| Quantity::parse(&q.0)).transpose().map_err(Failure::plain)
}

/// The storage.conf of the original's template (`templates/common/_base/files/container-storage.yaml`).
fn storage_template() -> Result<String, Failure> {
    let file = mco_goser::yaml_documents(include_str!("../templates/container-storage.yaml"))
        .map_err(|e| Failure::plain(e.to_string()))?
        .remove(0);
    Ok(file["contents"]["inline"].as_str().unwrap_or_default().to_string())
}

/// `validateUserContainerRuntimeConfig`.
fn validate(crc: &ContainerRuntimeConfig) -> Result<(), String> {
    let runtime = &crc.spec.container_runtime_config;
    let quantity = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.map(|q| Quantity::parse(&q.0)).transpose()
    };
    if let Some(limit) = runtime.pids_limit.filter(|l| *l != 0 && *l < MIN_PIDS_LIMIT) {
        return Err(format!("invalid PidsLimit {limit}"));
    }
    if let Some(max) = quantity(runtime.log_size_max.as_ref())?.filter(|q| (1..=MIN_LOG_SIZE).contains(&q.value())) {
        return Err(format!("invalid LogSizeMax {:?}, cannot be less than 8kB", max.canonical()));
    }
    if let Some(size) = quantity(runtime.overlay_size.as_ref())?.filter(|q| q.value() < 0) {
        return Err(format!("invalid overlaySize {:?}, cannot be less than 0", size.canonical()));
    }
    const LEVELS: [&str; 7] = ["error", "fatal", "panic", "warn", "info", "debug", "trace"];
    if let Some(level) = runtime.log_level.as_ref().filter(|l| !l.is_empty() && !LEVELS.contains(&l.as_str())) {
        return Err(format!(
            "invalid LogLevel {level:?}, must be one of error, fatal, panic, warn, info, debug, or trace"
        ));
    }
    let stores = [
        ("AdditionalLayerStores", &runtime.additional_layer_stores),
        ("AdditionalImageStores", &runtime.additional_image_stores),
        ("AdditionalArtifactStores", &runtime.additional_artifact_stores),
    ];
    let errors: Vec<String> = stores
        .iter()
        .flat_map(|(field, stores)| stores.iter().flatten().filter_map(move |s| store_path_error(field, &s.path)))
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("\n")) }
}

/// `validateStorePath`.
fn store_path_error(field: &str, path: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "/._-".contains(c);
    if path.is_empty() {
        Some(format!("invalid {field}: path must not be empty"))
    } else if !(path.starts_with('/') && path.len() > 1 && path.chars().all(allowed)) {
        Some(format!(
            "invalid {field} path {path:?}: must be an absolute path containing only alphanumeric characters, '/', '.', '_', and '-'"
        ))
    } else if path.contains("//") {
        Some(format!("invalid {field} path {path:?}: must not contain consecutive forward slashes"))
    } else {
        None
    }
}
