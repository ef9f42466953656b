//! OS image streams (upstream's OSImageStream, `OSStreams` feature): which base OS image a pool
//! renders from. A pool names its stream (`spec.osImageStream.name`), a custom pool without one
//! takes the worker pool's, and the others the cluster's default; the stream's images replace
//! the ControllerConfig's as the base a MachineConfig's `osImageURL` may override.
//!
//! Without an OSImageStream object the ControllerConfig's images are the base, as upstream's
//! are with the feature off (mco's controllers create the object only when the cluster offers
//! streams); a pool that names a stream then cannot be rendered.

use mco_api::constants::{
    ARBITER_POOL, MASTER_POOL, OS_IMAGE_STREAM_NAME, RELEASE_IMAGE_VERSION_ANNOTATION, WORKER_POOL,
};
use mco_api::machineconfiguration::{NameReference, OSImageStreamSet};
use mco_api::{MachineConfig, MachineConfigPool, OSImageStream};

/// The streams as the render controller sees them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Streams<'a> {
    /// The OSImageStream `cluster`, if the cluster has one.
    pub os_image_stream: Option<&'a OSImageStream>,
    /// The `worker` pool, whose stream custom pools inherit.
    pub worker_pool: Option<&'a MachineConfigPool>,
}

/// The stream `pool` names itself (`spec.osImageStream.name`), if any.
pub fn named_stream(pool: &MachineConfigPool) -> Option<&str> {
    pool.spec.os_image_stream.as_ref().map(|r| r.name.as_str()).filter(|name| !name.is_empty())
}

/// The stream `pool` renders from (upstream `GetEffectiveOSImageStreamName`): its own, else for a
/// custom pool the worker pool's; `None`: the default stream.
pub fn effective_stream_name<'a>(
    pool: &'a MachineConfigPool,
    worker: Option<&'a MachineConfigPool>,
) -> Option<&'a str> {
    if let Some(name) = named_stream(pool) {
        return Some(name);
    }
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    if [MASTER_POOL, WORKER_POOL, ARBITER_POOL].contains(&name) {
        return None;
    }
    worker.and_then(named_stream)
}

/// Why a pool's stream cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The OSImageStream is not (yet) this controller's: written by another version (during an
    /// upgrade), or not filled in yet. Upstream's render waits for its first sync; the pool is
    /// not degraded for it.
    #[error("{0}")]
    NotReady(String),
    /// The pool names a stream the cluster does not offer (upstream's words).
    #[error("{0}")]
    Unusable(String),
}

/// The stream set `pool` renders from, `None` for the ControllerConfig's images (no
/// OSImageStream and no stream named). `version` is the controller's: an OSImageStream written
/// by another version is not used (upstream's guard during an upgrade); `None` (offline) takes
/// the object as given.
pub fn stream_for_pool<'a>(
    pool: &MachineConfigPool,
    streams: Streams<'a>,
    version: Option<&str>,
) -> Result<Option<&'a OSImageStreamSet>, StreamError> {
    let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
    let wanted = effective_stream_name(pool, streams.worker_pool);
    let Some(stream) = streams.os_image_stream else {
        return match wanted {
            None => Ok(None),
            Some(_) => Err(StreamError::Unusable(format!(
                "could not get OSImageStream for pool {pool_name}: osimagestream.machineconfiguration.openshift.io \
                 \"{OS_IMAGE_STREAM_NAME}\" not found"
            ))),
        };
    };
    if let Some(version) = version {
        match stream.metadata.annotations.as_ref().and_then(|a| a.get(RELEASE_IMAGE_VERSION_ANNOTATION)) {
            None => {
                return Err(StreamError::NotReady(format!(
                    "ignoring OSImageStream without {RELEASE_IMAGE_VERSION_ANNOTATION} annotation (my version: {version})"
                )));
            }
            Some(theirs) if theirs != version => {
                return Err(StreamError::NotReady(format!(
                    "ignoring OSImageStream with version {theirs} (my version: {version})"
                )));
            }
            Some(_) => {}
        }
    }
    let Some(status) = &stream.status else {
        return Err(StreamError::NotReady(format!("OSImageStream {OS_IMAGE_STREAM_NAME} has no streams yet")));
    };
    let name = wanted.unwrap_or(&status.default_stream);
    status.available_streams.iter().find(|set| set.name == name).map(Some).ok_or_else(|| {
        StreamError::Unusable(format!(
            "could not get OSImageStreamSet for pool {pool_name}: osimagestreams.machineconfiguration.openshift.io \
             \"{name}\" not found"
        ))
    })
}

/// Whether a stream runs RHEL 10 (upstream `IsRHEL10Stream`).
pub fn is_rhel10_stream(stream: &str) -> bool {
    stream == "rhel-10" || stream == "centos-10"
}

/// Where CRI-O reads its drop-ins.
const CRIO_DROP_IN_DIR: &str = "/etc/crio/crio.conf.d/";

