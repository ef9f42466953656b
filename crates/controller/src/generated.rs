//! Writing the MachineConfigs a controller generates (the kubelet config, container runtime config
//! and image configuration controllers): created, replaced when they differ, deleted.

use kube::api::PostParams;
use kube::{Api, ResourceExt};
use mco_api::MachineConfig;

use crate::{CONTROLLER_NAME, KubeError, kube_error};

/// Creates the generated MachineConfig, or replaces the one of that name when its spec or
/// annotations differ.
pub(crate) async fn write_machine_config(api: &Api<MachineConfig>, generated: &MachineConfig) -> Result<(), KubeError> {
    let name = generated.name_any();
    let post = PostParams { field_manager: Some(CONTROLLER_NAME.to_string()), ..Default::default() };
    match api.get_opt(&name).await.map_err(kube_error(format!("reading MachineConfig {name}")))? {
        None => {
            api.create(&post, generated).await.map_err(kube_error(format!("creating MachineConfig {name}")))?;
            tracing::info!("created MachineConfig {name}");
        }
        Some(existing)
            if existing.spec == generated.spec && existing.metadata.annotations == generated.metadata.annotations => {}
        Some(existing) => {
            let mut replacement = generated.clone();
            replacement.metadata.resource_version = existing.metadata.resource_version;
            api.replace(&name, &post, &replacement)
                .await
                .map_err(kube_error(format!("replacing MachineConfig {name}")))?;
            tracing::info!("updated MachineConfig {name}");
        }
    }
    Ok(())
}

/// Deletes the MachineConfig `name`; one already gone is fine.
pub(crate) async fn delete_machine_config(api: &Api<MachineConfig>, name: &str) -> Result<(), KubeError> {
    match api.delete(name, &Default::default()).await {
        Ok(_) => {
            tracing::info!("deleted MachineConfig {name}");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(kube_error(format!("deleting MachineConfig {name}"))(e)),
    }
}
