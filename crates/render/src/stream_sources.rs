//! Where the OSImageStream's streams come from (upstream `pkg/osimagestream`): OS and extensions
//! images found in the cluster's sources, classified by their labels and paired by stream name.
//!
//! The sources, in upstream's order (a later one replaces an earlier one's stream of the same
//! name): the ControllerConfig's base images, the ConfigMap `machine-config-osimageurl`, and the
//! release's `image-references` (an ImageStream; mco has no release payload to read it from, so
//! it is given as the key `image-references` of the ConfigMap `release-image-references`).

use std::collections::BTreeMap;

use mco_api::machineconfiguration::OSImageStreamSet;
use mco_api::{OSImageStream, constants::OS_IMAGE_STREAM_NAME};
use serde::Deserialize;

/// The image label naming an OS image's stream.
pub const STREAM_CLASS_LABEL: &str = "io.openshift.os.streamclass";
/// The label of a bootable OS image (bootc's).
pub const BOOTC_LABEL: &str = "containers.bootc";
/// The label of an extensions image.
pub const EXTENSIONS_LABEL: &str = "io.openshift.os.extensions";

/// What an image is to a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Os,
    Extensions,
}

/// The stream and kind of an image from its labels (upstream `GetImageData`): none without a
/// stream class, or when it is neither bootable nor an extensions image.
pub fn classify(labels: &BTreeMap<String, String>) -> Option<(&str, ImageKind)> {
    let stream = labels.get(STREAM_CLASS_LABEL).map(String::as_str).filter(|s| !s.is_empty())?;
    let is =
        |key: &str, values: &[&str]| labels.get(key).is_some_and(|v| values.iter().any(|w| v.eq_ignore_ascii_case(w)));
    if is(BOOTC_LABEL, &["true", "1"]) {
        Some((stream, ImageKind::Os))
    } else if is(EXTENSIONS_LABEL, &["true"]) {
        Some((stream, ImageKind::Extensions))
    } else {
        None
    }
}

/// The streams of one source's images (`(pull spec, labels)`), paired by stream name: the last
/// image of a kind wins, a stream without both kinds is dropped (upstream
/// `GroupOSContainerImageMetadataToStream`).
pub fn group(images: &[(String, BTreeMap<String, String>)]) -> Vec<OSImageStreamSet> {
    let mut found: BTreeMap<&str, (Option<&str>, Option<&str>)> = BTreeMap::new();
    for (image, labels) in images {
        let Some((stream, kind)) = classify(labels) else { continue };
        let entry = found.entry(stream).or_default();
        match kind {
            ImageKind::Os => entry.0 = Some(image),
            ImageKind::Extensions => entry.1 = Some(image),
        }
    }
    found
        .into_iter()
        .filter_map(|(name, pair)| match pair {
            (Some(os), Some(extensions)) => Some(OSImageStreamSet {
                name: name.to_string(),
                os_image: os.to_string(),
                os_extensions_image: extensions.to_string(),
            }),
            _ => None,
        })
        .collect()
}

/// The streams of every source, a later source's replacing an earlier one's of the same name,
/// sorted by name.
pub fn merge_sources(sources: impl IntoIterator<Item = Vec<OSImageStreamSet>>) -> Vec<OSImageStreamSet> {
    let mut merged = BTreeMap::new();
    for set in sources.into_iter().flatten() {
        merged.insert(set.name.clone(), set);
    }
    merged.into_values().collect()
}

#[derive(Deserialize)]
struct ImageStream {
    #[serde(default)]
    spec: ImageStreamSpec,
}

#[derive(Deserialize, Default)]
struct ImageStreamSpec {
    #[serde(default)]
    tags: Vec<TagReference>,
}

#[derive(Deserialize)]
struct TagReference {
    name: String,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    from: Option<ObjectReference>,
}

#[derive(Deserialize)]
struct ObjectReference {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
}

/// Whether a release tag names an OS or extensions image (upstream's tag filter).
fn os_tag(tag: &TagReference) -> bool {
    let from_os_repository = tag
        .annotations
        .get("io.openshift.build.source-location")
        .is_some_and(|location| location.contains("github.com/openshift/os"));
    from_os_repository || os_tag_name(&tag.name)
}

/// `^(rhel|stream)[a-zA-Z0-9.-]*-coreos[a-zA-Z0-9.-]*(-extensions[a-zA-Z0-9.-]*)?$`: the
/// optional suffix adds nothing the middle part does not match already.
fn os_tag_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("rhel").or_else(|| name.strip_prefix("stream")) else { return false };
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '-';
    rest.chars().all(allowed) && rest.contains("-coreos")
}

/// The OS and extensions images a release's `image-references` (an ImageStream document) names.
pub fn release_os_images(image_references: &str) -> Result<Vec<String>, String> {
    let stream: ImageStream =
        serde_yaml::from_str(image_references).map_err(|e| format!("reading the release's image-references: {e}"))?;
    Ok(stream
        .spec
        .tags
        .iter()
        .filter(|tag| os_tag(tag))
        .filter_map(|tag| tag.from.as_ref().filter(|from| from.kind == "DockerImage").map(|from| from.name.clone()))
        .collect())
}

