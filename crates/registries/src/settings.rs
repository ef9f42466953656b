//! The blocked and allowed lists the original derives from `spec.registrySources` before writing
//! anything (`getValidBlockedAndAllowedRegistries`): the release payload must stay pullable, so a
//! blocked scope containing the payload's repository is dropped unless the payload has a mirror
//! that is not blocked; when it has one, the scope is blocked in registries.conf only and the
//! payload repository is allowed in policy.json (so that CRI-O may resolve it through its mirrors).

use mco_api::image_config::{ImageSpec, RegistrySources};

use crate::MirrorRules;
use crate::conf::RegistriesConf;
use crate::edit::{MirrorSet, edit_registries_conf};
use crate::error::{RegistriesError, SettingsWarning};
use crate::lookup::{LoadedConf, pull_source_names};
use crate::reference::{Named, parse_named};
use crate::scope::scope_is_nested_inside_scope;

/// The blocked and allowed lists, each `None` when Go's slice would be nil (nothing added).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockedAndAllowed {
    /// Blocked in registries.conf.
    pub registries_blocked: Option<Vec<String>>,
    /// Rejected in policy.json.
    pub policy_blocked: Option<Vec<String>>,
    /// Accepted in policy.json (the payload repository first when it was added).
    pub allowed: Option<Vec<String>>,
    /// What the original logs and goes on with.
    pub warning: Option<SettingsWarning>,
}

/// Go's `append` to a slice that may be nil.
fn push(list: &mut Option<Vec<String>>, item: &str) {
    list.get_or_insert_with(Vec::new).push(item.to_string());
}

/// `getValidBlockedAndAllowedRegistries` for the Image config's `spec` and the cluster's release
/// image. Fails only when the release image is no canonical reference; other problems are the
/// returned warning, as the original logs them (when the payload's mirrors cannot be looked up,
/// all three lists are empty).
pub fn blocked_and_allowed(
    spec: &ImageSpec,
    release_image: &str,
    mirrors: &MirrorRules,
) -> Result<BlockedAndAllowed, RegistriesError> {
    let default_sources = RegistrySources::default();
    let sources = spec.registry_sources.as_ref().unwrap_or(&default_sources);
    let payload = parse_named(release_image).ok_or(RegistriesError::ReleaseImage)?;
    let payload_repo = payload.name();
    let mut result = BlockedAndAllowed::default();
    let mut not_blockable = Vec::new();
    // The lookup is the same for every blocked scope: done once, when first needed.
    let mut payload_has_mirror: Option<bool> = None;
    for scope in sources.blocked_registries.iter().flatten() {
        if !scope_is_nested_inside_scope(&payload_repo, scope) {
            push(&mut result.registries_blocked, scope);
            push(&mut result.policy_blocked, scope);
            continue;
        }
        let has_mirror = match payload_has_mirror {
            Some(known) => known,
            None => match payload_has_unblocked_mirror(&payload, sources, mirrors) {
                Ok(found) => *payload_has_mirror.insert(found),
                Err(error) => {
                    return Ok(BlockedAndAllowed {
                        warning: Some(SettingsWarning::MirrorLookup(error)),
                        ..Default::default()
                    });
                }
            },
        };
        if !has_mirror {
            not_blockable.push(scope.clone());
            continue;
        }
        push(&mut result.registries_blocked, scope);
        if payload_repo != *scope {
            push(&mut result.policy_blocked, scope);
        }
        push(&mut result.allowed, &payload_repo);
    }
    if !not_blockable.is_empty() {
        result.warning = Some(SettingsWarning::PayloadBlocked(not_blockable));
    }
    for scope in sources.allowed_registries.iter().flatten() {
        push(&mut result.allowed, scope);
    }
    Ok(result)
}

/// `payloadRepoHasUnblockedMirror`: whether some place the payload is pulled from (by the rules
/// of a registries.conf of the insecure and blocked scopes and the digest mirrors) is outside
/// every blocked scope. Tag mirrors are left out: the payload is pulled by digest.
fn payload_has_unblocked_mirror(
    payload: &Named,
    sources: &RegistrySources,
    mirrors: &MirrorRules,
) -> Result<bool, String> {
    let blocked = sources.blocked_registries.as_deref().unwrap_or_default();
    let digest_sets: Vec<MirrorSet> = mirrors.digest_sets();
    let mut conf = RegistriesConf::default();
    edit_registries_conf(
        &mut conf,
        sources.insecure_registries.as_deref().unwrap_or_default(),
        blocked,
        &digest_sets,
        &[],
    )
    .map_err(|e| e.to_string())?;
    // c/image prefixes this with `loading registries configuration "<temporary file>": `.
    let loaded = LoadedConf::load(&conf)?;
    // A blocked scope contains the payload, so some entry matches it.
    let Some(registry) = loaded.find_registry(&payload.name()) else { return Ok(false) };
    let names = pull_source_names(registry, payload)?;
    Ok(names.iter().any(|name| !blocked.iter().any(|b| scope_is_nested_inside_scope(name, b))))
}

