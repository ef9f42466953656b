//! `/metrics` as the original serves it: its components listen for Prometheus on loopback only and
//! put kube-rbac-proxy in front (port 9001, TLS, a bearer token the API server authenticates, and
//! a SubjectAccessReview for `get` on `namespace/metrics` in mco's namespace, from its
//! `kube-rbac-proxy` ConfigMap). mco's components do the same checks themselves on their secure
//! metrics port, so no sidecar image is needed.
//!
//! * [`bearer_token`], [`access_review`], [`forbidden`]: the request's token, the review asked
//!   for, the refusal (pure).
//! * [`Decisions`]: answers kept for a while (allowed 2 minutes, refused 30 seconds, as
//!   kube-rbac-proxy's delegating authenticator and authorizer cache them), so a scrape every 30 s
//!   does not cost two API requests; keyed by the token's SHA-256, never the token; bounded.
//! * [`Authorizer`]: TokenReview then SubjectAccessReview against the API server.
//! * [`tls_config`]: the serving certificate from a directory (`tls.crt`, `tls.key`, reloaded when
//!   they change, e.g. a service-ca Secret), or a self-signed one made at start, as kube-rbac-proxy
//!   makes one when it is given none; [`listen`]: the HTTPS listener; [`start`]: both, for a
//!   component.

mod cache;
mod review;
mod serve;

pub use cache::Decisions;
pub use review::{Authorizer, Decision, METRICS_ATTRIBUTES, access_review, bearer_token, forbidden};
pub use serve::{SecureListen, listen, start, tls_config};