/// The stream of a release version when nothing else says (upstream `GetBuiltinDefaultStreamName`):
/// `rhel-9` for 4.x, `rhel-10` after.
pub fn builtin_default_stream(release_version: &str) -> Result<&'static str, String> {
    let major = release_version.split('.').next().and_then(|m| m.parse::<u64>().ok());
    match major {
        Some(4) => Ok("rhel-9"),
        Some(_) => Ok("rhel-10"),
        None => Err(format!(
            "unable to parse the build release version {release_version:?} as a version: no numeric major version"
        )),
    }
}

/// The default stream (upstream `getDefaultStreamSet`): the admin's (`spec.defaultStream`), else
/// the one in use (`status.defaultStream`), else the only stream, else `builtin`; it must be one
/// of `streams`.
pub fn default_stream(
    existing: Option<&OSImageStream>,
    streams: &[OSImageStreamSet],
    builtin: impl FnOnce() -> Result<&'static str, String>,
) -> Result<String, String> {
    let spec = existing.map(|s| s.spec.default_stream.as_str()).filter(|s| !s.is_empty());
    let status = existing.and_then(|s| s.status.as_ref()).map(|s| s.default_stream.as_str()).filter(|s| !s.is_empty());
    let requested = match (spec.or(status), streams) {
        (Some(requested), _) => requested.to_string(),
        (None, [only]) => only.name.clone(),
        (None, _) => builtin()?.to_string(),
    };
    if streams.iter().any(|s| s.name == requested) {
        Ok(requested)
    } else {
        let names: Vec<&str> = streams.iter().map(|s| s.name.as_str()).collect();
        Err(format!(
            "could not find default OSImageStream in the available streams: could not find the requested {requested} \
             default stream in the list of OSImageStreams [{}]",
            names.join(" ")
        ))
    }
}

