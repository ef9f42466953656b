//! Well-known names shared by every component: namespaces, singleton object names, annotation and
//! label keys, ports, limits, and the built-in pools.
//!
//! Values are those of the original operator (`pkg/controller/common/constants.go`,
//! `pkg/daemon/constants/constants.go`, `manifests/*.machineconfigpool.yaml`); changing any of them
//! breaks compatibility with existing clusters.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::machineconfiguration::{MachineConfigPool, MachineConfigPoolSpec};

// ---------------------------------------------------------------------------------------------
// API groups
// ---------------------------------------------------------------------------------------------

/// API group of MachineConfig, MachineConfigPool, ControllerConfig, MachineOSConfig/Build.
pub const MCFG_GROUP: &str = "machineconfiguration.openshift.io";
/// `apiVersion` of the [`MCFG_GROUP`] kinds.
pub const MCFG_API_VERSION: &str = "machineconfiguration.openshift.io/v1";
/// API group of the Machine API (MachineSet, ControlPlaneMachineSet).
pub const MACHINE_API_GROUP: &str = "machine.openshift.io";

// ---------------------------------------------------------------------------------------------
// Namespaces and singletons
// ---------------------------------------------------------------------------------------------

/// Namespace of the operator, controller, server and daemons.
pub const MCO_NAMESPACE: &str = "openshift-machine-config-operator";
/// Namespace of MachineSets and the stub-Ignition user-data secrets.
pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";
/// Name of the single ControllerConfig.
pub const CONTROLLER_CONFIG_NAME: &str = "machine-config-controller";
/// Name of the single MachineConfiguration; a validating admission policy rejects any other name.
pub const MACHINE_CONFIGURATION_NAME: &str = "cluster";
/// Name of the single OSImageStream.
pub const OS_IMAGE_STREAM_NAME: &str = "cluster";

// ---------------------------------------------------------------------------------------------
// Pools
// ---------------------------------------------------------------------------------------------

/// Built-in control-plane pool.
pub const MASTER_POOL: &str = "master";
/// Built-in worker pool; custom pools inherit from it.
pub const WORKER_POOL: &str = "worker";
/// Built-in pool created only in the HighlyAvailableArbiter topology.
pub const ARBITER_POOL: &str = "arbiter";
/// Prefix of rendered MachineConfig names: `rendered-<pool>-<32 hex md5>`.
pub const RENDERED_PREFIX: &str = "rendered-";

// ---------------------------------------------------------------------------------------------
// Labels and annotations on MachineConfigs, pools and other objects
// ---------------------------------------------------------------------------------------------

/// Label on MachineConfigs naming the pool (role) they apply to.
pub const MACHINE_CONFIG_ROLE_LABEL: &str = "machineconfiguration.openshift.io/role";
/// Prefix of the per-pool label (`pools.operator.machineconfiguration.openshift.io/<pool>: ""`)
/// that KubeletConfig and ContainerRuntimeConfig selectors match.
pub const POOL_LABEL_PREFIX: &str = "pools.operator.machineconfiguration.openshift.io/";
/// Label marking the built-in pools.
pub const MCO_BUILT_IN_LABEL: &str = "machineconfiguration.openshift.io/mco-built-in";
/// Label on the master pool: the cluster upgrade waits for this pool.
pub const REQUIRED_FOR_UPGRADE_LABEL: &str = "operator.machineconfiguration.openshift.io/required-for-upgrade";
/// Controller version hash on controller-generated and rendered MachineConfigs.
pub const GENERATED_BY_CONTROLLER_VERSION_ANNOTATION: &str =
    "machineconfiguration.openshift.io/generated-by-controller-version";
