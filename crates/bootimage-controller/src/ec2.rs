//! Who owns an AMI, asked of EC2 (`DescribeImages`), as upstream does before replacing an AWS
//! MachineSet's boot image: only Red Hat's AMIs are replaced; marketplace and custom AMIs are
//! not ([`mco_bootimage::ec2::AmiOwner`]).
//!
//! Credentials are the static keys of the cluster's `aws-cloud-credentials` secret. Clients are
//! cached per region and secret version.
//!
//! # Why not the AWS SDK
//!
//! This is a small client of the EC2 Query API rather than `aws-sdk-ec2`: the controller makes
//! one call, and that crate alone took about 8 minutes of one core to compile, the critical
//! path of the workspace build. What is hard to get right is not written here: requests are
//! signed by the SDK's own Signature Version 4 crate (`aws-sigv4`), HTTPS is the workspace's
//! hyper + rustls (ring) stack with the platform's root certificates, as kube-rs uses; the XML
//! answers are read with the `xmlparser` tokenizer ([`xml`]).
//!
//! A call is `POST {endpoint}` with the form `Action=…&Version=2016-11-15&…`, bounded by
//! [`TIMEOUT`] and [`MAX_RESPONSE_BYTES`]. Unlike the SDK there are no retries: a failed lookup
//! fails the controller's sync, which is retried.

pub mod xml;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, USER_AGENT};
use http::{StatusCode, Uri};
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mco_bootimage::ec2::{AmiOwner, LookupError};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rustls_platform_verifier::BuilderVerifierExt as _;

/// Keys of the credentials secret (`aws-cloud-credentials`, ns/MAPI).
pub const ACCESS_KEY_ID_KEY: &str = "aws_access_key_id";
pub const SECRET_ACCESS_KEY_KEY: &str = "aws_secret_access_key";

/// The EC2 Query API version of every request (EC2's current, and only, API version).
pub const API_VERSION: &str = "2016-11-15";
/// Bound on one call: connection, TLS handshake, request and the whole answer.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read; a larger one is an error (`DescribeImages` of one image is a few
/// KiB).
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;

const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";
/// The signing name of EC2.
const SERVICE: &str = "ec2";
/// What the Query protocol escapes in form values: everything but RFC 3986's unreserved
/// characters (as the SDK's `aws-smithy-query`).
const QUERY_ESCAPED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

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

/// Why an EC2 call has no answer document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// EC2 answered with an error (`<Response><Errors><Error>`).
    #[error("{code}: {message} (HTTP {status}{})", request_suffix(request_id.as_deref()))]
    Api { status: u16, code: String, message: String, request_id: Option<String> },
    /// A status other than 2xx without an EC2 error document (a proxy, a load balancer).
    #[error("HTTP {status}: {excerpt}")]
    Status { status: u16, excerpt: String },
    /// A 2xx answer that is not the action's document.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// No answer: the client's configuration, the connection, TLS, the time or size bounds.
    #[error("{0}")]
    Transport(String),
}

fn request_suffix(request_id: Option<&str>) -> String {
    request_id.map(|id| format!(", request {id}")).unwrap_or_default()
}

type Transport = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An EC2 client for one region (cheap to clone).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    region: String,
    credentials: Credentials,
    /// The endpoint and the HTTP client, or why there are none (reported by every call).
    setup: Result<(Uri, Transport), String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let endpoint = self.inner.setup.as_ref().map(|(endpoint, _)| endpoint);
        f.debug_struct("Client")
            .field("region", &self.inner.region)
            .field("endpoint", &endpoint)
            .finish_non_exhaustive()
    }
}

/// An EC2 client for one region. `endpoint_url` replaces `https://ec2.{region}.{partition
/// domain}/` (a local EC2-compatible server; plain `http` is accepted). Errors of the
/// configuration (an invalid region or URL, no root certificates) are reported by the calls.
pub fn client(region: &str, credentials: &StaticCredentials, endpoint_url: Option<&str>) -> Client {
    let setup = endpoint(region, endpoint_url).and_then(|endpoint| Ok((endpoint, transport()?)));
    let credentials = Credentials::new(
        &credentials.access_key_id,
        &credentials.secret_access_key,
        None,
        None,
        "aws-cloud-credentials",
    );
    Client { inner: Arc::new(Inner { region: region.to_string(), credentials, setup }) }
}

