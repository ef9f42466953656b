//! Image references as containers/image `docker/reference.ParseNamed` reads them: only the
//! canonical form (`host[:port]/path[:tag][@digest]`, as it would be written back) is accepted,
//! which is what the original requires of the release image.

use std::sync::LazyLock;

use regex::Regex;

/// The longest name (host and path) a reference may have.
const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// A parsed, canonical image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    domain: String,
    path: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl Named {
    /// `host[:port]/path`, without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// Whether the reference names a digest (c/image's `reference.Canonical`).
    pub fn is_digested(&self) -> bool {
        self.digest.is_some()
    }

    /// The whole reference as c/image writes it back.
    pub fn to_canonical_string(&self) -> String {
        let mut s = self.name();
        if let Some(tag) = &self.tag {
            s.push(':');
            s.push_str(tag);
        }
        if let Some(digest) = &self.digest {
            s.push('@');
            s.push_str(digest);
        }
        s
    }
}

const DOMAIN_COMPONENT: &str = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const NAME_COMPONENT: &str = "[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*";

fn domain_pattern() -> String {
    format!(r"{DOMAIN_COMPONENT}(?:\.{DOMAIN_COMPONENT})*(?::[0-9]+)?")
}

/// `name[:tag][@digest]`, capturing the three.
static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    let name = format!("(?:{}/)?{NAME_COMPONENT}(?:/{NAME_COMPONENT})*", domain_pattern());
    let digest = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}";
    Regex::new(&format!(r"^({name})(?::([\w][\w.-]{{0,127}}))?(?:@({digest}))?$")).expect("a valid pattern")
});

/// A name split into domain and path.
static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("^(?:({})/)?({NAME_COMPONENT}(?:/{NAME_COMPONENT})*)$", domain_pattern()))
        .expect("a valid pattern")
});

static IDENTIFIER: LazyLock<Regex> = LazyLock::new(|| Regex::new("^[a-f0-9]{64}$").expect("a valid pattern"));

/// `reference.ParseNamed`: `s` parsed, or `None` when it is invalid or not canonical (the
/// original only ever reports that as one error, so the reason is not kept).
pub(crate) fn parse_named(s: &str) -> Option<Named> {
    let named = parse_normalized_named(s)?;
    (named.to_canonical_string() == s).then_some(named)
}

/// `reference.ParseNormalizedNamed`: Docker Hub's defaults filled in.
fn parse_normalized_named(s: &str) -> Option<Named> {
    if IDENTIFIER.is_match(s) {
        return None;
    }
    let (domain, remainder) = split_docker_domain(s);
    let remote_name = remainder.split(':').next().unwrap_or_default();
    if remote_name.to_lowercase() != remote_name {
        return None;
    }
    parse(&format!("{domain}/{remainder}"))
}

/// `splitDockerDomain`: the first component is a host only if it has a `.` or `:` or is
/// `localhost`; otherwise the name is on Docker Hub (`library/` for one-component names).
fn split_docker_domain(name: &str) -> (String, String) {
    let (mut domain, mut remainder) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            (first.to_string(), rest.to_string())
        }
        _ => ("docker.io".to_string(), name.to_string()),
    };
    if domain == "index.docker.io" {
        domain = "docker.io".to_string();
    }
    if domain == "docker.io" && !remainder.contains('/') {
        remainder = format!("library/{remainder}");
    }
    (domain, remainder)
}

/// `reference.Parse` of a name that has a domain.
fn parse(s: &str) -> Option<Named> {
    let captures = REFERENCE.captures(s)?;
    let name = captures.get(1)?.as_str();
    if name.len() > NAME_TOTAL_LENGTH_MAX {
        return None;
    }
    let name_parts = NAME.captures(name)?;
    let digest = captures.get(3).map(|d| d.as_str().to_string());
    if let Some(digest) = &digest
        && !is_valid_digest(digest)
    {
        return None;
    }
    Some(Named {
        domain: name_parts.get(1).map(|d| d.as_str().to_string()).unwrap_or_default(),
        path: name_parts.get(2)?.as_str().to_string(),
        tag: captures.get(2).map(|t| t.as_str().to_string()),
        digest,
    })
}

/// go-digest's `Parse`: a known algorithm and lowercase hex of its length.
fn is_valid_digest(digest: &str) -> bool {
    let Some((algorithm, encoded)) = digest.split_once(':') else { return false };
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return false,
    };
    encoded.len() == length && encoded.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn only_canonical_references_parse() {
        let with_digest = format!("quay.io/openshift/release@{DIGEST}");
        let cases: Vec<(String, Option<&str>)> = vec![
            (with_digest.clone(), Some("quay.io/openshift/release")),
            ("quay.io:443/a/b/c:4.20".into(), Some("quay.io:443/a/b/c")),
            ("localhost/release:1".into(), Some("localhost/release")),
            (format!("quay.io/a:tag@{DIGEST}"), Some("quay.io/a")),
            ("docker.io/library/busybox".into(), Some("docker.io/library/busybox")),
            // Not canonical: Docker Hub defaults would be added.
            ("busybox".into(), None),
            ("myuser/release:1".into(), None),
            ("index.docker.io/library/busybox".into(), None),
            // Invalid.
            ("quay.io/Release:1".into(), None),
            ("quay.io/release@sha256:abc".into(), None),
            ("quay.io/release@md5:0123456789abcdef0123456789abcdef".into(), None),
            ("".into(), None),
            ("quay.io/".into(), None),
        ];
        for (reference, name) in cases {
            let parsed = parse_named(&reference);
            assert_eq!(parsed.as_ref().map(Named::name).as_deref(), name, "{reference}");
            if let Some(parsed) = parsed {
                assert_eq!(parsed.to_canonical_string(), reference);
            }
        }
        assert!(parse_named(&with_digest).unwrap().is_digested());
        assert!(!parse_named("quay.io/a:1").unwrap().is_digested());
    }
}