/// On a KubeletConfig or ContainerRuntimeConfig: the numeric suffix of the MachineConfig it
/// generates (`99-<pool>-generated-kubelet-<suffix>`), `""` for none.
pub const MC_NAME_SUFFIX_ANNOTATION: &str = "machineconfiguration.openshift.io/mc-name-suffix";
/// Release version on ControllerConfig, copied onto rendered MachineConfigs.
pub const RELEASE_IMAGE_VERSION_ANNOTATION: &str = "machineconfiguration.openshift.io/release-image-version";
/// Set to `"true"` on a rendered MachineConfig whose osImageURL a user MachineConfig overrode.
pub const OS_IMAGE_URL_OVERRIDDEN_ANNOTATION: &str = "machineconfiguration.openshift.io/os-image-url-overridden";
/// mco's own, on a rendered MachineConfig: its `osImageURL` resolved to a digest
/// (`HOST/NAME@sha256:…`) by the controller's check before any node targets it. Nodes and the
/// Machine Config Server deploy that digest, so a moving tag cannot split a pool. Removing it
/// asks the controller to resolve and check the image again.
pub const PINNED_OS_IMAGE_ANNOTATION: &str = "mco.dev/pinned-os-image";
/// mco's own, on a MachineConfigPool, set by the admin (any value): resolve the tag of the OS image
/// of the pool's target config again, check it, and move the pool's nodes to the digest it
/// names now. The controller removes it once done.
pub const RESOLVE_OS_IMAGE_ANNOTATION: &str = "mco.dev/resolve-os-image";
/// mco's own, on a MachineConfigPool, written by the controller: `<rendered config> <HOST/NAME@sha256:…>`,
/// the digest the config's OS image tag was resolved to again on request
/// ([`RESOLVE_OS_IMAGE_ANNOTATION`]) when it differs from the config's own pin. The pool's nodes
/// deploy it while the pool targets that config.
pub const RESOLVED_OS_IMAGE_ANNOTATION: &str = "mco.dev/resolved-os-image";
/// On a node, written by the node controller: the OS image (by digest) to pull ahead of the
/// node's update (mco's pre-staging).
pub const PRESTAGE_ANNOTATION: &str = "mco.dev/prestage-os-image";
/// On a node, written by its daemon: the OS image it has pulled ahead (or already runs).
pub const PRESTAGED_ANNOTATION: &str = "mco.dev/prestaged-os-image";
/// On a node, written by its daemon: `IMAGE: why` when pulling IMAGE ahead failed (removed once a
/// pull succeeds).
pub const PRESTAGE_ERROR_ANNOTATION: &str = "mco.dev/prestage-error";
/// Install-time pre-built layered image.
pub const PRE_BUILT_IMAGE_ANNOTATION: &str = "machineconfiguration.openshift.io/pre-built-image";
/// OS image of an on-cluster-layering build carried on a MachineConfig.
pub const OCL_OS_IMAGE_URL_ANNOTATION: &str = "machineconfiguration.openshift.io/ocl-osimageurl";
/// Controller version (raw) on ControllerConfig; rendering refuses a mismatch.
pub const GENERATED_BY_VERSION_ANNOTATION: &str = "machineconfiguration.openshift.io/generated-by-version";
/// RFC 3339 time at which boot image updates were turned on by default (on MachineConfiguration).
pub const BOOT_IMAGE_UPDATES_OPTED_IN_AT_ANNOTATION: &str =
    "machineconfiguration.openshift.io/boot-image-updates-opted-in-at";
/// Ignition version a user-data secret's stub config was upgraded to.
pub const STUB_IGNITION_UPGRADED_TO_ANNOTATION: &str = "machineconfiguration.openshift.io/stub-ignition-upgraded-to";
/// OS stream label on MachineSets; boot images are only managed for [`BOOT_IMAGE_OS_STREAM`].
pub const OS_STREAM_LABEL: &str = "machineconfiguration.openshift.io/osstream";
/// Label on the MCO-managed user-data secrets.
pub const MANAGED_CA_BUNDLE_LABEL: &str = "machineconfiguration.openshift.io/managed-ca-bundle-derived-from-configmap";
/// Name of the current MachineOSBuild, on its MachineOSConfig.
pub const CURRENT_MACHINE_OS_BUILD_ANNOTATION: &str = "machineconfiguration.openshift.io/current-machine-os-build";
/// Push secret used by a MachineOSBuild.
pub const RENDERED_IMAGE_PUSH_SECRET_ANNOTATION: &str = "machineconfiguration.openshift.io/rendered-image-push-secret";
/// Pool a MachineOSBuild targets.
pub const TARGET_MACHINE_CONFIG_POOL_LABEL: &str = "machineconfiguration.openshift.io/target-machine-config-pool";
/// Rendered MachineConfig a MachineOSBuild builds.
pub const RENDERED_MACHINE_CONFIG_LABEL: &str = "machineconfiguration.openshift.io/rendered-machine-config";
/// MachineOSConfig a MachineOSBuild belongs to.
pub const MACHINE_OS_CONFIG_LABEL: &str = "machineconfiguration.openshift.io/machine-os-config";
/// Label and annotation naming the MachineOSBuild an object of an on-cluster build belongs to.
pub const MACHINE_OS_BUILD_LABEL: &str = "machineconfiguration.openshift.io/machine-os-build";
/// Label of every object of an on-cluster build.
pub const ON_CLUSTER_LAYERING_LABEL: &str = "machineconfiguration.openshift.io/on-cluster-layering";
/// Label of the objects that live only as long as their build (ConfigMaps, the Job).
pub const EPHEMERAL_BUILD_OBJECT_LABEL: &str = "machineconfiguration.openshift.io/ephemeral-build-object";
/// A MachineOSConfig annotation asking for its current build to be done again.
pub const REBUILD_ANNOTATION: &str = "machineconfiguration.openshift.io/rebuild";
/// Template label of a MachineSet naming the OS; `Windows` machine sets are never touched.
pub const MACHINE_OS_ID_LABEL: &str = "machine.openshift.io/os-id";
/// MachineSet annotation listing node labels, among them `kubernetes.io/arch=<arch>`.
pub const AUTOSCALER_LABELS_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/labels";
/// Node role label prefix (`node-role.kubernetes.io/<role>: ""`).
pub const NODE_ROLE_LABEL_PREFIX: &str = "node-role.kubernetes.io/";

