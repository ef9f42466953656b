//! Registry scopes (`host[:port][/namespace...]` or `*.domain`) and how they nest, as
//! openshift/runtime-utils `pkg/registries` defines them, and the source/mirror formats the
//! original checks ImageContentSourcePolicies against.

use std::sync::LazyLock;

use regex::Regex;

/// One DNS label: alphanumerics with inner dashes.
const LABEL: &str = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";

/// `host[:port]` followed by lowercase path components (openshift/api's pattern for IDMS/ITMS,
/// which the original repeats for ICSPs since their CRD does not check it).
fn repository_pattern() -> String {
    let path_component = "[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?";
    format!(r"((?:{LABEL})(?:(?:\.(?:{LABEL}))+)?(?::[0-9]+)?)(?:(?:/{path_component})+)?")
}

static SOURCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"^\*(?:\.(?:{LABEL}))+$|^{}$", repository_pattern())).expect("a valid pattern")
});
static MIRROR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^{}$", repository_pattern())).expect("a valid pattern"));

/// Whether `source` is a valid mirror source: a repository scope or `*.domain`.
pub(crate) fn is_valid_source(source: &str) -> bool {
    SOURCE.is_match(source)
}

/// Whether `mirror` is a valid mirror: a repository scope (no wildcard).
pub(crate) fn is_valid_mirror(mirror: &str) -> bool {
    MIRROR.is_match(mirror)
}

/// `IsValidRegistriesConfScope`: non-empty, and a wildcard only as a leading `*.` of a bare
/// domain (no `/`, `@`, `:` or second `*`). Anything without `*` passes.
pub fn is_valid_registries_conf_scope(scope: &str) -> bool {
    if scope.is_empty() {
        return false;
    }
    if !scope.contains('*') {
        return true;
    }
    scope.strip_prefix("*.").is_some_and(|rest| !rest.contains(['/', '@', ':', '*']))
}

/// `ScopeIsNestedInsideScope`: whether `sub` is `sup`, a namespace or repository under it, or (for
/// a wildcard `sup` such as `*.example.com`) on one of its subdomains.
pub fn scope_is_nested_inside_scope(sub: &str, sup: &str) -> bool {
    if sub == sup {
        return true;
    }
    if sub.len() > sup.len() && sub.starts_with(sup) && sub.as_bytes()[sup.len()] == b'/' {
        return true;
    }
    let Some(domain_suffix) = sup.strip_prefix('*') else { return false };
    if !sup.starts_with("*.") {
        return false;
    }
    // Only the host part may match: `*.foo` must not match `quay/bar.foo` or `quay/bar.foo:400`.
    if sub.contains(':') {
        let host = sub.split(':').next().unwrap_or_default();
        host.ends_with(domain_suffix) && !host.contains('/')
    } else {
        sub.split('/').next().unwrap_or_default().ends_with(domain_suffix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_follows_runtime_utils() {
        let cases = [
            ("quay.io", "quay.io", true),
            ("quay.io/ns/repo", "quay.io", true),
            ("quay.io/ns", "quay.io/ns/repo", false),
            ("quay.io.evil", "quay.io", false),
            ("quay.io:5000", "quay.io", false),
            ("a.example.com", "*.example.com", true),
            ("a.b.example.com/ns", "*.example.com", true),
            ("*.a.example.com", "*.example.com", true),
            ("a.example.com:5000/x", "*.example.com", true),
            ("quay/bar.example.com", "*.example.com", false),
            ("quay/bar.example.com:400", "*.example.com", false),
            ("example.com", "*.example.com", false),
            ("a.example.com", "a.example.com/ns", false),
        ];
        for (sub, sup, want) in cases {
            assert_eq!(scope_is_nested_inside_scope(sub, sup), want, "{sub} in {sup}");
        }
    }

    #[test]
    fn registries_conf_scopes() {
        let cases = [
            ("", false),
            ("quay.io", true),
            ("quay.io/ns:tag@x", true),
            ("*.quay.io", true),
            ("*.quay.io/ns", false),
            ("*.quay.io:5000", false),
            ("*.*.quay.io", false),
            ("*quay.io", false),
            ("quay.*.io", false),
        ];
        for (scope, want) in cases {
            assert_eq!(is_valid_registries_conf_scope(scope), want, "{scope:?}");
        }
    }

    #[test]
    fn sources_and_mirrors() {
        let cases = [
            ("quay.io", true, true),
            ("quay.io:5000/ns/repo", true, true),
            ("registry/ns__x/a-b.c", true, true),
            ("*.example.com", true, false),
            ("*.example.com/ns", false, false),
            ("quay.io/NS", false, false),
            ("quay.io/ns/", false, false),
            ("-quay.io", false, false),
            ("quay.io/ns@sha256:abc", false, false),
        ];
        for (scope, source, mirror) in cases {
            assert_eq!(is_valid_source(scope), source, "source {scope:?}");
            assert_eq!(is_valid_mirror(scope), mirror, "mirror {scope:?}");
        }
    }
}
