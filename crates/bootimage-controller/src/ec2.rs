//! Who owns an AMI, asked of EC2 (`DescribeImages`), as upstream does before replacing an AWS
//! MachineSet's boot image: only Red Hat's AMIs are replaced; marketplace and custom AMIs are
//! not ([`mco_bootimage::ec2::AmiOwner`]).
//!
//! Credentials are the static keys of the cluster's `aws-cloud-credentials` secret, so the SDK's
//! environment-based configuration loader (`aws-config`) is not needed. Clients are cached per
//! region and secret version.

use std::collections::HashMap;

use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_ec2::error::DisplayErrorContext;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use mco_bootimage::ec2::{AmiOwner, LookupError};

/// Keys of the credentials secret (`aws-cloud-credentials`, ns/MAPI).
pub const ACCESS_KEY_ID_KEY: &str = "aws_access_key_id";
pub const SECRET_ACCESS_KEY_KEY: &str = "aws_secret_access_key";

/// Static AWS credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("StaticCredentials").field("access_key_id", &self.access_key_id).finish_non_exhaustive()
    }
}

/// An EC2 client for one region.
pub fn client(region: &str, credentials: &StaticCredentials, endpoint_url: Option<&str>) -> aws_sdk_ec2::Client {
    let http = aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https();
    let mut config = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .credentials_provider(Credentials::new(
            &credentials.access_key_id,
            &credentials.secret_access_key,
            None,
            None,
            "aws-cloud-credentials",
        ))
        .http_client(http);
    if let Some(url) = endpoint_url {
        config = config.endpoint_url(url);
    }
    aws_sdk_ec2::Client::from_conf(config.build())
}

/// `DescribeImages(ImageIds=[ami])` → the owner. An AMI EC2 does not know is an error, as
/// upstream (the MachineSet could not boot from it anyway).
pub async fn describe_owner(client: &aws_sdk_ec2::Client, ami: &str, region: &str) -> Result<AmiOwner, LookupError> {
    let error = |message: String| LookupError { ami: ami.to_string(), region: region.to_string(), message };
    let output = client
        .describe_images()
        .image_ids(ami)
        .send()
        .await
        .map_err(|e| error(format!("DescribeImages: {}", DisplayErrorContext(&e))))?;
    let image = output.images().first().ok_or_else(|| error("DescribeImages found no such image".to_string()))?;
    let owner = image.owner_id().ok_or_else(|| error("DescribeImages returned an image without owner".to_string()))?;
    Ok(AmiOwner::from_owner_id(owner, image.name().unwrap_or_default()))
}

/// EC2 clients by region, for one version of the credentials secret.
#[derive(Debug, Default)]
pub struct Clients {
    endpoint_url: Option<String>,
    secret_version: String,
    by_region: HashMap<String, aws_sdk_ec2::Client>,
}

impl Clients {
    /// `endpoint_url` replaces the regional EC2 endpoints (a local EC2-compatible server).
    pub fn new(endpoint_url: Option<String>) -> Clients {
        Clients { endpoint_url, ..Default::default() }
    }

    /// The client for `region`; `secret_version` is the credentials secret's resourceVersion
    /// (a new version drops every cached client).
    pub fn get(&mut self, region: &str, credentials: &StaticCredentials, secret_version: &str) -> aws_sdk_ec2::Client {
        if self.secret_version != secret_version {
            self.by_region.clear();
            self.secret_version = secret_version.to_string();
        }
        self.by_region
            .entry(region.to_string())
            .or_insert_with(|| client(region, credentials, self.endpoint_url.as_deref()))
            .clone()
    }
}
