//! Reactive boot image skew enforcement (seed 003, issue 6): a machine whose boot image is too
//! old to pivot to the cluster's OS image is refused its config (403) with a text the machine's
//! console shows, instead of failing later half-way through its first boot. Upstream has no such
//! check: it only blocks cluster upgrades (`docs/concepts/boot-images.md#boot-image-skew`).
//!
//! The machine says its boot image version (the aleph `build`) in the
//! [`BOOT_IMAGE_VERSION_HEADER`] header, or the [`BOOT_IMAGE_VERSION_QUERY`] query for spec 2.x
//! stubs; one that says nothing is judged by the boot image the cluster records. The verdicts
//! are [`check_node_boot_image`] and [`check_cluster_boot_image`]; this module only reads the
//! request and words the answer (pure), and limits how often a refusal becomes an Event.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mco_api::operator::BootImageSkewEnforcementStatus;
use mco_bootimage::skew::{
    BOOT_IMAGE_VERSION_HEADER, BOOT_IMAGE_VERSION_QUERY, NodeVerdict, check_cluster_boot_image, check_node_boot_image,
    check_stream_boot_image,
};

/// Event reason of a refusal, on the MachineConfigPool.
pub const REFUSED_EVENT_REASON: &str = "BootImageSkewRefused";
/// At most one Event per pool and version in this time.
pub const EVENT_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// Real versions are about 25 bytes; a longer one is refused before it reaches logs or Events.
const MAX_VERSION_BYTES: usize = 128;

/// Whether a machine may get its pool's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Allowed,
    /// 403: the boot image is too old; the text says why and what to do.
    Refused(String),
    /// 400: the version the machine sent cannot be read.
    Invalid(String),
}

/// The boot image version a request carries: the header, else the query parameter; `None` when
/// it has neither. A header that is not text is an error.
pub fn requested_version(header: Option<&[u8]>, query: Option<&str>) -> Result<Option<String>, String> {
    if let Some(header) = header {
        return std::str::from_utf8(header)
            .map(|v| Some(v.to_string()))
            .map_err(|_| format!("the {BOOT_IMAGE_VERSION_HEADER} header is not UTF-8 text\n"));
    }
    let Some(query) = query else { return Ok(None) };
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name == BOOT_IMAGE_VERSION_QUERY {
            return percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map(|v| Some(v.into_owned()))
                .map_err(|_| format!("the {BOOT_IMAGE_VERSION_QUERY} query parameter is not UTF-8 text\n"));
        }
    }
    Ok(None)
}

/// Judges a machine of `pool` that says it booted from `version` (or says nothing), under the
/// cluster's skew `status` (MachineConfiguration `cluster`; no status or mode `None`: allowed),
/// and, when the pool's OS image is of the OS stream `stream`, by the stream's RHEL major (seed
/// 003; whatever the skew mode: a boot image of another major cannot pivot at all).
pub fn judge(
    pool: &str,
    status: Option<&BootImageSkewEnforcementStatus>,
    version: Option<&str>,
    stream: Option<&str>,
) -> Admission {
    let invalid = |e: mco_bootimage::skew::VersionError| {
        Admission::Invalid(format!(
            "invalid boot image version in the {BOOT_IMAGE_VERSION_HEADER} header or the {BOOT_IMAGE_VERSION_QUERY} query: {e}\n"
        ))
    };
    let verdict = match version {
        Some(v) if v.len() > MAX_VERSION_BYTES => {
            return Admission::Invalid(format!(
                "invalid boot image version ({} bytes): at most {MAX_VERSION_BYTES} bytes, e.g. 9.6.20251023-0\n",
                v.len()
            ));
        }
        Some(v) => {
            if let Some(stream) = stream {
                match check_stream_boot_image(stream, v) {
                    Ok(NodeVerdict::Allowed) => {}
                    Ok(NodeVerdict::Refused { message }) => {
                        return Admission::Refused(stream_refusal(pool, v, stream, &message));
                    }
                    Err(e) => return invalid(e),
                }
            }
            match check_node_boot_image(status, v) {
                Ok(verdict) => verdict,
                Err(e) => return invalid(e),
            }
        }
        None => match check_cluster_boot_image(status) {
            Ok(verdict) => verdict,
            // The admin's record is broken: nothing says this machine's boot image is recent enough.
            Err(e) => NodeVerdict::Refused {
                message: format!(
                    "the cluster's recorded boot image cannot be judged: {e}; correct spec.bootImageSkewEnforcement.manual"
                ),
            },
        },
    };
    match verdict {
        NodeVerdict::Allowed => Admission::Allowed,
        NodeVerdict::Refused { message } => Admission::Refused(refusal(pool, version, &message)),
    }
}

