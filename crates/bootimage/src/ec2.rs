//! Who owns an AMI: only Red Hat's RHCOS AMIs may be replaced by the stream's.
//!
//! The original asks EC2 (`DescribeImages`) and classifies the AMI by its owner account. That
//! call is IO, so the planner takes an [`AmiOwnerLookup`]; [`KnownStreams`] answers offline from
//! stream metadata files (every AMI a stream ever listed is a Red Hat one).

use std::collections::{BTreeMap, BTreeSet};

use crate::stream::Stream;

/// Red Hat's AWS account: owner of the standard RHCOS AMIs.
pub const RED_HAT_OWNER_ID: &str = "531415883065";
/// The AWS Marketplace account: owner of paid (marketplace) RHCOS AMIs.
pub const AWS_MARKETPLACE_OWNER_ID: &str = "679593333241";

/// The owner of an AMI, as far as boot image updates care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AmiOwner {
    /// A standard RHCOS AMI: replaced with the stream's AMI for the region.
    RedHat,
    /// An AWS Marketplace AMI (paid offering), with its name.
    Marketplace { name: String },
    /// Some other account: a custom image, never replaced.
    Other { owner_id: String },
    /// The lookup cannot tell (offline, not in any known stream).
    Unknown,
}

impl AmiOwner {
    /// Classifies an owner account ID as `DescribeImages` returns it.
    pub fn from_owner_id(owner_id: &str, name: &str) -> AmiOwner {
        match owner_id {
            RED_HAT_OWNER_ID => AmiOwner::RedHat,
            AWS_MARKETPLACE_OWNER_ID => AmiOwner::Marketplace { name: name.to_string() },
            other => AmiOwner::Other { owner_id: other.to_string() },
        }
    }
}

/// The lookup failed (as opposed to answering "unknown").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("looking up the owner of AMI {ami} in {region}: {message}")]
pub struct LookupError {
    pub ami: String,
    pub region: String,
    pub message: String,
}

/// Tells who owns an AMI. Implementations: [`KnownStreams`] (offline), [`KnownOwners`] (answers
/// collected beforehand, e.g. by a controller that called `DescribeImages` for every AMI of
/// its MachineSets).
pub trait AmiOwnerLookup {
    fn owner(&self, ami: &str, region: &str) -> Result<AmiOwner, LookupError>;
}

/// Offline: AMIs listed in any of the given streams are Red Hat's; anything else is unknown.
#[derive(Debug, Clone, Default)]
pub struct KnownStreams {
    amis: BTreeSet<String>,
}

impl KnownStreams {
    pub fn new<'a>(streams: impl IntoIterator<Item = &'a Stream>) -> KnownStreams {
        let amis = streams.into_iter().flat_map(|s| s.all_amis()).map(str::to_string).collect();
        KnownStreams { amis }
    }
}

impl AmiOwnerLookup for KnownStreams {
    fn owner(&self, ami: &str, _region: &str) -> Result<AmiOwner, LookupError> {
        Ok(if self.amis.contains(ami) { AmiOwner::RedHat } else { AmiOwner::Unknown })
    }
}

/// Owners found beforehand, keyed by AMI ID; AMIs not in the map are unknown.
#[derive(Debug, Clone, Default)]
pub struct KnownOwners(pub BTreeMap<String, AmiOwner>);

impl AmiOwnerLookup for KnownOwners {
    fn owner(&self, ami: &str, _region: &str) -> Result<AmiOwner, LookupError> {
        Ok(self.0.get(ami).cloned().unwrap_or(AmiOwner::Unknown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_ids_classify() {
        assert_eq!(AmiOwner::from_owner_id("531415883065", "rhcos-416"), AmiOwner::RedHat);
        assert_eq!(
            AmiOwner::from_owner_id("679593333241", "rhcos-x"),
            AmiOwner::Marketplace { name: "rhcos-x".into() }
        );
        assert_eq!(
            AmiOwner::from_owner_id("123456789012", "mine"),
            AmiOwner::Other { owner_id: "123456789012".into() }
        );
    }
}