#[cfg(test)]
mod tests {
    use mco_api::image_config::{ImageDigestMirrorSet, ImageDigestMirrorSetSpec, ImageMirrors};

    use super::*;

    const RELEASE: &str = "quay.io/openshift-release-dev/ocp-release@sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn spec(blocked: &[&str], allowed: &[&str]) -> ImageSpec {
        let list = |v: &[&str]| (!v.is_empty()).then(|| v.iter().map(|s| s.to_string()).collect());
        ImageSpec {
            registry_sources: Some(RegistrySources {
                blocked_registries: list(blocked),
                allowed_registries: list(allowed),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn payload_mirror(mirror: &str) -> Vec<ImageDigestMirrorSet> {
        vec![ImageDigestMirrorSet::new(
            "m",
            ImageDigestMirrorSetSpec {
                image_digest_mirrors: vec![ImageMirrors {
                    source: "quay.io/openshift-release-dev/ocp-release".into(),
                    mirrors: Some(vec![mirror.into()]),
                    mirror_source_policy: None,
                }],
            },
        )]
    }

    const PAYLOAD: &str = "quay.io/openshift-release-dev/ocp-release";

    fn strings(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn the_payload_stays_pullable() {
        let with_mirror = payload_mirror("mirror.io/ocp-release");
        let blocked_mirror = payload_mirror("blocked.io/ocp-release");
        let none = MirrorRules::default();
        let mirrored = MirrorRules { image_digest_mirror_sets: &with_mirror, ..Default::default() };
        let mirror_blocked = MirrorRules { image_digest_mirror_sets: &blocked_mirror, ..Default::default() };
        // (blocked, allowed, mirrors, registries blocked, policy blocked, allowed, dropped)
        type Case<'a> = (
            &'a [&'a str],
            &'a [&'a str],
            &'a MirrorRules<'a>,
            Option<Vec<String>>,
            Option<Vec<String>>,
            Option<Vec<String>>,
            Option<Vec<String>>,
        );
        let cases: Vec<Case> = vec![
            (&["a.io"], &[], &none, strings(&["a.io"]), strings(&["a.io"]), None, None),
            (&[], &["a.io"], &none, None, None, strings(&["a.io"]), None),
            (&["quay.io", "a.io"], &[], &none, strings(&["a.io"]), strings(&["a.io"]), None, strings(&["quay.io"])),
            (&["quay.io"], &[], &mirrored, strings(&["quay.io"]), strings(&["quay.io"]), strings(&[PAYLOAD]), None),
            (&[PAYLOAD], &["b.io"], &mirrored, strings(&[PAYLOAD]), None, strings(&[PAYLOAD, "b.io"]), None),
            (
                &["quay.io", "blocked.io"],
                &[],
                &mirror_blocked,
                strings(&["blocked.io"]),
                strings(&["blocked.io"]),
                None,
                strings(&["quay.io"]),
            ),
        ];
        for (blocked, allowed, mirrors, registries_blocked, policy_blocked, want_allowed, dropped) in cases {
            let got = blocked_and_allowed(&spec(blocked, allowed), RELEASE, mirrors).unwrap();
            assert_eq!(got.registries_blocked, registries_blocked, "{blocked:?}");
            assert_eq!(got.policy_blocked, policy_blocked, "{blocked:?}");
            assert_eq!(got.allowed, want_allowed, "{blocked:?}");
            assert_eq!(got.warning, dropped.map(SettingsWarning::PayloadBlocked), "{blocked:?}");
        }
    }

    #[test]
    fn a_failed_mirror_lookup_drops_every_list() {
        // A mirror without a domain: the payload's name on it is not canonical.
        let no_domain = payload_mirror("mirror/ocp-release");
        let mirrors = MirrorRules { image_digest_mirror_sets: &no_domain, ..Default::default() };
        let got = blocked_and_allowed(&spec(&["quay.io"], &["a.io"]), RELEASE, &mirrors).unwrap();
        assert_eq!((got.registries_blocked, got.policy_blocked, got.allowed), (None, None, None));
        assert!(matches!(got.warning, Some(SettingsWarning::MirrorLookup(_))));
        // The lookup only happens for a blocked scope that contains the payload.
        let got = blocked_and_allowed(&spec(&["b.io"], &[]), RELEASE, &mirrors).unwrap();
        assert_eq!(got.registries_blocked, strings(&["b.io"]));
    }

    #[test]
    fn the_release_image_must_be_canonical() {
        let got = blocked_and_allowed(&ImageSpec::default(), "ocp-release:latest", &MirrorRules::default());
        assert_eq!(got, Err(RegistriesError::ReleaseImage));
    }
}
