//! Where containers/image would pull an image from, given a registries.conf: the parts of
//! `sysregistriesv2` (`loadConfigFile`'s checks, `FindRegistry`, `PullSourcesFromReference`) the
//! original uses to decide whether the release payload can still be pulled when its registry is
//! blocked. Errors carry c/image's texts except where noted.

use crate::conf::{Endpoint, MIRROR_BY_DIGEST_ONLY, MIRROR_BY_TAG_ONLY, RegistriesConf, Registry};
use crate::error::go_quote;
use crate::reference::{Named, parse_named};

/// A registries.conf as c/image holds it after loading: every prefix set, locations cleaned, one
/// entry per prefix, sorted by prefix.
pub(crate) struct LoadedConf {
    registries: Vec<Registry>,
}

impl LoadedConf {
    /// `loadConfigFile`'s checks and normalization (`postProcessRegistries` and the wildcard
    /// prefix check) of a config with no search registries or aliases.
    pub fn load(conf: &RegistriesConf) -> Result<Self, String> {
        let mut registries = conf.registries.clone().unwrap_or_default();
        for registry in &mut registries {
            registry.endpoint.location = parse_location(&registry.endpoint.location)?;
            if registry.prefix.is_empty() {
                if registry.endpoint.location.is_empty() {
                    return Err("invalid condition: both location and prefix are unset".into());
                }
                registry.prefix = registry.endpoint.location.clone();
            } else {
                registry.prefix = parse_location(&registry.prefix)?;
                if !registry.prefix.starts_with("*.") && registry.endpoint.location.is_empty() {
                    return Err(
                        "invalid condition: location is unset and prefix is not in the format: *.example.com".into()
                    );
                }
            }
            if !registry.endpoint.pull_from_mirror.is_empty() {
                return Err(format!(
                    "pull-from-mirror must not be set for a non-mirror registry {}",
                    go_quote(&registry.prefix)
                ));
            }
            for mirror in registry.mirrors.iter_mut().flatten() {
                mirror.location = parse_location(&mirror.location)?;
                if mirror.location.is_empty() {
                    return Err("invalid condition: mirror location is unset".into());
                }
            }
        }
        // Entries of one location (or wildcard prefix) must agree on insecure and blocked.
        let key = |r: &Registry| {
            if r.endpoint.location.is_empty() { r.prefix.clone() } else { r.endpoint.location.clone() }
        };
        for registry in &registries {
            for other in registries.iter().filter(|o| key(o) == key(registry)) {
                let conflict = if registry.endpoint.insecure != other.endpoint.insecure {
                    "insecure"
                } else if registry.blocked != other.blocked {
                    "blocked"
                } else {
                    continue;
                };
                return Err(format!(
                    "registry '{}' is defined multiple times with conflicting '{conflict}' setting",
                    registry.endpoint.location
                ));
            }
        }
        // The first entry of a prefix wins; entries are kept sorted by prefix.
        let mut unique: Vec<Registry> = Vec::new();
        for registry in registries {
            if !unique.iter().any(|u| u.prefix == registry.prefix) {
                unique.push(registry);
            }
        }
        unique.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        for registry in &unique {
            if registry.prefix.starts_with("*.") && registry.prefix.contains(['/', '@', ':']) {
                return Err(format!(
                    "Wildcarded prefix should be in the format: *.example.com. Current prefix {} is incorrectly formatted",
                    go_quote(&registry.prefix)
                ));
            }
        }
        Ok(LoadedConf { registries: unique })
    }

    /// `FindRegistry`: the entry with the longest prefix matching `reference`.
    pub fn find_registry(&self, reference: &str) -> Option<&Registry> {
        let mut best: Option<&Registry> = None;
        for registry in &self.registries {
            if ref_matching_prefix(reference, &registry.prefix).is_some()
                && best.is_none_or(|b| registry.prefix.len() > b.prefix.len())
            {
                best = Some(registry);
            }
        }
        best
    }
}

/// `parseLocation`: trailing slashes dropped, URI schemes refused.
fn parse_location(input: &str) -> Result<String, String> {
    let trimmed = input.trim_end_matches('/');
    if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
        return Err(format!("invalid location '{input}': URI schemes are not supported"));
    }
    Ok(trimmed.to_string())
}

/// `refMatchingPrefix`: how much of `reference` the prefix matches, if it matches.
fn ref_matching_prefix(reference: &str, prefix: &str) -> Option<usize> {
    if let Some(domain) = prefix.strip_prefix('*')
        && prefix.starts_with("*.")
    {
        // `*.example.com` matches hosts ending in `.example.com`, before any `/`.
        let index = reference.find(domain)?;
        if reference[..index].contains('/') {
            return None;
        }
        let end = index + domain.len();
        return match reference.as_bytes().get(end) {
            None | Some(b':' | b'/' | b'@') => Some(end),
            Some(_) => None,
        };
    }
    if !reference.starts_with(prefix) {
        return None;
    }
    match reference.as_bytes().get(prefix.len()) {
        None | Some(b':' | b'/' | b'@') => Some(prefix.len()),
        Some(_) => None,
    }
}