impl Client {
    /// One signed EC2 Query API call: `Action={action}&Version=2016-11-15` and `params` (in
    /// order, e.g. `("ImageId.1", ami)`); the `<{action}Response>` document of a 2xx answer.
    pub async fn call(&self, action: &str, params: &[(&str, &str)]) -> Result<xml::Element, CallError> {
        let (endpoint, transport) = self.inner.setup.as_ref().map_err(|e| CallError::Transport(e.clone()))?;
        let body = form_body(action, params);
        let request = signed_request(endpoint, &self.inner.region, &self.inner.credentials, body, SystemTime::now())
            .map_err(CallError::Transport)?;
        let exchange = async {
            let response = transport.request(request).await.map_err(|e| CallError::Transport(error_chain(&e)))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES).collect().await.map_err(|e| {
                CallError::Transport(if e.is::<LengthLimitError>() {
                    format!("the answer is larger than {} MiB", MAX_RESPONSE_BYTES >> 20)
                } else {
                    format!("reading the answer: {}", error_chain(&*e))
                })
            })?;
            Ok((status, body.to_bytes()))
        };
        let (status, body) = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| CallError::Transport(format!("no complete answer within {} s", TIMEOUT.as_secs())))??;
        tracing::debug!(action, %endpoint, %status, bytes = body.len(), "EC2 call");
        interpret(action, status, &body)
    }
}

/// `DescribeImages(ImageIds=[ami])` → the owner. An AMI EC2 does not know is an error, as
/// upstream (the MachineSet could not boot from it anyway).
pub async fn describe_owner(client: &Client, ami: &str, region: &str) -> Result<AmiOwner, LookupError> {
    let error = |message: String| LookupError { ami: ami.to_string(), region: region.to_string(), message };
    let response = client
        .call("DescribeImages", &[("ImageId.1", ami)])
        .await
        .map_err(|e| error(format!("DescribeImages: {e}")))?;
    owner_of(&response).map_err(|message| error(message.to_string()))
}

/// The owner of the first image of a `DescribeImagesResponse`.
fn owner_of(response: &xml::Element) -> Result<AmiOwner, &'static str> {
    let image = response.find(&["imagesSet", "item"]).ok_or("DescribeImages found no such image")?;
    let owner = image
        .text_at(&["imageOwnerId"])
        .filter(|owner| !owner.is_empty())
        .ok_or("DescribeImages returned an image without owner")?;
    Ok(AmiOwner::from_owner_id(owner, image.text_at(&["name"]).unwrap_or_default()))
}

