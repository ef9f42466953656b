//! Kubernetes API types of the Machine Config Operator, wire-compatible with `openshift/api`.
//!
//! * [`machineconfiguration`]: `machineconfiguration.openshift.io/v1` — [`MachineConfig`],
//!   [`MachineConfigPool`], [`ControllerConfig`], [`MachineOSConfig`], [`MachineOSBuild`],
//!   [`KubeletConfig`], [`ContainerRuntimeConfig`], [`PinnedImageSet`], [`OSImageStream`],
//!   [`MachineConfigNode`].
//! * [`operator`]: `operator.openshift.io/v1` — [`MachineConfiguration`].
//! * [`config`]: `config.openshift.io/v1` types those kinds embed (the TLS security profile).
//! * [`image_config`]: the cluster's image configuration — [`Image`], [`ImageDigestMirrorSet`],
//!   [`ImageTagMirrorSet`], [`ImageContentSourcePolicy`].
//! * [`machine`]: `machine.openshift.io/v1beta1` — [`MachineSet`], `machine.openshift.io/v1` —
//!   [`ControlPlaneMachineSet`], and in-place accessors for the boot-image fields of their provider
//!   specs ([`machine::provider`]).
//! * [`containers_policy`]: the files a containers-policy.json names, and the policy seen from
//!   another root.
//! * [`constants`]: well-known namespaces, names, annotation and label keys, limits, default pools.
//! * [`crds`] / [`crds_yaml`]: the CustomResourceDefinitions, generated from the types.
//! * [`validate`]: the object rules upstream enforces in the API server (CRD, CEL, VAP), as a pure
//!   function for offline validation.
//!
//! Field names, JSON tags and `omitempty` behaviour follow the upstream Go types so that manifests
//! written for the original operator round-trip unchanged. Optional fields are `Option`s and are
//! omitted when `None`, so reading and writing back an object neither loses nor adds fields. The one
//! exception is [`MachineConfigSpec`], which serializes exactly like Go's `encoding/json` because
//! rendered config names are hashes of that output.
//!
//! Free-form JSON fields that Go writes as `null` when unset (ControllerConfig `infra`, `dns`,
//! `proxy`, `network`; MachineConfiguration `observedConfig`, `unsupportedConfigOverrides`) read an
//! explicit `null` as `Some(Value::Null)` so that it is written back; treat it like `None`. Other
//! explicit `null`s (e.g. a nil `[]byte`) read as `None` and are written back as absent, which Go
//! and the API server treat the same.

pub mod config;
pub mod constants;
pub mod containers_policy;
mod crd;
pub mod image_config;
pub mod machine;
pub mod machineconfiguration;
mod null;
pub mod operator;
pub mod quantity;
mod schema;
pub mod validate;

pub use crd::{crds, crds_yaml};
pub use image_config::{Image, ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet};
pub use machine::{ControlPlaneMachineSet, MachineSet};
pub use machineconfiguration::{
    ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigNode, MachineConfigNodeSpec,
    MachineConfigNodeSpecMachineConfigVersion, MachineConfigNodeStatus, MachineConfigNodeStatusMachineConfigVersion,
    MachineConfigNodeStatusPinnedImageSet, MachineConfigPool, MachineConfigSpec, MachineOSBuild, MachineOSConfig,
    NameReference, OSImageStream, PinnedImageSet,
};
pub use operator::MachineConfiguration;
