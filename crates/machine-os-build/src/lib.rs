//! On-cluster OS image builds (upstream `pkg/controller/build`), the parts without IO: what a
//! MachineOSConfig asks to be built for its pool's rendered config ([`request`]: the
//! MachineOSBuild with upstream's hashed name, the Containerfile, the ConfigMaps and the Job
//! that builds it in the cluster) and where a build is from its Job's pod ([`progress`]: the
//! MachineOSBuild's conditions and status, the pool's `ImageBuildDegraded`).
//!
//! The build controller in `mco-controller` reads the cluster, calls these and writes what they
//! return.

pub mod progress;
pub mod request;

pub use progress::{Outcome, Phase};
pub use request::{BuildPod, BuildRequest, RequestError};
