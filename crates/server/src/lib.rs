//! The Machine Config Server: hands each new machine its pool's rendered config as an Ignition
//! config, over HTTPS on port 22623 (and plain HTTP on 22624), as the original's
//! `machine-config-server` does.
//!
//! * [`accept`]: which Ignition spec version a client gets, from its `Accept` header (pure).
//! * [`serve`]: the body for a version: the rendered config plus the files the server adds,
//!   converted down (pure).
//! * [`source`]: where configs come from ([`source::ConfigSource`]; bootstrap directory, or the
//!   cluster through watches); [`cache`]: the encoded bodies, per config and version, capped in
//!   total bytes.
//! * [`http`]: routing, status codes, limits, the listeners.
//! * [`skew`]: refusing machines whose boot image is too old (cluster mode), pure.
//! * [`tls`]: rustls with certificate reload; [`certs`]: creating a CA and serving certificate;
//!   [`stub`]: the pointer config machines boot with; [`run`]: the `mco server` process.

pub mod cache;
pub mod certs;
pub mod http;
pub mod run;
pub mod serve;
pub mod skew;
pub mod source;
mod stamp;
pub mod stub;
pub mod tls;

pub use cache::BodyCache;
pub use http::{Limits, Server};
/// Negotiation lives beside the Ignition versions it chooses among (and is fuzzed there).
pub use mco_ignition::accept;
pub use source::cluster::{ClusterOptions, ClusterSource};
pub use source::{BootstrapSource, ConfigSource, Snapshot, SourceError};