/// The endpoint of `region` (the partition's domain, as the SDK's endpoint rules), or the
/// override.
fn endpoint(region: &str, endpoint_url: Option<&str>) -> Result<Uri, String> {
    let url = match endpoint_url {
        Some(url) => url.to_string(),
        None => {
            // The region becomes part of a host name: nothing but a DNS label.
            let label = |r: &str| {
                !r.is_empty()
                    && r.len() <= 63
                    && !r.starts_with('-')
                    && !r.ends_with('-')
                    && r.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            };
            if !label(region) {
                return Err(format!("invalid region {region:?}"));
            }
            format!("https://ec2.{region}.{}/", dns_suffix(region))
        }
    };
    let invalid = |why: &str| format!("invalid EC2 endpoint {url:?}: {why}");
    let uri: Uri = url.parse().map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    if !matches!(uri.scheme_str(), Some("https" | "http")) {
        return Err(invalid("not an http(s) URL"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    if uri.query().is_some() {
        return Err(invalid("a query"));
    }
    let mut parts = uri.into_parts();
    if parts.path_and_query.as_ref().is_none_or(|p| p.path().is_empty()) {
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    }
    Uri::from_parts(parts).map_err(|e| invalid(&e.to_string()))
}

/// The DNS suffix of the partition of `region` (the `regionRegex`es of the SDK's partitions;
/// `aws`, `aws-us-gov` and unknown regions use `amazonaws.com`).
fn dns_suffix(region: &str) -> &'static str {
    [
        ("cn-", "amazonaws.com.cn"),
        ("eusc-", "amazonaws.eu"),
        ("us-iso-", "c2s.ic.gov"),
        ("us-isob-", "sc2s.sgov.gov"),
        ("us-isof-", "csp.hci.ic.gov"),
        ("eu-isoe-", "cloud.adc-e.uk"),
    ]
    .into_iter()
    .find_map(|(prefix, suffix)| region.starts_with(prefix).then_some(suffix))
    .unwrap_or("amazonaws.com")
}

/// The form body of a call: `Action`, `Version`, then `params`, values escaped as the SDK
/// does.
fn form_body(action: &str, params: &[(&str, &str)]) -> String {
    [("Action", action), ("Version", API_VERSION)]
        .iter()
        .chain(params)
        .map(|(key, value)| {
            format!("{}={}", utf8_percent_encode(key, QUERY_ESCAPED), utf8_percent_encode(value, QUERY_ESCAPED))
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The `POST` of `body` to `endpoint`, signed (SigV4, service `ec2`, `region`) at `time`.
fn signed_request(
    endpoint: &Uri,
    region: &str,
    credentials: &Credentials,
    body: String,
    time: SystemTime,
) -> Result<http::Request<Full<Bytes>>, String> {
    let signing = |e: &dyn std::error::Error| format!("signing the request: {}", error_chain(e));
    let uri = endpoint.to_string();
    let headers = [(CONTENT_TYPE.as_str(), FORM_CONTENT_TYPE)];
    let signable = SignableRequest::new("POST", uri, headers.iter().copied(), SignableBody::Bytes(body.as_bytes()))
        .map_err(|e| signing(&e))?;
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| signing(&e))?
        .into();
    let (instructions, _signature) = sign(signable, &params).map_err(|e| signing(&e))?.into_parts();
    let mut request = http::Request::post(endpoint.clone())
        .header(CONTENT_TYPE, FORM_CONTENT_TYPE)
        .header(USER_AGENT, concat!("mco-bootimage-controller/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| signing(&e))?;
    instructions.apply_to_request_http1x(&mut request);
    Ok(request)
}

/// The HTTP(S) client: rustls with ring and the platform's root certificates, HTTP/1.1.
fn transport() -> Result<Transport, String> {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_platform_verifier())
        .map_err(|e| format!("configuring TLS: {e}"))?
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_http1().build();
    Ok(hyper_util::client::legacy::Client::builder(TokioExecutor::new()).pool_timer(TokioTimer::new()).build(https))
}

/// The answer to `action`: its document on a 2xx status, its error otherwise.
fn interpret(action: &str, status: StatusCode, body: &[u8]) -> Result<xml::Element, CallError> {
    if !status.is_success() {
        return Err(api_error(status, body));
    }
    let text = std::str::from_utf8(body).map_err(|e| CallError::Malformed(format!("not UTF-8: {e}")))?;
    let document = xml::parse(text).map_err(CallError::Malformed)?;
    let expected = format!("{action}Response");
    if document.name() != expected {
        return Err(CallError::Malformed(format!("<{}> instead of <{expected}>", document.name())));
    }
    Ok(document)
}

/// The error of an answer with a status other than 2xx.
fn api_error(status: StatusCode, body: &[u8]) -> CallError {
    let text = String::from_utf8_lossy(body);
    let document = xml::parse(&text).ok();
    let error = document.as_ref().and_then(|d| d.find(&["Errors", "Error"]).or_else(|| d.child("Error")));
    match error {
        Some(error) => CallError::Api {
            status: status.as_u16(),
            code: error.text_at(&["Code"]).unwrap_or_default().to_string(),
            message: error.text_at(&["Message"]).unwrap_or_default().to_string(),
            request_id: document
                .as_ref()
                .and_then(|d| d.text_at(&["RequestID"]).or_else(|| d.text_at(&["RequestId"])))
                .map(str::to_string),
        },
        None => {
            let excerpt: String = text.trim().chars().take(200).map(|c| if c.is_control() { ' ' } else { c }).collect();
            let excerpt =
                if excerpt.is_empty() { status.canonical_reason().unwrap_or("no body").to_string() } else { excerpt };
            CallError::Status { status: status.as_u16(), excerpt }
        }
    }
}

/// An error and its sources, `outer: inner: …` (hyper's own messages say little).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    message
}

/// EC2 clients by region, for one version of the credentials secret.
#[derive(Debug, Default)]
pub struct Clients {
    endpoint_url: Option<String>,
    secret_version: String,
    by_region: HashMap<String, Client>,
}

impl Clients {
    /// `endpoint_url` replaces the regional EC2 endpoints (a local EC2-compatible server).
    pub fn new(endpoint_url: Option<String>) -> Clients {
        Clients { endpoint_url, ..Default::default() }
    }

    /// The client for `region`; `secret_version` is the credentials secret's resourceVersion
    /// (a new version drops every cached client).
    pub fn get(&mut self, region: &str, credentials: &StaticCredentials, secret_version: &str) -> Client {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A `DescribeImages` answer as EC2 writes it (one image, abridged only in its block
    /// devices).
    const ONE_IMAGE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeImagesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>
    <imagesSet>
        <item>
            <imageId>ami-0a1b2c3d4e5f60718</imageId>
            <imageLocation>aws-marketplace/rhcos-x86_64-415.92.202311241643-0-59ead7de</imageLocation>
            <imageState>available</imageState>
            <imageOwnerId>679593333241</imageOwnerId>
            <creationDate>2023-11-24T16:43:00.000Z</creationDate>
            <isPublic>true</isPublic>
            <productCodes>
                <item>
                    <productCode>6kxv8q6ty1d3example</productCode>
                    <type>marketplace</type>
                </item>
            </productCodes>
            <architecture>x86_64</architecture>
            <imageType>machine</imageType>
            <imageOwnerAlias>aws-marketplace</imageOwnerAlias>
            <name>rhcos-x86_64-415.92.202311241643-0-59ead7de &amp; co</name>
            <rootDeviceType>ebs</rootDeviceType>
            <rootDeviceName>/dev/xvda</rootDeviceName>
            <blockDeviceMapping>
                <item>
                    <deviceName>/dev/xvda</deviceName>
                    <ebs>
                        <snapshotId>snap-1234567890abcdef0</snapshotId>
                        <volumeSize>16</volumeSize>
                        <deleteOnTermination>true</deleteOnTermination>
                        <volumeType>gp3</volumeType>
                    </ebs>
                </item>
            </blockDeviceMapping>
            <virtualizationType>hvm</virtualizationType>
            <tagSet/>
            <hypervisor>xen</hypervisor>
            <enaSupport>true</enaSupport>
        </item>
    </imagesSet>
</DescribeImagesResponse>"#;

    const NO_IMAGE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeImagesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>4ac0b8fe-0b1f-4cbd-a1d2-2b5d3EXAMPLE</requestId>
    <imagesSet/>
</DescribeImagesResponse>"#;

    const NO_OWNER: &str = r#"<DescribeImagesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>r</requestId>
    <imagesSet><item><imageId>ami-1</imageId><name>golden</name></item></imagesSet>
</DescribeImagesResponse>"#;

    const EMPTY_OWNER: &str = r#"<DescribeImagesResponse><imagesSet><item><imageId>ami-1</imageId>
    <imageOwnerId/></item></imagesSet></DescribeImagesResponse>"#;

    /// An error as EC2 writes it (on one line).
    const NOT_FOUND: &str = concat!(
        r#"<?xml version="1.0" encoding="UTF-8"?>"#,
        "\n<Response><Errors><Error><Code>InvalidAMIID.NotFound</Code>",
        "<Message>The image id '[ami-0123456789abcdef0]' does not exist</Message></Error></Errors>",
        "<RequestID>8a7d1b2c-3e4f-5a6b-7c8d-9e0fEXAMPLE</RequestID></Response>",
    );

    #[test]
    fn describe_images_answers() {
        let ok = StatusCode::OK;
        let bad = StatusCode::BAD_REQUEST;
        let cases: &[(StatusCode, &str, Result<AmiOwner, &str>)] = &[
            (
                ok,
                ONE_IMAGE,
                Ok(AmiOwner::Marketplace { name: "rhcos-x86_64-415.92.202311241643-0-59ead7de & co".into() }),
            ),
            (ok, &ONE_IMAGE.replace("679593333241", "531415883065"), Ok(AmiOwner::RedHat)),
            (
                ok,
                &ONE_IMAGE.replace("679593333241", "123456789012"),
                Ok(AmiOwner::Other { owner_id: "123456789012".into() }),
            ),
            (ok, NO_IMAGE, Err("DescribeImages found no such image")),
            (ok, "<DescribeImagesResponse/>", Err("DescribeImages found no such image")),
            (ok, NO_OWNER, Err("DescribeImages returned an image without owner")),
            (ok, EMPTY_OWNER, Err("DescribeImages returned an image without owner")),
            (
                bad,
                NOT_FOUND,
                Err("InvalidAMIID.NotFound: The image id '[ami-0123456789abcdef0]' does not exist \
                     (HTTP 400, request 8a7d1b2c-3e4f-5a6b-7c8d-9e0fEXAMPLE)"),
            ),
            (
                StatusCode::FORBIDDEN,
                "<Response><Errors><Error><Code>AuthFailure</Code><Message>AWS was not able to validate the \
                 provided access credentials</Message></Error></Errors><RequestID>r1</RequestID></Response>",
                Err("AuthFailure: AWS was not able to validate the provided access credentials (HTTP 403, request r1)"),
            ),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "<ErrorResponse><Error><Code>Unavailable</Code><Message>m</Message></Error></ErrorResponse>",
                Err("Unavailable: m (HTTP 503)"),
            ),
            (
                StatusCode::BAD_GATEWAY,
                "<html><body><h1>502 Bad Gateway</h1></body></html>\n",
                Err("HTTP 502: <html><body><h1>502 Bad Gateway</h1></body></html>"),
            ),
            (StatusCode::SERVICE_UNAVAILABLE, "", Err("HTTP 503: Service Unavailable")),
            (ok, NOT_FOUND, Err("malformed answer: <Response> instead of <DescribeImagesResponse>")),
            (ok, "<DescribeImagesResponse>", Err("malformed answer: <DescribeImagesResponse> is not closed")),
            (ok, "", Err("malformed answer: no root element")),
        ];
        for (status, body, expected) in cases {
            let got = interpret("DescribeImages", *status, body.as_bytes())
                .map_err(|e| e.to_string())
                .and_then(|document| owner_of(&document).map_err(str::to_string));
            assert_eq!(got, expected.clone().map_err(str::to_string), "{status} {body}");
        }
    }

    #[test]
    fn api_errors_keep_their_parts() {
        assert_eq!(
            interpret("DescribeImages", StatusCode::BAD_REQUEST, NOT_FOUND.as_bytes()).unwrap_err(),
            CallError::Api {
                status: 400,
                code: "InvalidAMIID.NotFound".into(),
                message: "The image id '[ami-0123456789abcdef0]' does not exist".into(),
                request_id: Some("8a7d1b2c-3e4f-5a6b-7c8d-9e0fEXAMPLE".into()),
            }
        );
        assert_eq!(
            interpret("X", StatusCode::OK, b"\xff").unwrap_err().to_string(),
            "malformed answer: not UTF-8: invalid utf-8 sequence of 1 bytes from index 0"
        );
    }

    #[test]
    fn form_bodies() {
        for (action, params, expected) in [
            (
                "DescribeImages",
                &[("ImageId.1", "ami-052ef3d8b962bffa1")][..],
                "Action=DescribeImages&Version=2016-11-15&ImageId.1=ami-052ef3d8b962bffa1",
            ),
            ("DescribeRegions", &[], "Action=DescribeRegions&Version=2016-11-15"),
            (
                "CreateImage",
                &[("InstanceId", "i-1"), ("Name", "golden rhcos+1/ä&=~*")],
                "Action=CreateImage&Version=2016-11-15&InstanceId=i-1&Name=golden%20rhcos%2B1%2F%C3%A4%26%3D~%2A",
            ),
        ] {
            assert_eq!(form_body(action, params), expected);
        }
    }

    #[test]
    fn endpoints() {
        for (region, url, expected) in [
            ("us-east-1", None, Ok("https://ec2.us-east-1.amazonaws.com/")),
            ("us-gov-west-1", None, Ok("https://ec2.us-gov-west-1.amazonaws.com/")),
            ("cn-northwest-1", None, Ok("https://ec2.cn-northwest-1.amazonaws.com.cn/")),
            ("us-isob-east-1", None, Ok("https://ec2.us-isob-east-1.sc2s.sgov.gov/")),
            ("us-iso-east-1", None, Ok("https://ec2.us-iso-east-1.c2s.ic.gov/")),
            ("eusc-de-east-1", None, Ok("https://ec2.eusc-de-east-1.amazonaws.eu/")),
            ("us-east-1", Some("http://127.0.0.1:5000"), Ok("http://127.0.0.1:5000/")),
            (
                "us-east-1",
                Some("https://vpce-1.ec2.us-east-1.vpce.amazonaws.com/"),
                Ok("https://vpce-1.ec2.us-east-1.vpce.amazonaws.com/"),
            ),
            ("evil.example/x", None, Err("invalid region \"evil.example/x\"")),
            ("", None, Err("invalid region \"\"")),
            ("us-east-1", Some("ftp://h/"), Err("invalid EC2 endpoint \"ftp://h/\": not an http(s) URL")),
            ("us-east-1", Some("127.0.0.1:5000"), Err("invalid EC2 endpoint \"127.0.0.1:5000\": not an http(s) URL")),
            ("us-east-1", Some("http://h/?a=b"), Err("invalid EC2 endpoint \"http://h/?a=b\": a query")),
        ] {
            assert_eq!(
                endpoint(region, url).map(|u| u.to_string()),
                expected.map(str::to_string).map_err(str::to_string)
            );
        }
    }

    /// The signature is the one botocore's `SigV4Auth` (and a from-scratch computation with
    /// Python's `hmac`) gives the same request.
    #[test]
    fn requests_are_signed() {
        let credentials =
            Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test");
        let endpoint = endpoint("us-east-1", None).unwrap();
        let body = form_body("DescribeImages", &[("ImageId.1", "ami-052ef3d8b962bffa1")]);
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160); // 2015-08-30T12:36:00Z
        let request = signed_request(&endpoint, "us-east-1", &credentials, body.clone(), time).unwrap();
        assert_eq!(request.method(), http::Method::POST);
        assert_eq!(request.uri(), "https://ec2.us-east-1.amazonaws.com/");
        let header = |name: &str| request.headers().get(name).map(|v| v.to_str().unwrap());
        assert_eq!(header("content-type"), Some(FORM_CONTENT_TYPE));
        assert_eq!(header("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(header("x-amz-security-token"), None);
        assert_eq!(
            header("authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/ec2/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date, \
                 Signature=3c7bb77271c18f6a514854c1abc2e28f49019ae875726ae8e0ebad5d09afcaff"
            )
        );
    }

    #[test]
    fn configuration_errors_come_back_from_calls() {
        let credentials =
            StaticCredentials { access_key_id: "AKIAMCOTEST".into(), secret_access_key: "not-a-secret".into() };
        let client = client("../", &credentials, None);
        assert!(!format!("{client:?}").contains("not-a-secret"), "{client:?}");
        let error = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(describe_owner(&client, "ami-1", "../"))
            .unwrap_err();
        assert_eq!(error.message, "DescribeImages: invalid region \"../\"");
    }
}