/// `PullSourcesFromReference`: the names `reference` is pulled as, mirrors first (those that
/// serve its kind of pull), then the registry itself.
pub(crate) fn pull_source_names(registry: &Registry, reference: &Named) -> Result<Vec<String>, String> {
    let digested = reference.is_digested();
    let mut endpoints: Vec<&Endpoint> = Vec::new();
    if registry.mirror_by_digest_only {
        if digested {
            endpoints.extend(registry.mirrors());
        }
    } else {
        endpoints.extend(registry.mirrors().iter().filter(|m| match m.pull_from_mirror.as_str() {
            MIRROR_BY_DIGEST_ONLY => digested,
            MIRROR_BY_TAG_ONLY => !digested,
            _ => true,
        }));
    }
    endpoints.push(&registry.endpoint);
    endpoints.into_iter().map(|e| rewritten_name(e, reference, &registry.prefix)).collect()
}

/// `rewriteReference`, as a name: the reference with `prefix` replaced by the endpoint's location.
fn rewritten_name(endpoint: &Endpoint, reference: &Named, prefix: &str) -> Result<String, String> {
    let full = reference.to_canonical_string();
    let Some(matched) = ref_matching_prefix(&full, prefix) else {
        return Err(format!("invalid prefix '{prefix}' for reference '{full}'"));
    };
    if endpoint.location.is_empty() {
        if !prefix.starts_with("*.") {
            return Err(format!(
                "invalid prefix '{prefix}' for empty location, should be in the format: *.example.com"
            ));
        }
        return Ok(reference.name());
    }
    let rewritten = format!("{}{}", endpoint.location, &full[matched..]);
    // c/image wraps the reference parser's own message here, which is not reproduced.
    parse_named(&rewritten)
        .map(|r| r.name())
        .ok_or_else(|| format!("rewriting reference: invalid reference {rewritten:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_whole_components() {
        let cases = [
            ("quay.io/a/b@sha256:x", "quay.io", Some(7)),
            ("quay.io/a/b", "quay.io/a", Some(9)),
            ("quay.io/ab", "quay.io/a", None),
            ("quay.io:5000/a", "quay.io", Some(7)),
            ("x.example.com/a", "*.example.com", Some(13)),
            ("example.com/a", "*.example.com", None),
            ("quay.io/x.example.com", "*.example.com", None),
        ];
        for (reference, prefix, want) in cases {
            assert_eq!(ref_matching_prefix(reference, prefix), want, "{reference} / {prefix}");
        }
    }

    #[test]
    fn loading_refuses_what_c_image_refuses() {
        let registry = |location: &str, prefix: &str| Registry {
            prefix: prefix.into(),
            endpoint: Endpoint { location: location.into(), ..Default::default() },
            ..Default::default()
        };
        let load = |registries: Vec<Registry>| {
            LoadedConf::load(&RegistriesConf { registries: Some(registries), ..Default::default() }).map(|_| ())
        };
        assert_eq!(
            load(vec![registry("https://q.io", "")]),
            Err("invalid location 'https://q.io': URI schemes are not supported".into())
        );
        assert_eq!(load(vec![registry("", "")]), Err("invalid condition: both location and prefix are unset".into()));
        assert!(load(vec![registry("", "*.a.io/x")]).unwrap_err().starts_with("Wildcarded prefix"));
        let mut insecure = registry("q.io/", "");
        insecure.endpoint.insecure = true;
        assert_eq!(
            load(vec![insecure, registry("q.io", "")]),
            Err("registry 'q.io' is defined multiple times with conflicting 'insecure' setting".into())
        );
    }

    #[test]
    fn pull_sources_follow_the_kind_of_pull() {
        let mirror = |location: &str, pull: &str| Endpoint {
            location: location.into(),
            pull_from_mirror: pull.into(),
            ..Default::default()
        };
        let registry = Registry {
            endpoint: Endpoint { location: "q.io/ns".into(), ..Default::default() },
            prefix: "q.io/ns".into(),
            mirrors: Some(vec![mirror("d.io/ns", MIRROR_BY_DIGEST_ONLY), mirror("t.io/x", MIRROR_BY_TAG_ONLY)]),
            ..Default::default()
        };
        let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let by_digest = parse_named(&format!("q.io/ns/app@{digest}")).unwrap();
        assert_eq!(pull_source_names(&registry, &by_digest).unwrap(), ["d.io/ns/app", "q.io/ns/app"]);
        let by_tag = parse_named("q.io/ns/app:1").unwrap();
        assert_eq!(pull_source_names(&registry, &by_tag).unwrap(), ["t.io/x/app", "q.io/ns/app"]);
    }
}
