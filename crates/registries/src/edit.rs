//! Editing a registries.conf for the image configuration, as openshift/runtime-utils
//! `registries.EditRegistriesConfig` does: digest and tag mirror sets merged per source, then
//! blocked and insecure scopes, each spread to the registries nested in it, then mirrors copied to
//! nested registries that have none.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use mco_api::image_config::mirror_source_policy::NEVER_CONTACT_SOURCE;

use crate::MirrorRules;
use crate::conf::{Endpoint, MIRROR_BY_DIGEST_ONLY, MIRROR_BY_TAG_ONLY, RegistriesConf, Registry};
use crate::error::RegistriesError;
use crate::scope::scope_is_nested_inside_scope;

/// One source and its mirrors, as the mirror objects give them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MirrorSet<'a> {
    pub source: &'a str,
    pub mirrors: Vec<&'a str>,
    /// `mirrorSourcePolicy` as written ("" when unset).
    pub policy: &'a str,
}

impl MirrorRules<'_> {
    /// The digest mirror sets: ImageDigestMirrorSets, then ImageContentSourcePolicies (whose
    /// sources are always contacted).
    pub(crate) fn digest_sets(&self) -> Vec<MirrorSet<'_>> {
        let idms =
            self.image_digest_mirror_sets.iter().flat_map(|o| &o.spec.image_digest_mirrors).map(|set| MirrorSet {
                source: &set.source,
                mirrors: set.mirrors.iter().flatten().map(String::as_str).collect(),
                policy: set.mirror_source_policy.as_deref().unwrap_or_default(),
            });
        let icsp =
            self.image_content_source_policies.iter().flat_map(|o| &o.spec.repository_digest_mirrors).map(|set| {
                MirrorSet { source: &set.source, mirrors: set.mirrors.iter().map(String::as_str).collect(), policy: "" }
            });
        idms.chain(icsp).collect()
    }

    /// The tag mirror sets.
    pub(crate) fn tag_sets(&self) -> Vec<MirrorSet<'_>> {
        self.image_tag_mirror_sets
            .iter()
            .flat_map(|o| &o.spec.image_tag_mirrors)
            .map(|set| MirrorSet {
                source: &set.source,
                mirrors: set.mirrors.iter().flatten().map(String::as_str).collect(),
                policy: set.mirror_source_policy.as_deref().unwrap_or_default(),
            })
            .collect()
    }
}

/// A source's mirrors merged from all its sets, and whether it is never contacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergedMirrors {
    pub source: String,
    pub mirrors: Vec<String>,
    pub never_contact_source: bool,
}

/// `mergedMirrorSets`: one entry per source, in source order. A set whose mirrors are only its
/// source is no mirror set (and its policy is ignored).
pub(crate) fn merge_mirror_sets(sets: &[MirrorSet]) -> Vec<MergedMirrors> {
    let mut by_source: BTreeMap<&str, (Vec<&[&str]>, bool)> = BTreeMap::new();
    for set in sets {
        if !set.mirrors.iter().any(|m| *m != set.source) {
            continue;
        }
        let entry = by_source.entry(set.source).or_default();
        entry.0.push(&set.mirrors);
        entry.1 |= set.policy == NEVER_CONTACT_SOURCE;
    }
    by_source
        .into_iter()
        .map(|(source, (lists, never_contact_source))| MergedMirrors {
            source: source.to_string(),
            mirrors: merged_order(source, &lists),
            never_contact_source,
        })
        .collect()
}

/// `mergedMirrors`: the mirror lists of one source as one list that keeps every list's order
/// where the lists agree, the source implicitly last of each list that does not name it; the
/// source is dropped when it ends up last (it is tried last anyway).
fn merged_order(source: &str, lists: &[&[&str]]) -> Vec<String> {
    let mut graph = TopoGraph::default();
    for mirrors in lists {
        for pair in mirrors.windows(2) {
            graph.add_edge(pair[0], pair[1]);
        }
        if !mirrors.contains(&source) {
            graph.add_edge(mirrors[mirrors.len() - 1], source);
        }
    }
    let mut sorted = graph.sorted();
    if sorted.last().is_some_and(|last| last == source) {
        sorted.pop();
    }
    sorted
}

/// runtime-utils' `topoGraph`: a topological sort that is deterministic (ties in name order) and
/// breaks cycles by taking the first unused node in name order.
#[derive(Default)]
struct TopoGraph<'a> {
    /// Successors of each node.
    outs: BTreeMap<&'a str, BTreeSet<&'a str>>,
    /// Unprocessed predecessors of each node.
    ins: BTreeMap<&'a str, BTreeSet<&'a str>>,
}