/// The 403 body: the pool, the machine's version (or that it sent none), the check's message
/// (which names the version and the limit), and how to turn enforcement off.
fn refusal(pool: &str, version: Option<&str>, message: &str) -> String {
    let judged = match version {
        Some(v) => format!("this machine's boot image version is {v}"),
        None => format!(
            "this machine did not send its boot image version ({BOOT_IMAGE_VERSION_HEADER}), so the cluster's recorded boot image was judged"
        ),
    };
    format!(
        "refusing to serve the config of pool {pool}: {judged}: {message}.\n\
         To let such machines join anyway, disable boot image skew enforcement: set \
         spec.bootImageSkewEnforcement.mode: None on machineconfiguration/cluster \
         (oc patch machineconfiguration cluster --type merge -p '{{\"spec\":{{\"bootImageSkewEnforcement\":{{\"mode\":\"None\"}}}}}}').\n"
    )
}

/// The 403 body for a boot image of another RHEL major than the pool's OS stream.
fn stream_refusal(pool: &str, version: &str, stream: &str, message: &str) -> String {
    format!(
        "refusing to serve the config of pool {pool}: this machine's boot image version is {version}: {message}.\n\
         Boot machines of this pool from a boot image of the {stream} stream, or move the pool to a stream of this \
         boot image's RHEL major (spec.osImageStream.name).\n"
    )
}

/// Remembers which refusals became Events lately, so a machine retrying every few seconds does
/// not flood the pool's Events: one per (pool, version) per interval. Bounded: when `capacity`
/// different recent refusals are remembered, further ones are not recorded as Events (they are
/// still logged).
#[derive(Debug)]
pub struct EventLimiter {
    interval: Duration,
    capacity: usize,
    last: HashMap<(String, String), Instant>,
}

impl EventLimiter {
    pub fn new(interval: Duration, capacity: usize) -> Self {
        EventLimiter { interval, capacity, last: HashMap::new() }
    }

    /// Whether a refusal of `version` (empty: none sent) for `pool` at `now` may become an
    /// Event; if so it is remembered.
    pub fn allow(&mut self, pool: &str, version: &str, now: Instant) -> bool {
        let interval = self.interval;
        self.last.retain(|_, at| now.saturating_duration_since(*at) < interval);
        let key = (pool.to_string(), version.to_string());
        if self.last.contains_key(&key) || self.last.len() >= self.capacity {
            return false;
        }
        self.last.insert(key, now);
        true
    }
}