// ---------------------------------------------------------------------------------------------
// Node annotations (all written under machineconfiguration.openshift.io/)
// ---------------------------------------------------------------------------------------------

/// Rendered config the node runs (written by the daemon).
pub const CURRENT_CONFIG_ANNOTATION: &str = "machineconfiguration.openshift.io/currentConfig";
/// Rendered config the node must move to (written by the node controller).
pub const DESIRED_CONFIG_ANNOTATION: &str = "machineconfiguration.openshift.io/desiredConfig";
/// Rendered config the node booted into at first boot (MCS seed file).
pub const FIRST_PIVOT_CONFIG_ANNOTATION: &str = "machineconfiguration.openshift.io/firstPivotConfig";
/// Daemon state: one of the `STATE_*` values.
pub const STATE_ANNOTATION: &str = "machineconfiguration.openshift.io/state";
/// Human reason for Degraded/Unreconcilable, truncated to [`MAX_REASON_LEN`].
pub const REASON_ANNOTATION: &str = "machineconfiguration.openshift.io/reason";
/// OS image the node runs (on-cluster layering).
pub const CURRENT_IMAGE_ANNOTATION: &str = "machineconfiguration.openshift.io/currentImage";
/// OS image the node must move to (on-cluster layering).
pub const DESIRED_IMAGE_ANNOTATION: &str = "machineconfiguration.openshift.io/desiredImage";
/// Drain request from the daemon: `drain-<config>` or `uncordon-<config>`.
pub const DESIRED_DRAIN_ANNOTATION: &str = "machineconfiguration.openshift.io/desiredDrain";
/// Copy of [`DESIRED_DRAIN_ANNOTATION`] written by the drain controller on success.
pub const LAST_APPLIED_DRAIN_ANNOTATION: &str = "machineconfiguration.openshift.io/lastAppliedDrain";
/// ControllerConfig `spec.infra.status.controlPlaneTopology`, copied by the node controller.
pub const CONTROL_PLANE_TOPOLOGY_ANNOTATION: &str = "machineconfiguration.openshift.io/controlPlaneTopology";
/// Set to [`STATE_REBOOTING`] right before a reboot, cleared after it.
pub const POST_CONFIG_ACTION_ANNOTATION: &str = "machineconfiguration.openshift.io/post-config-action";
/// Error text of `ostree-finalize-staged.service` from the previous boot.
pub const OSTREE_FINALIZE_STAGED_FAILURE_ANNOTATION: &str =
    "machineconfiguration.openshift.io/ostree-finalize-staged-failure";