impl<'a> TopoGraph<'a> {
    fn add_edge(&mut self, from: &'a str, to: &'a str) {
        self.ins.entry(from).or_default();
        self.outs.entry(to).or_default();
        self.outs.entry(from).or_default().insert(to);
        self.ins.entry(to).or_default().insert(from);
    }

    fn sorted(mut self) -> Vec<String> {
        let all: Vec<&str> = self.outs.keys().copied().collect();
        let mut used = BTreeSet::new();
        let mut ready: VecDeque<&str> = all.iter().copied().filter(|n| self.ins[n].is_empty()).collect();
        let mut next_in_order = 0;
        let mut result = Vec::new();
        while !ready.is_empty() || next_in_order < all.len() {
            let node = match ready.pop_front() {
                Some(node) => node,
                None => {
                    // Only cycles are left: break one.
                    let node = all[next_in_order];
                    next_in_order += 1;
                    if used.contains(node) {
                        continue;
                    }
                    node
                }
            };
            used.insert(node);
            result.push(node.to_string());
            // Successors are in name order already (BTreeSet), as the original sorts each batch.
            for out in self.outs[node].clone() {
                let ins = self.ins.get_mut(out).expect("every node has an entry");
                ins.remove(node);
                if ins.is_empty() && !used.contains(out) {
                    ready.push_back(out);
                }
            }
        }
        result
    }
}

/// Adds the mirror rules and the insecure and blocked scopes to `conf`, in place.
pub(crate) fn edit_registries_conf(
    conf: &mut RegistriesConf,
    insecure: &[String],
    blocked: &[String],
    digest_sets: &[MirrorSet],
    tag_sets: &[MirrorSet],
) -> Result<(), RegistriesError> {
    // Go's list stays nil unless an entry is added.
    let was_nil = conf.registries.is_none();
    let mut owned = conf.registries.take().unwrap_or_default();
    let registries = &mut owned;
    let result = edit_registries(registries, insecure, blocked, digest_sets, tag_sets);
    conf.registries = (!(was_nil && owned.is_empty())).then_some(owned);
    result
}

fn edit_registries(
    registries: &mut Vec<Registry>,
    insecure: &[String],
    blocked: &[String],
    digest_sets: &[MirrorSet],
    tag_sets: &[MirrorSet],
) -> Result<(), RegistriesError> {
    let digest = merge_mirror_sets(digest_sets);
    let tag = merge_mirror_sets(tag_sets);
    for (sets, pull_from_mirror) in [(&digest, MIRROR_BY_DIGEST_ONLY), (&tag, MIRROR_BY_TAG_ONLY)] {
        for set in sets {
            let registry = entry(registries, &set.source);
            if set.never_contact_source {
                registry.blocked = true;
            }
            let mirrors = registry.mirrors.get_or_insert_with(Vec::new);
            mirrors.extend(set.mirrors.iter().map(|location| Endpoint {
                location: location.clone(),
                insecure: false,
                pull_from_mirror: pull_from_mirror.to_string(),
            }));
        }
    }
    // Blocked scopes get entries before the insecure ones spread, so that a blocked scope nested
    // in an insecure one (`*.b.example.com` in `*.example.com`) is both.
    for scope in blocked {
        entry(registries, scope);
    }
    for scope in insecure {
        entry(registries, scope).endpoint.insecure = true;
        for registry in registries.iter_mut() {
            if scope_is_nested_inside_scope(registry.scope(), scope) {
                registry.endpoint.insecure = true;
            }
            for mirror in registry.mirrors.iter_mut().flatten() {
                if scope_is_nested_inside_scope(&mirror.location, scope) {
                    mirror.insecure = true;
                }
            }
        }
    }
    for scope in blocked {
        entry(registries, scope).blocked = true;
        for registry in registries.iter_mut() {
            if scope_is_nested_inside_scope(registry.scope(), scope) {
                registry.blocked = true;
            }
        }
    }
    // Only the most precise registry entry applies to a reference, so a nested entry without
    // mirrors (made for an insecure or blocked scope) gets its parent's mirrors, adjusted.
    for set in digest.iter().chain(&tag) {
        let parent = entry(registries, &set.source).clone();
        let parent_scope = parent.scope();
        for registry in registries.iter_mut() {
            let scope = registry.scope().to_string();
            if scope != parent_scope
                && scope_is_nested_inside_scope(&scope, parent_scope)
                && registry.mirrors().is_empty()
            {
                registry.mirrors = Some(mirrors_for_nested_scope(parent_scope, &scope, parent.mirrors())?);
            }
        }
    }
    Ok(())
}

/// `getRegistryEntry`: the entry whose scope is `scope`, added (wildcards as `prefix`, others as
/// `location`) when there is none.
fn entry<'r>(registries: &'r mut Vec<Registry>, scope: &str) -> &'r mut Registry {
    if let Some(index) = registries.iter().position(|r| r.scope() == scope) {
        return &mut registries[index];
    }
    let mut registry = Registry::default();
    if scope.starts_with("*.") {
        registry.prefix = scope.to_string();
    } else {
        registry.endpoint.location = scope.to_string();
    }
    registries.push(registry);
    registries.last_mut().expect("just pushed")
}

