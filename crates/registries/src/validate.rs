//! The original's checks of scopes and mirror rules before it edits registries.conf
//! (`validateRegistriesConfScopes`), first failure wins in the original's order: insecure,
//! blocked, allowed scopes, then the digest mirror sets (ImageDigestMirrorSets, then
//! ImageContentSourcePolicies), then the tag mirror sets.

use std::collections::HashMap;

use mco_api::image_config::mirror_source_policy::{ALLOW_CONTACTING_SOURCE, NEVER_CONTACT_SOURCE};

use crate::edit::MirrorSet;
use crate::error::{RegistriesError, ScopeList};
use crate::scope::{is_valid_mirror, is_valid_registries_conf_scope, is_valid_source};

/// Checks the scope lists and the mirror sets.
pub(crate) fn validate_scopes_and_mirrors(
    insecure: &[String],
    blocked: &[String],
    allowed: &[String],
    digest_sets: &[MirrorSet],
    tag_sets: &[MirrorSet],
) -> Result<(), RegistriesError> {
    for (list, scopes) in
        [(ScopeList::Insecure, insecure), (ScopeList::Blocked, blocked), (ScopeList::Allowed, allowed)]
    {
        if let Some(scope) = scopes.iter().find(|s| !is_valid_registries_conf_scope(s)) {
            return Err(RegistriesError::InvalidScope { list, scope: scope.clone() });
        }
    }
    // One policy per source across all sets; unset means AllowContactingSource.
    let mut policies: HashMap<&str, &str> = HashMap::new();
    for set in digest_sets.iter().chain(tag_sets) {
        if !is_valid_source(set.source) {
            return Err(RegistriesError::InvalidSource(set.source.to_string()));
        }
        let policy = if set.policy.is_empty() { ALLOW_CONTACTING_SOURCE } else { set.policy };
        if *policies.entry(set.source).or_insert(policy) != policy {
            return Err(RegistriesError::ConflictingSourcePolicy(set.source.to_string()));
        }
        for mirror in &set.mirrors {
            if !is_valid_mirror(mirror) {
                return Err(RegistriesError::InvalidMirror(mirror.to_string()));
            }
            if policy == NEVER_CONTACT_SOURCE && *mirror == set.source {
                return Err(RegistriesError::SourceIsItsOwnMirror(set.source.to_string()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set<'a>(source: &'a str, mirrors: &[&'a str], policy: &'a str) -> MirrorSet<'a> {
        MirrorSet { source, mirrors: mirrors.to_vec(), policy }
    }

    #[test]
    fn rules_and_their_order() {
        let never = NEVER_CONTACT_SOURCE;
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // (insecure, blocked, digest sets, tag sets, result)
        type Case<'a> = (Vec<String>, Vec<String>, Vec<MirrorSet<'a>>, Vec<MirrorSet<'a>>, Result<(), RegistriesError>);
        let cases: Vec<Case> = vec![
            (s(&["*.a.io"]), s(&["b.io/ns"]), vec![set("q.io/x", &["m.io/x"], "")], vec![], Ok(())),
            (
                s(&["*.a.io/x"]),
                s(&["b*.io"]),
                vec![],
                vec![],
                Err(RegistriesError::InvalidScope { list: ScopeList::Insecure, scope: "*.a.io/x".into() }),
            ),
            (
                s(&[]),
                s(&["b*.io"]),
                vec![set("Q.io/X", &[], "")],
                vec![],
                Err(RegistriesError::InvalidScope { list: ScopeList::Blocked, scope: "b*.io".into() }),
            ),
            (
                s(&[]),
                s(&[]),
                vec![set("q.io/X", &[], "")],
                vec![],
                Err(RegistriesError::InvalidSource("q.io/X".into())),
            ),
            (s(&[]), s(&[]), vec![set("*.q.io", &["m.io"], "")], vec![], Ok(())),
            (
                s(&[]),
                s(&[]),
                vec![set("q.io", &["*.m.io"], "")],
                vec![],
                Err(RegistriesError::InvalidMirror("*.m.io".into())),
            ),
            // An explicit AllowContactingSource agrees with an unset policy...
            (
                s(&[]),
                s(&[]),
                vec![set("q.io", &["m.io"], "")],
                vec![set("q.io", &["t.io"], ALLOW_CONTACTING_SOURCE)],
                Ok(()),
            ),
            // ... NeverContactSource does not, across digest and tag sets.
            (
                s(&[]),
                s(&[]),
                vec![set("q.io", &["m.io"], "")],
                vec![set("q.io", &["t.io"], never)],
                Err(RegistriesError::ConflictingSourcePolicy("q.io".into())),
            ),
            (
                s(&[]),
                s(&[]),
                vec![set("q.io", &["m.io", "q.io"], never)],
                vec![],
                Err(RegistriesError::SourceIsItsOwnMirror("q.io".into())),
            ),
        ];
        for (insecure, blocked, digest, tag, want) in cases {
            assert_eq!(
                validate_scopes_and_mirrors(&insecure, &blocked, &[], &digest, &tag),
                want,
                "{digest:?} {tag:?}"
            );
        }
    }
}