/// Set after auto-labelling a node that booted into a custom pool.
pub const CUSTOM_POOL_LABELS_APPLIED_ANNOTATION: &str = "machineconfiguration.openshift.io/customPoolLabelsApplied";
/// The node's boot image as its aleph file (`/sysroot/.coreos-aleph-version.json`) records it,
/// `{"build":…,"ostree-commit":…}` (ours: upstream only logs the file).
pub const BOOT_IMAGE_ANNOTATION: &str = "machineconfiguration.openshift.io/boot-image";
/// Documented (value [`SSH_ACCESSED`]) but written by nothing upstream.
pub const SSH_ANNOTATION: &str = "machineconfiguration.openshift.io/ssh";
/// Value of [`SSH_ANNOTATION`].
pub const SSH_ACCESSED: &str = "accessed";

/// [`STATE_ANNOTATION`]: the node runs its desired config.
pub const STATE_DONE: &str = "Done";
/// [`STATE_ANNOTATION`]: the daemon is applying a config.
pub const STATE_WORKING: &str = "Working";
/// [`STATE_ANNOTATION`]: applying a config failed.
pub const STATE_DEGRADED: &str = "Degraded";
/// [`STATE_ANNOTATION`]: the desired config cannot be applied to this node.
pub const STATE_UNRECONCILABLE: &str = "Unreconcilable";
/// [`POST_CONFIG_ACTION_ANNOTATION`] value while the node reboots.
pub const STATE_REBOOTING: &str = "Rebooting";
/// Longest [`REASON_ANNOTATION`] value, in characters.
pub const MAX_REASON_LEN: usize = 2000;
/// Prefix of a [`DESIRED_DRAIN_ANNOTATION`] value asking for a drain.
pub const DRAIN_PREFIX: &str = "drain-";
/// Prefix of a [`DESIRED_DRAIN_ANNOTATION`] value asking for an uncordon.
pub const UNCORDON_PREFIX: &str = "uncordon-";
/// Taint key put on nodes of a pool that is updating.
pub const UPDATE_IN_PROGRESS_TAINT_KEY: &str = "UpdateInProgress";
/// Effect of the [`UPDATE_IN_PROGRESS_TAINT_KEY`] taint (it has no value).
pub const UPDATE_IN_PROGRESS_TAINT_EFFECT: &str = "PreferNoSchedule";

// ---------------------------------------------------------------------------------------------
// ConfigMaps and Secrets
// ---------------------------------------------------------------------------------------------

/// ConfigMap (ns/MCO) with the CoreOS stream metadata of the boot images.
pub const BOOT_IMAGES_CONFIGMAP: &str = "coreos-bootimages";
/// Key of [`BOOT_IMAGES_CONFIGMAP`] holding the stream JSON.
pub const BOOT_IMAGES_STREAM_KEY: &str = "stream";
/// Key of [`BOOT_IMAGES_CONFIGMAP`] (and of [`OS_IMAGE_URL_CONFIGMAP`]) holding the OCP version.
pub const RELEASE_VERSION_KEY: &str = "releaseVersion";
/// "Stamp" key the operator adds to [`BOOT_IMAGES_CONFIGMAP`].
pub const MCO_VERSION_HASH_KEY: &str = "MCOVersionHash";
/// "Stamp" key the operator adds to [`BOOT_IMAGES_CONFIGMAP`].
pub const MCO_RELEASE_IMAGE_VERSION_KEY: &str = "MCOReleaseImageVersion";
/// ConfigMap (ns/MCO) with the release's OS images.
pub const OS_IMAGE_URL_CONFIGMAP: &str = "machine-config-osimageurl";
/// Key of [`OS_IMAGE_URL_CONFIGMAP`].
pub const BASE_OS_CONTAINER_IMAGE_KEY: &str = "baseOSContainerImage";
/// Key of [`OS_IMAGE_URL_CONFIGMAP`].
pub const BASE_OS_EXTENSIONS_CONTAINER_IMAGE_KEY: &str = "baseOSExtensionsContainerImage";
/// Key of [`OS_IMAGE_URL_CONFIGMAP`].
pub const OS_IMAGE_URL_KEY: &str = "osImageURL";
/// ConfigMap (ns/MCO) holding the release's `image-references` (an ImageStream document), where
/// the OSImageStream controller finds the release's OS images (mco's stand-in for reading them
/// from the release payload, which mco has not).
pub const RELEASE_IMAGE_REFERENCES_CONFIGMAP: &str = "release-image-references";
/// Key of [`RELEASE_IMAGE_REFERENCES_CONFIGMAP`].
pub const IMAGE_REFERENCES_KEY: &str = "image-references";
/// ConfigMap (ns/MCO) with the operator's component images.
pub const IMAGES_CONFIGMAP: &str = "machine-config-operator-images";
/// Key of [`IMAGES_CONFIGMAP`].
pub const IMAGES_JSON_KEY: &str = "images.json";
/// Suffix of the installer-created stub Ignition secrets (`<role>-user-data`, ns/MAPI).
pub const USER_DATA_SECRET_SUFFIX: &str = "-user-data";
/// Suffix of the MCO-managed stub Ignition secrets (`<pool>-user-data-managed`, ns/MAPI).
pub const MANAGED_USER_DATA_SECRET_SUFFIX: &str = "-user-data-managed";
/// Key of a user-data secret holding the stub Ignition config.
pub const USER_DATA_KEY: &str = "userData";
/// Key of a managed user-data secret telling the machine API not to template it.
pub const DISABLE_TEMPLATING_KEY: &str = "disableTemplating";
/// Secret with the Machine Config Server's serving certificate.
pub const MCS_TLS_SECRET: &str = "machine-config-server-tls";
/// ConfigMap and Secret with the Machine Config Server's CA.
pub const MCS_CA_NAME: &str = "machine-config-server-ca";
/// Secret with the node bootstrap token the server mounts.
pub const NODE_BOOTSTRAPPER_TOKEN_SECRET: &str = "node-bootstrapper-token";
/// Default base image pull secret of on-cluster layering (copy of the global pull secret).
pub const GLOBAL_PULL_SECRET_COPY: &str = "global-pull-secret-copy";

