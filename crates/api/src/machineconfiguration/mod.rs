//! `machineconfiguration.openshift.io/v1`: the configuration a node runs and how it gets there.

mod controllerconfig;
mod kubeletconfig;
mod layering;
mod machineconfig;
mod machineconfignode;
mod osimagestream;
mod pinnedimageset;
mod pool;

pub use controllerconfig::{
    ControllerCertificate, ControllerConfig, ControllerConfigSpec, ControllerConfigStatus,
    ControllerConfigStatusCondition, ImageRegistryBundle, controller_config_condition,
};
pub use kubeletconfig::{
    AdditionalStore, ConfigCondition, ContainerRuntimeConfig, ContainerRuntimeConfigSpec, ContainerRuntimeConfigStatus,
    ContainerRuntimeConfiguration, DefaultRuntime, KubeletConfig, KubeletConfigSpec, KubeletConfigStatus,
    config_condition,
};
pub(crate) use kubeletconfig::{CONTAINER_RUNTIME_CONFIG_SCHEMA, KUBELET_CONFIG_SCHEMA};
pub use layering::{
    ContainerfileArch, MachineOSBuild, MachineOSBuildSpec, MachineOSBuildStatus, MachineOSBuilderReference,
    MachineOSConfig, MachineOSConfigSpec, MachineOSConfigStatus, MachineOSContainerfile, MachineOSImageBuilder,
    MachineOSImageBuilderType, ObjectReference, machine_os_build_condition,
};
pub use machineconfig::{MachineConfig, MachineConfigSpec, PinError, image_repository, is_by_digest, pin_fits};
pub(crate) use machineconfignode::MACHINE_CONFIG_NODE_SCHEMA;
pub use machineconfignode::{
    IrreconcilableChangeDiff, MachineConfigNode, MachineConfigNodeSpec, MachineConfigNodeSpecMachineConfigVersion,
    MachineConfigNodeStatus, MachineConfigNodeStatusInternalReleaseImage,
    MachineConfigNodeStatusInternalReleaseImageRef, MachineConfigNodeStatusMachineConfigVersion,
    MachineConfigNodeStatusPinnedImageSet, internal_release_image_condition, machine_config_node_condition,
};
pub(crate) use osimagestream::OS_IMAGE_STREAM_SCHEMA;
pub use osimagestream::{OSImageStream, OSImageStreamSet, OSImageStreamSpec, OSImageStreamStatus};
pub use pinnedimageset::{PinnedImageRef, PinnedImageSet, PinnedImageSetSpec};
pub use pool::{
    CertExpiry, MachineConfigPool, MachineConfigPoolCondition, MachineConfigPoolSpec, MachineConfigPoolStatus,
    MachineConfigPoolStatusConfiguration, PoolSynchronizerStatus, pool_condition, resolved_os_image_record,
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Upstream has one such type per use (`MachineConfigPoolReference`, `ImageSecretObjectReference`,
// `PinnedImageSetRef`, `OSImageStreamReference`, ...); they are identical on the wire.
/// A reference to an object by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NameReference {
    /// Name of the referenced object.
    pub name: String,
}

impl NameReference {
    /// A reference to `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}
