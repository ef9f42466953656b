//! The credentials of a node's pull secret (`/var/lib/kubelet/config.json`, a docker config JSON)
//! for one image, chosen as containers' `auth.json` lookup does: the most specific key (a
//! repository, a namespace, then the registry) that is a prefix of the image's repository.

use k8s_cri::v1::AuthConfig;
use serde_json::Value;

/// A pull secret that is not a docker config JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("the pull secret is not JSON: {0}")]
    Json(String),
    #[error("the pull secret is not a docker config JSON: {0}")]
    Shape(&'static str),
}

/// The repository of an image reference: the name without its `@digest` or `:tag`.
fn repository(image: &str) -> &str {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    match name.rsplit_once(':') {
        // A colon after the last slash is a tag; before it, a registry's port.
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => name,
    }
}

/// A key of `auths` as a repository prefix: `https://reg.io/v1/` (docker's old form) is `reg.io`.
fn normalize_key(key: &str) -> &str {
    let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    let key = key.trim_end_matches('/');
    key.strip_suffix("/v1").or_else(|| key.strip_suffix("/v2")).unwrap_or(key)
}

/// The credentials `pull_secret` holds for `image`, if any.
pub fn for_image(pull_secret: &str, image: &str) -> Result<Option<AuthConfig>, AuthError> {
    let config: Value = serde_json::from_str(pull_secret).map_err(|e| AuthError::Json(e.to_string()))?;
    let auths = match config.get("auths") {
        None => return Ok(None),
        Some(Value::Object(auths)) => auths,
        Some(_) => return Err(AuthError::Shape("auths is not an object")),
    };
    let repository = repository(image);
    let best = auths
        .iter()
        .map(|(key, entry)| (normalize_key(key), entry))
        .filter(|(key, _)| repository == *key || repository.strip_prefix(key).is_some_and(|rest| rest.starts_with('/')))
        .max_by_key(|(key, _)| key.len());
    // No `server_address`: containerd would parse it as a URL, and the entry is this image's.
    let Some((_, entry)) = best else { return Ok(None) };
    let field = |name: &str| entry.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
    Ok(Some(AuthConfig {
        auth: field("auth"),
        username: field("username"),
        password: field("password"),
        identity_token: field("identitytoken"),
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_repository_of_a_reference_drops_its_digest_or_tag_but_not_a_port() {
        for (image, expected) in [
            (format!("quay.io/org/app@{DIGEST}"), "quay.io/org/app"),
            ("quay.io/org/app:1.2".to_string(), "quay.io/org/app"),
            (format!("127.0.0.1:5000/lab/app@{DIGEST}"), "127.0.0.1:5000/lab/app"),
            ("127.0.0.1:5000/lab/app".to_string(), "127.0.0.1:5000/lab/app"),
            ("127.0.0.1:5000/lab/app:v1".to_string(), "127.0.0.1:5000/lab/app"),
        ] {
            assert_eq!(repository(&image), expected, "{image}");
        }
    }

    #[test]
    fn the_most_specific_key_that_is_a_prefix_of_the_repository_wins() {
        let secret = r#"{"auths": {
            "quay.io": {"auth": "cmVnaXN0cnk6YQ=="},
            "quay.io/org": {"auth": "bmFtZXNwYWNlOmI="},
            "quay.io/org/app": {"username": "repo", "password": "c"},
            "https://index.docker.io/v1/": {"auth": "ZG9ja2VyOmQ="},
            "127.0.0.1:5000": {"auth": "bGFiOmU=", "identitytoken": "tok"}
        }}"#;
        let chosen = |image: &str| for_image(secret, image).unwrap().map(|a| (a.auth, a.username, a.identity_token));
        let s = String::from;
        let cases = [
            (format!("quay.io/org/app@{DIGEST}"), Some((s(""), s("repo"), s("")))),
            (format!("quay.io/org/other@{DIGEST}"), Some((s("bmFtZXNwYWNlOmI="), s(""), s("")))),
            (format!("quay.io/organisation/app@{DIGEST}"), Some((s("cmVnaXN0cnk6YQ=="), s(""), s("")))),
            (format!("index.docker.io/library/busybox@{DIGEST}"), Some((s("ZG9ja2VyOmQ="), s(""), s("")))),
            (format!("127.0.0.1:5000/lab/app@{DIGEST}"), Some((s("bGFiOmU="), s(""), s("tok")))),
            (format!("127.0.0.1:5001/lab/app@{DIGEST}"), None),
            (format!("quay.io.evil.com/org/app@{DIGEST}"), None),
        ];
        for (image, expected) in cases {
            assert_eq!(chosen(&image), expected, "{image}");
        }
    }

    #[test]
    fn a_secret_without_auths_has_no_credentials_and_a_malformed_one_is_named() {
        assert_eq!(for_image("{}", "quay.io/a/b:1"), Ok(None));
        assert_eq!(for_image(r#"{"auths": []}"#, "quay.io/a/b:1"), Err(AuthError::Shape("auths is not an object")));
        assert!(matches!(for_image("{", "quay.io/a/b:1"), Err(AuthError::Json(_))));
    }
}
