//! Who asks (TokenReview) and whether they may (SubjectAccessReview).

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::cache::Decisions;

/// What a metrics request must be allowed: upstream's kube-rbac-proxy configuration for the
/// controller and the daemon (`resource: namespace`, `subresource: metrics`, API version v1, verb
/// from the request's method: `get`).
pub const METRICS_ATTRIBUTES: (&str, &str, &str) = ("get", "namespace", "metrics");

/// The outcome of a request's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// No token, or one the API server does not accept: 401.
    Unauthenticated,
    /// An authenticated user without the permission: 403 with this text.
    Forbidden(String),
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
pub fn bearer_token(header: Option<&str>) -> Option<&str> {
    let (scheme, token) = header?.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The SubjectAccessReview that says whether `user` may read the metrics of `namespace`.
pub fn access_review(user: &UserInfo, namespace: &str) -> SubjectAccessReview {
    let (verb, resource, subresource) = METRICS_ATTRIBUTES;
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                verb: Some(verb.into()),
                version: Some("v1".into()),
                resource: Some(resource.into()),
                subresource: Some(subresource.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The refusal's text, as the API server's and kube-rbac-proxy's authorization filters word it.
pub fn forbidden(user: &str) -> String {
    let (verb, resource, subresource) = METRICS_ATTRIBUTES;
    format!("Forbidden (user={user}, verb={verb}, resource={resource}, subresource={subresource})")
}

/// Checks tokens against the API server, remembering the answers in [`Decisions`].
pub struct Authorizer {
    client: Client,
    namespace: String,
    decisions: Decisions,
}

impl Authorizer {
    pub fn new(client: Client, namespace: impl Into<String>) -> Self {
        Authorizer { client, namespace: namespace.into(), decisions: Decisions::default() }
    }

    /// The decision for a request carrying `token`. An API server that cannot be asked refuses
    /// (401) and the answer is not remembered.
    pub async fn decide(&self, token: Option<&str>) -> Decision {
        let Some(token) = token else { return Decision::Unauthenticated };
        if let Some(known) = self.decisions.get(token) {
            return known;
        }
        match self.ask(token).await {
            Ok(decision) => {
                self.decisions.insert(token, decision.clone());
                decision
            }
            Err(e) => {
                tracing::warn!("checking a metrics request's token: {e}");
                Decision::Unauthenticated
            }
        }
    }

    async fn ask(&self, token: &str) -> Result<Decision, kube::Error> {
        let review =
            TokenReview { spec: TokenReviewSpec { token: token.into(), ..Default::default() }, ..Default::default() };
        let reviewed = Api::<TokenReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Ok(Decision::Unauthenticated),
        };
        let review = access_review(&user, &self.namespace);
        let reviewed =
            Api::<SubjectAccessReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        Ok(match reviewed.status.is_some_and(|s| s.allowed) {
            true => Decision::Allowed,
            false => Decision::Forbidden(forbidden(user.username.as_deref().unwrap_or_default())),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        let cases = [
            (Some("Bearer abc.def"), Some("abc.def")),
            (Some("bearer abc"), Some("abc")),
            (Some("  BEARER   abc  "), Some("abc")),
            (Some("Basic dXNlcjpwYXNz"), None),
            (Some("Bearer"), None),
            (Some("Bearer "), None),
            (Some(""), None),
            (None, None),
        ];
        for (header, token) in cases {
            assert_eq!(bearer_token(header), token, "{header:?}");
        }
    }

    #[test]
    fn the_review_asks_for_upstreams_attributes_as_the_user() {
        let user = UserInfo {
            username: Some("system:serviceaccount:monitoring:prometheus".into()),
            uid: Some("1234".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            extra: Some(BTreeMap::from([("scopes".into(), vec!["a".into()])])),
        };
        let review = serde_json::to_value(access_review(&user, "openshift-machine-config-operator")).unwrap();
        assert_eq!(
            review["spec"],
            serde_json::json!({
                "user": "system:serviceaccount:monitoring:prometheus",
                "uid": "1234",
                "groups": ["system:serviceaccounts"],
                "extra": {"scopes": ["a"]},
                "resourceAttributes": {
                    "namespace": "openshift-machine-config-operator",
                    "verb": "get",
                    "version": "v1",
                    "resource": "namespace",
                    "subresource": "metrics",
                },
            })
        );
    }

    #[test]
    fn a_refusal_names_the_user_and_the_permission() {
        assert_eq!(
            forbidden("system:serviceaccount:default:nobody"),
            "Forbidden (user=system:serviceaccount:default:nobody, verb=get, resource=namespace, subresource=metrics)"
        );
    }
}