/// The OSImageStream `cluster` to have, with `streams` and the default stream, keeping the
/// admin's `spec.defaultStream` of `existing`; `annotations` are the controller's.
pub fn desired(
    existing: Option<&OSImageStream>,
    streams: Vec<OSImageStreamSet>,
    default: String,
    annotations: BTreeMap<String, String>,
) -> OSImageStream {
    let spec_default = existing.map(|s| s.spec.default_stream.clone()).filter(|s| !s.is_empty());
    let mut stream = OSImageStream::new(
        OS_IMAGE_STREAM_NAME,
        mco_api::machineconfiguration::OSImageStreamSpec { default_stream: spec_default.unwrap_or(default.clone()) },
    );
    let mut merged = existing.and_then(|s| s.metadata.annotations.clone()).unwrap_or_default();
    merged.extend(annotations);
    stream.metadata.annotations = Some(merged);
    stream.status = Some(mco_api::machineconfiguration::OSImageStreamStatus {
        available_streams: streams,
        default_stream: default,
    });
    stream
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn os(stream: &str) -> BTreeMap<String, String> {
        labels(&[(STREAM_CLASS_LABEL, stream), (BOOTC_LABEL, "1")])
    }

    fn ext(stream: &str) -> BTreeMap<String, String> {
        labels(&[(STREAM_CLASS_LABEL, stream), (EXTENSIONS_LABEL, "true")])
    }

    fn set(name: &str, os: &str, ext: &str) -> OSImageStreamSet {
        OSImageStreamSet { name: name.into(), os_image: os.into(), os_extensions_image: ext.into() }
    }

    #[test]
    fn images_are_classified_by_their_labels() {
        for (given, want) in [
            (os("rhel-9"), Some(("rhel-9", ImageKind::Os))),
            (labels(&[(STREAM_CLASS_LABEL, "rhel-10"), (BOOTC_LABEL, "TRUE")]), Some(("rhel-10", ImageKind::Os))),
            (ext("rhel-9"), Some(("rhel-9", ImageKind::Extensions))),
            // Bootable wins over extensions.
            (
                labels(&[(STREAM_CLASS_LABEL, "x"), (BOOTC_LABEL, "true"), (EXTENSIONS_LABEL, "true")]),
                Some(("x", ImageKind::Os)),
            ),
            (labels(&[(BOOTC_LABEL, "1")]), None),
            (labels(&[(STREAM_CLASS_LABEL, ""), (BOOTC_LABEL, "1")]), None),
            (labels(&[(STREAM_CLASS_LABEL, "rhel-9"), (BOOTC_LABEL, "0")]), None),
            (labels(&[(STREAM_CLASS_LABEL, "rhel-9"), (EXTENSIONS_LABEL, "1")]), None),
        ] {
            assert_eq!(classify(&given), want, "{given:?}");
        }
    }

    #[test]
    fn a_sources_images_pair_into_streams_and_later_sources_win() {
        let images = vec![
            ("r/os-9a".to_string(), os("rhel-9")),
            ("r/ext-9".to_string(), ext("rhel-9")),
            ("r/os-9b".to_string(), os("rhel-9")),
            ("r/os-10".to_string(), os("rhel-10")),
            ("r/unlabelled".to_string(), BTreeMap::new()),
        ];
        assert_eq!(group(&images), [set("rhel-9", "r/os-9b", "r/ext-9")], "rhel-10 has no extensions image");
        let merged = merge_sources([
            vec![set("rhel-9", "cc/os", "cc/ext")],
            vec![set("rhel-9", "release/os-9", "release/ext-9"), set("rhel-10", "release/os-10", "release/ext-10")],
        ]);
        assert_eq!(
            merged,
            [set("rhel-10", "release/os-10", "release/ext-10"), set("rhel-9", "release/os-9", "release/ext-9")]
        );
    }

    #[test]
    fn the_release_names_its_os_images_by_tag() {
        let references = r#"
kind: ImageStream
apiVersion: image.openshift.io/v1
spec:
  tags:
  - name: rhel-coreos
    from: {kind: DockerImage, name: "quay.io/r@sha256:1"}
  - name: rhel-coreos-extensions
    from: {kind: DockerImage, name: "quay.io/r@sha256:2"}
  - name: rhel-coreos-10
    from: {kind: DockerImage, name: "quay.io/r@sha256:3"}
  - name: stream-coreos-9
    from: {kind: DockerImage, name: "quay.io/r@sha256:4"}
  - name: machine-os-images
    annotations: {io.openshift.build.source-location: "https://github.com/openshift/os"}
    from: {kind: DockerImage, name: "quay.io/r@sha256:5"}
  - name: machine-config-operator
    from: {kind: DockerImage, name: "quay.io/r@sha256:6"}
  - name: rhel-coreos-tagged
    from: {kind: ImageStreamTag, name: "other:latest"}
  - name: rhelcoreos
    from: {kind: DockerImage, name: "quay.io/r@sha256:7"}
  - name: rhel-coreos_9
    from: {kind: DockerImage, name: "quay.io/r@sha256:8"}
"#;
        let images = release_os_images(references).unwrap();
        assert_eq!(
            images,
            [
                "quay.io/r@sha256:1",
                "quay.io/r@sha256:2",
                "quay.io/r@sha256:3",
                "quay.io/r@sha256:4",
                "quay.io/r@sha256:5"
            ]
        );
        let bad = release_os_images("spec: [").unwrap_err();
        assert!(bad.starts_with("reading the release's image-references: "), "{bad}");
    }

    #[test]
    fn the_default_stream_is_the_admins_then_the_one_in_use_then_the_only_then_the_releases() {
        let streams = [set("rhel-10", "a", "b"), set("rhel-9", "c", "d")];
        let existing = |spec: &str, status: Option<&str>| {
            let mut s = OSImageStream::new(
                "cluster",
                mco_api::machineconfiguration::OSImageStreamSpec { default_stream: spec.into() },
            );
            s.status = status.map(|d| mco_api::machineconfiguration::OSImageStreamStatus {
                available_streams: vec![],
                default_stream: d.into(),
            });
            s
        };
        let four = || builtin_default_stream("4.22.0");
        assert_eq!(default_stream(Some(&existing("rhel-10", Some("rhel-9"))), &streams, four).unwrap(), "rhel-10");
        assert_eq!(default_stream(Some(&existing("", Some("rhel-10"))), &streams, four).unwrap(), "rhel-10");
        assert_eq!(default_stream(None, &streams, four).unwrap(), "rhel-9");
        assert_eq!(default_stream(None, &streams, || builtin_default_stream("5.0.0")).unwrap(), "rhel-10");
        assert_eq!(
            default_stream(None, &streams[..1], || builtin_default_stream("x")).unwrap(),
            "rhel-10",
            "the only one"
        );
        assert_eq!(
            default_stream(Some(&existing("centos-10", None)), &streams, four).unwrap_err(),
            "could not find default OSImageStream in the available streams: could not find the requested centos-10 \
             default stream in the list of OSImageStreams [rhel-10 rhel-9]"
        );
        assert_eq!(
            default_stream(None, &streams, || builtin_default_stream("latest")).unwrap_err(),
            "unable to parse the build release version \"latest\" as a version: no numeric major version"
        );
    }

    #[test]
    fn the_desired_object_keeps_the_admins_default_and_other_annotations() {
        let mut existing = OSImageStream::new(
            "cluster",
            mco_api::machineconfiguration::OSImageStreamSpec { default_stream: "rhel-10".into() },
        );
        existing.metadata.annotations = Some(labels(&[("note", "kept"), ("v", "old")]));
        let streams = vec![set("rhel-10", "a", "b")];
        let built = desired(Some(&existing), streams.clone(), "rhel-10".into(), labels(&[("v", "new")]));
        assert_eq!(built.spec.default_stream, "rhel-10");
        assert_eq!(built.metadata.annotations, Some(labels(&[("note", "kept"), ("v", "new")])));
        let status = built.status.unwrap();
        assert_eq!((status.available_streams, status.default_stream.as_str()), (streams.clone(), "rhel-10"));
        let fresh = desired(None, streams, "rhel-10".into(), BTreeMap::new());
        assert_eq!((fresh.metadata.name.as_deref(), fresh.spec.default_stream.as_str()), (Some("cluster"), "rhel-10"));
    }
}