impl Default for EventLimiter {
    fn default() -> Self {
        EventLimiter::new(EVENT_INTERVAL, 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mco_api::operator::{
        BootImageSkewEnforcementModeStatus as Mode, ClusterBootImageManual, ClusterBootImageManualMode,
    };

    fn manual(ocp: Option<&str>, rhcos: Option<&str>) -> BootImageSkewEnforcementStatus {
        BootImageSkewEnforcementStatus {
            mode: Some(Mode::Manual),
            manual: Some(ClusterBootImageManual {
                mode: Some(if ocp.is_some() {
                    ClusterBootImageManualMode::OcpVersion
                } else {
                    ClusterBootImageManualMode::RhcosVersion
                }),
                ocp_version: ocp.map(str::to_string),
                rhcos_version: rhcos.map(str::to_string),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_version_comes_from_the_header_else_the_query() {
        for (header, query, want) in [
            (Some("9.6.20251023-0"), None, Ok(Some("9.6.20251023-0"))),
            (Some("9.6.20251023-0"), Some("bootImageVersion=4.1.0"), Ok(Some("9.6.20251023-0"))),
            (None, Some("bootImageVersion=412.86.202301010000-0"), Ok(Some("412.86.202301010000-0"))),
            (None, Some("a=b&bootImageVersion=4.12%2E0&c"), Ok(Some("4.12.0"))),
            (None, Some("bootImageVersion="), Ok(Some(""))),
            (None, Some("bootimageversion=4.1.0&x"), Ok(None)),
            (None, None, Ok(None)),
            (None, Some("bootImageVersion=%ff"), Err("the bootImageVersion query parameter is not UTF-8 text\n")),
        ] {
            let got = requested_version(header.map(str::as_bytes), query);
            assert_eq!(got, want.map(|v| v.map(str::to_string)).map_err(str::to_string), "{header:?} {query:?}");
        }
        assert_eq!(
            requested_version(Some(b"\xff"), None),
            Err("the X-MCO-Boot-Image-Version header is not UTF-8 text\n".to_string())
        );
    }

    #[test]
    fn judgements() {
        /// What the answer must be; the text must be part of its body.
        #[derive(Debug)]
        enum Want {
            Allowed,
            Refused(&'static str),
            Invalid(&'static str),
        }
        let current = manual(None, Some("9.6.20251023-0"));
        let old = manual(Some("4.12.0"), None);
        let unreadable = manual(None, Some("9.6"));
        let none = BootImageSkewEnforcementStatus { mode: Some(Mode::None), ..Default::default() };
        let long = "4.1.0-".to_string() + &"x".repeat(200);
        let cases = [
            ("no MachineConfiguration", None, Some("412.86.202301010000-0"), Want::Allowed),
            ("enforcement off", Some(&none), Some("412.86.202301010000-0"), Want::Allowed),
            ("enforcement off, unreadable", Some(&none), Some("garbage"), Want::Allowed),
            ("current machine", Some(&current), Some("9.6.20260101-0"), Want::Allowed),
            (
                "old machine",
                Some(&current),
                Some("412.86.202301010000-0"),
                Want::Refused(
                    "refusing to serve the config of pool worker: this machine's boot image version is 412.86.202301010000-0: \
                     boot image is too old: RHCOS boot image version 412.86.202301010000-0(RHEL version: 8.6) is below the \
                     minimum required RHEL version 9.2",
                ),
            ),
            (
                "old machine: the fix",
                Some(&current),
                Some("4.12.0"),
                Want::Refused("set spec.bootImageSkewEnforcement.mode: None on machineconfiguration/cluster"),
            ),
            // The machine's own version counts, not the cluster's record.
            ("current machine, old record", Some(&old), Some("9.6.20260101-0"), Want::Allowed),
            ("silent machine, current record", Some(&current), None, Want::Allowed),
            (
                "silent machine, old record",
                Some(&old),
                None,
                Want::Refused(
                    "did not send its boot image version (X-MCO-Boot-Image-Version), so the cluster's recorded boot \
                     image was judged: boot image is too old: the cluster is using OCP boot image version 4.12.0, which \
                     is below the minimum required version 4.13.0",
                ),
            ),
            (
                "silent machine, unreadable record",
                Some(&unreadable),
                None,
                Want::Refused("the cluster's recorded boot image cannot be judged: invalid RHCOS version \"9.6\""),
            ),
            (
                "unreadable",
                Some(&current),
                Some("nine"),
                Want::Invalid(
                    "invalid boot image version in the X-MCO-Boot-Image-Version header or the bootImageVersion query: \
                     invalid OCP version \"nine\"",
                ),
            ),
            ("empty", Some(&current), Some(""), Want::Invalid("invalid OCP version \"\"")),
            ("too long", Some(&current), Some(long.as_str()), Want::Invalid("(206 bytes): at most 128 bytes")),
        ];
        for (name, status, version, want) in cases {
            let got = judge("worker", status, version, None);
            let ok = match (&want, &got) {
                (Want::Allowed, Admission::Allowed) => true,
                (Want::Refused(text), Admission::Refused(body)) | (Want::Invalid(text), Admission::Invalid(body)) => {
                    body.contains(text)
                }
                _ => false,
            };
            assert!(ok, "{name}: want {want:?}, got {got:?}");
        }
    }

    #[test]
    fn a_boot_image_of_another_rhel_major_than_the_pools_stream_is_refused_whatever_the_skew_mode() {
        let refused = judge("worker", None, Some("9.6.20260101-0"), Some("rhel-10"));
        assert_eq!(
            refused,
            Admission::Refused(
                "refusing to serve the config of pool worker: this machine's boot image version is 9.6.20260101-0: boot \
                 image is of another RHEL major: RHCOS boot image version 9.6.20260101-0(RHEL version: 9.6) cannot \
                 pivot to the pool's OS stream rhel-10 (RHEL 10); RHEL major versions are not cross-compatible.\n\
                 Boot machines of this pool from a boot image of the rhel-10 stream, or move the pool to a stream of \
                 this boot image's RHEL major (spec.osImageStream.name).\n"
                    .into()
            )
        );
        assert_eq!(judge("worker", None, Some("10.1.20261101-0"), Some("rhel-10")), Admission::Allowed);
        assert_eq!(judge("worker", None, Some("9.6.20260101-0"), Some("rhel-9")), Admission::Allowed);
        // A machine that says nothing is judged by the skew status only.
        assert_eq!(judge("worker", None, None, Some("rhel-10")), Admission::Allowed);
        assert!(matches!(judge("worker", None, Some("9.x"), Some("rhel-10")), Admission::Invalid(_)));
    }

    #[test]
    fn events_are_limited_per_pool_and_version() {
        let start = Instant::now();
        let minute = Duration::from_secs(60);
        let mut limiter = EventLimiter::new(10 * minute, 3);
        assert!(limiter.allow("worker", "4.1.0", start));
        assert!(!limiter.allow("worker", "4.1.0", start + minute), "the same refusal again within 10 minutes");
        assert!(limiter.allow("worker", "4.2.0", start + minute), "another version");
        assert!(limiter.allow("infra", "4.1.0", start + minute), "another pool");
        assert!(!limiter.allow("infra", "", start + minute), "full: not recorded");
        assert!(limiter.allow("worker", "4.1.0", start + 10 * minute), "10 minutes later");
        assert!(limiter.allow("infra", "", start + 11 * minute), "the old ones were forgotten");
    }
}