// ---------------------------------------------------------------------------------------------
// Server, sizes, versions
// ---------------------------------------------------------------------------------------------

/// Machine Config Server HTTPS port.
pub const MCS_SECURE_PORT: u16 = 22623;
/// Machine Config Server plain HTTP port.
pub const MCS_INSECURE_PORT: u16 = 22624;
/// Largest rendered MachineConfig, in bytes of its JSON.
pub const MAX_RENDERED_CONFIG_SIZE: usize = 1_572_864;
/// Percentage of [`MAX_RENDERED_CONFIG_SIZE`] above which a warning is emitted.
pub const RENDERED_CONFIG_SIZE_WARN_PERCENT: usize = 80;
/// Ignition spec version of rendered configs.
pub const INTERNAL_IGNITION_VERSION: &str = "3.5.0";
/// Oldest OCP version of a boot image that can still pivot to the current OS image.
pub const OCP_VERSION_BOOT_IMAGE_SKEW_LIMIT: &str = "4.13.0";
/// Oldest RHEL version of an RHCOS boot image that can still pivot to the current OS image.
pub const RHCOS_VERSION_BOOT_IMAGE_SKEW_LIMIT: &str = "9.2";
/// Stub Ignition configs whose version does not start with this are upgraded.
pub const MIN_STUB_IGNITION_SPEC_MAJOR: &str = "3";
/// The only OS stream whose boot images are managed.
pub const BOOT_IMAGE_OS_STREAM: &str = "rhel-9";

/// The built-in `master` and `worker` pools as `manifests/*.machineconfigpool.yaml` define them.
///
/// The operator only enforces their metadata; the spec is user-editable after creation.
pub fn default_pools() -> Vec<MachineConfigPool> {
    [MASTER_POOL, WORKER_POOL]
        .into_iter()
        .map(|role| {
            let mut labels = BTreeMap::from([
                (MCO_BUILT_IN_LABEL.to_string(), String::new()),
                (format!("{POOL_LABEL_PREFIX}{role}"), String::new()),
            ]);
            if role == MASTER_POOL {
                labels.insert(REQUIRED_FOR_UPGRADE_LABEL.to_string(), String::new());
            }
            let selector = |key: String, value: &str| LabelSelector {
                match_labels: Some(BTreeMap::from([(key, value.to_string())])),
                ..Default::default()
            };
            MachineConfigPool {
                metadata: ObjectMeta { name: Some(role.to_string()), labels: Some(labels), ..Default::default() },
                spec: MachineConfigPoolSpec {
                    machine_config_selector: Some(selector(MACHINE_CONFIG_ROLE_LABEL.to_string(), role)),
                    node_selector: Some(selector(format!("{NODE_ROLE_LABEL_PREFIX}{role}"), "")),
                    ..Default::default()
                },
                status: None,
            }
        })
        .collect()
}