/// Whether the config's CRI-O drop-ins make runc the default runtime (upstream
/// `DetectRuncInMachineConfig`): read in path order, the last `[crio.runtime] default_runtime`
/// set wins.
pub fn sets_runc(config: &mco_ignition::v3::Config, machine_config: &str) -> Result<bool, String> {
    let mut drop_ins: Vec<_> = config.storage.files.iter().filter(|f| f.path.starts_with(CRIO_DROP_IN_DIR)).collect();
    drop_ins.sort_by(|a, b| a.path.cmp(&b.path));
    let mut runtime = String::new();
    for file in drop_ins {
        let data = mco_ignition::dataurl::decode_contents(&file.contents)
            .map_err(|e| format!("failed to decode CRI-O drop-in {:?} in MC {machine_config:?}: {e}", file.path))?;
        if data.is_empty() {
            continue;
        }
        let text = String::from_utf8_lossy(&data);
        let parsed: toml::Table = toml::from_str(&text).map_err(|e| {
            format!("failed to parse TOML from CRI-O drop-in {:?} in MC {machine_config:?}: {e}", file.path)
        })?;
        let set = parsed
            .get("crio")
            .and_then(|c| c.get("runtime"))
            .and_then(|r| r.get("default_runtime"))
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty());
        if let Some(set) = set {
            runtime = set.to_string();
        }
    }
    Ok(runtime == "runc")
}

/// Upstream's refusal of runc in a pool on a RHEL 10 stream.
pub fn runc_on_rhel10(pool: &str) -> String {
    format!(
        "MachineConfigPool {pool} targets a RHEL 10 OS image where runc is not available. To unblock, migrate to crun \
         by removing any ContainerRuntimeConfig that sets defaultRuntime to runc, and removing any MachineConfig that \
         sets default_runtime = \"runc\" in CRI-O configuration under /etc/crio/crio.conf.d/"
    )
}

/// Upstream's refusal of an `osImageURL` override in a pool that names its stream.
pub const OVERRIDE_WITH_STREAM: &str =
    "cannot override MachineConfig osImageURL and set MachineConfigPool spec.osImageStream.name simultaneously";

/// A pool's `status.osImageStream` (upstream `getOSImageStream`): the stream whose OS image its
/// rendered config runs, once the pool is updated and not degraded (`settled`), unless one of its
/// MachineConfigs sets `osImageURL` (`overridden`: the image is the admin's, whatever it equals).
pub fn pool_status(
    settled: bool,
    rendered: Option<&MachineConfig>,
    overridden: bool,
    stream: Option<&OSImageStream>,
) -> Option<NameReference> {
    if !settled || overridden {
        return None;
    }
    let image = rendered.map(|mc| mc.spec.os_image_url.as_str()).filter(|image| !image.is_empty())?;
    Some(NameReference { name: stream?.stream_of(image)?.name.clone() })
}

#[cfg(test)]
mod tests {
    use mco_api::machineconfiguration::{MachineConfigPoolSpec, OSImageStreamSpec};
    use mco_api::machineconfiguration::{MachineConfigSpec, OSImageStreamStatus};
    use serde_json::json;

    use super::*;

    const MINE: &str = "mco-hash";

    fn pool(name: &str, stream: Option<&str>) -> MachineConfigPool {
        let mut pool = MachineConfigPool::new(name, MachineConfigPoolSpec::default());
        pool.spec.os_image_stream = stream.map(|s| NameReference { name: s.to_string() });
        pool
    }

    fn set(name: &str) -> OSImageStreamSet {
        OSImageStreamSet {
            name: name.to_string(),
            os_image: format!("quay.io/os@sha256:{name}"),
            os_extensions_image: format!("quay.io/ext@sha256:{name}"),
        }
    }

    fn streams(version: Option<&str>) -> OSImageStream {
        let mut stream =
            OSImageStream::new(OS_IMAGE_STREAM_NAME, OSImageStreamSpec { default_stream: "rhel-9".into() });
        stream.metadata.annotations =
            version.map(|v| [(RELEASE_IMAGE_VERSION_ANNOTATION.to_string(), v.to_string())].into());
        stream.status = Some(OSImageStreamStatus {
            available_streams: vec![set("rhel-9"), set("rhel-10")],
            default_stream: "rhel-9".into(),
        });
        stream
    }

    #[test]
    fn custom_pools_inherit_the_workers_stream_and_the_others_the_default() {
        let worker = pool(WORKER_POOL, Some("rhel-10"));
        for (pool, worker, want) in [
            (pool("infra", Some("rhel-9")), Some(&worker), Some("rhel-9")),
            (pool("infra", None), Some(&worker), Some("rhel-10")),
            (pool("infra", None), None, None),
            (pool("infra", Some("")), Some(&pool(WORKER_POOL, None)), None),
            (pool(MASTER_POOL, None), Some(&worker), None),
            (pool(ARBITER_POOL, None), Some(&worker), None),
            (pool(WORKER_POOL, Some("rhel-10")), Some(&worker), Some("rhel-10")),
        ] {
            assert_eq!(effective_stream_name(&pool, worker), want, "{:?}", pool.metadata.name);
        }
    }