/// `mirrorsAdjustedForNestedScope`: `mirrors` of `parent` with the path `nested` adds to it.
fn mirrors_for_nested_scope(
    parent: &str,
    nested: &str,
    mirrors: &[Endpoint],
) -> Result<Vec<Endpoint>, RegistriesError> {
    if parent.starts_with("*.") {
        return Err(RegistriesError::NestedUnderWildcardSource(parent.to_string()));
    }
    let adjustment = &nested[parent.len()..];
    Ok(mirrors.iter().map(|m| Endpoint { location: format!("{}{adjustment}", m.location), ..m.clone() }).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set<'a>(source: &'a str, mirrors: &[&'a str], policy: &'a str) -> MirrorSet<'a> {
        MirrorSet { source, mirrors: mirrors.to_vec(), policy }
    }

    #[test]
    fn mirror_lists_merge_in_preference_order() {
        // (sets of one source, merged mirrors)
        let cases: Vec<(Vec<Vec<&str>>, Vec<&str>)> = vec![
            (vec![vec!["b", "c"], vec!["a", "b"]], vec!["a", "b", "c"]),
            // Lists with nothing in common: name order.
            (vec![vec!["z"], vec!["a"]], vec!["a", "z"]),
            // A cycle is broken at the first node in name order (here the source itself).
            (vec![vec!["y", "x"], vec!["x", "y"]], vec!["s", "x", "y"]),
            // The source named first stays first; named last it is dropped.
            (vec![vec!["s", "f"]], vec!["s", "f"]),
            (vec![vec!["m", "s"]], vec!["m"]),
            (vec![vec!["m1", "s", "m2"]], vec!["m1", "s", "m2"]),
        ];
        for (lists, want) in cases {
            let sets: Vec<MirrorSet> = lists.iter().map(|l| set("s", l, "")).collect();
            let merged = merge_mirror_sets(&sets);
            assert_eq!(merged[0].mirrors, want, "{lists:?}");
        }
    }

    #[test]
    fn a_set_of_only_its_source_is_ignored_with_its_policy() {
        let merged = merge_mirror_sets(&[set("s", &["s"], NEVER_CONTACT_SOURCE), set("t", &[], "")]);
        assert!(merged.is_empty());
        let merged = merge_mirror_sets(&[set("s", &["m"], ""), set("s", &["n"], NEVER_CONTACT_SOURCE)]);
        assert!(merged[0].never_contact_source);
    }

    fn edit(insecure: &[&str], blocked: &[&str], digest: &[MirrorSet], tag: &[MirrorSet]) -> RegistriesConf {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut conf = RegistriesConf::default();
        edit_registries_conf(&mut conf, &strings(insecure), &strings(blocked), digest, tag).unwrap();
        conf
    }

    #[test]
    fn flags_spread_to_nested_scopes() {
        let conf = edit(&["q.io/ns", "m.io"], &["q.io/ns/blocked"], &[set("q.io/ns/app", &["m.io/app"], "")], &[]);
        let registries = conf.registries.unwrap();
        let by_scope = |s: &str| registries.iter().find(|r| r.scope() == s).unwrap().clone();
        assert!(by_scope("q.io/ns/app").endpoint.insecure);
        assert!(by_scope("q.io/ns/app").mirrors()[0].insecure);
        assert!(by_scope("q.io/ns/blocked").blocked && by_scope("q.io/ns/blocked").endpoint.insecure);
        assert!(!by_scope("q.io/ns").blocked);
    }

    #[test]
    fn nested_registries_get_adjusted_mirrors() {
        let conf = edit(&[], &["q.io/p/child"], &[set("q.io/p", &["m.io/p"], "")], &[set("q.io/p", &["t.io/p"], "")]);
        let child = conf.registries.unwrap().into_iter().find(|r| r.scope() == "q.io/p/child").unwrap();
        let locations: Vec<_> =
            child.mirrors().iter().map(|m| (m.location.as_str(), m.pull_from_mirror.as_str())).collect();
        assert_eq!(locations, [("m.io/p/child", "digest-only"), ("t.io/p/child", "tag-only")]);
    }

    #[test]
    fn a_wildcard_source_cannot_lend_its_mirrors() {
        let mut conf = RegistriesConf::default();
        let err = edit_registries_conf(&mut conf, &[], &["a.w.io".into()], &[set("*.w.io", &["m.io"], "")], &[]);
        assert_eq!(err, Err(RegistriesError::NestedUnderWildcardSource("*.w.io".into())));
    }
}