    #[test]
    fn pools_render_from_their_stream_or_say_why_not() {
        let (current, old, unversioned) = (&streams(Some(MINE)), &streams(Some("old-hash")), &streams(None));
        let worker10 = pool(WORKER_POOL, Some("rhel-10"));
        fn with(stream: Option<&OSImageStream>) -> Streams<'_> {
            Streams { os_image_stream: stream, worker_pool: None }
        }
        let mut unfilled = streams(Some(MINE));
        unfilled.status = None;
        let unfilled = &unfilled;
        let unusable = |m: &str| Err(StreamError::Unusable(m.to_string()));
        let not_ready = |m: &str| Err(StreamError::NotReady(m.to_string()));
        type Case<'a> = (MachineConfigPool, Streams<'a>, Option<&'a str>, Result<Option<&'a str>, StreamError>);
        let cases: Vec<Case> = vec![
            // No OSImageStream: the ControllerConfig's images, unless a stream is named.
            (pool(WORKER_POOL, None), with(None), Some(MINE), Ok(None)),
            (
                pool(WORKER_POOL, Some("rhel-10")),
                with(None),
                Some(MINE),
                unusable(
                    "could not get OSImageStream for pool worker: osimagestream.machineconfiguration.openshift.io \
                     \"cluster\" not found",
                ),
            ),
            (pool(WORKER_POOL, None), with(Some(current)), Some(MINE), Ok(Some("rhel-9"))),
            (pool(WORKER_POOL, Some("rhel-10")), with(Some(current)), Some(MINE), Ok(Some("rhel-10"))),
            (
                pool("infra", None),
                Streams { os_image_stream: Some(current), worker_pool: Some(&worker10) },
                Some(MINE),
                Ok(Some("rhel-10")),
            ),
            (
                pool(WORKER_POOL, Some("rhel-11")),
                with(Some(current)),
                Some(MINE),
                unusable(
                    "could not get OSImageStreamSet for pool worker: osimagestreams.machineconfiguration.openshift.io \
                     \"rhel-11\" not found",
                ),
            ),
            // Not this controller's yet: waited for, not degrading.
            (
                pool(WORKER_POOL, None),
                with(Some(old)),
                Some(MINE),
                not_ready("ignoring OSImageStream with version old-hash (my version: mco-hash)"),
            ),
            (
                pool(WORKER_POOL, None),
                with(Some(unversioned)),
                Some(MINE),
                not_ready(
                    "ignoring OSImageStream without machineconfiguration.openshift.io/release-image-version \
                     annotation (my version: mco-hash)",
                ),
            ),
            (
                pool(WORKER_POOL, None),
                with(Some(unfilled)),
                Some(MINE),
                not_ready("OSImageStream cluster has no streams yet"),
            ),
            // Offline, the object is taken as given.
            (pool(WORKER_POOL, Some("rhel-10")), with(Some(unversioned)), None, Ok(Some("rhel-10"))),
        ];
        for (pool, streams, version, want) in cases {
            let got = stream_for_pool(&pool, streams, version).map(|set| set.map(|s| s.name.as_str()));
            assert_eq!(got, want, "{:?} {}", pool.metadata.name, json!(pool.spec.os_image_stream));
        }
    }

    #[test]
    fn a_settled_pool_reports_the_stream_its_image_is_from() {
        let stream = streams(Some(MINE));
        let rendered = |image: &str| {
            MachineConfig::new(
                "rendered-worker-1",
                MachineConfigSpec { os_image_url: image.to_string(), ..Default::default() },
            )
        };
        let ten = rendered(&set("rhel-10").os_image);
        let reported = |settled, rendered: Option<&MachineConfig>, overridden, stream: Option<&OSImageStream>| {
            pool_status(settled, rendered, overridden, stream).map(|r| r.name)
        };
        assert_eq!(reported(true, Some(&ten), false, Some(&stream)).as_deref(), Some("rhel-10"));
        assert_eq!(reported(false, Some(&ten), false, Some(&stream)), None, "updating or degraded");
        assert_eq!(reported(true, Some(&ten), true, Some(&stream)), None, "the admin's image");
        assert_eq!(reported(true, None, false, Some(&stream)), None);
        assert_eq!(reported(true, Some(&ten), false, None), None);
        assert_eq!(reported(true, Some(&rendered("quay.io/other@sha256:1")), false, Some(&stream)), None);
        assert_eq!(reported(true, Some(&rendered("")), false, Some(&stream)), None);
    }
}
