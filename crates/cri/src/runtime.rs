//! A client of the node's containerd: the CRI image service (status, pull) and containerd's
//! images API (the pin labels), over one gRPC channel on its socket.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::{GetImageRequest, Image, ListImagesRequest, UpdateImageRequest};
use containerd_client::with_namespace;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::{AuthConfig, ImageSpec, ImageStatusRequest, PullImageRequest};
use tonic::transport::Channel;
use tonic::{Code, Request};

/// containerd's namespace of the CRI's (the kubelet's) images.
pub const CRI_NAMESPACE: &str = "k8s.io";
/// The label containerd's CRI reads as "pinned" (`labels.PinnedImageLabelKey`) and its value.
pub const PINNED_LABEL: &str = "io.cri-containerd.pinned";
pub const PINNED_VALUE: &str = "pinned";
/// Marks the pins mco made, so that unpinning never touches an image another pinned (containerd
/// pins its sandbox image itself).
pub const MCO_PIN_LABEL: &str = "mco.dev/pinned-by";
pub const MCO_PIN_VALUE: &str = "PinnedImageSet";

/// An image as the CRI reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriImage {
    pub pinned: bool,
    /// Its references by digest (`repo@sha256:...`), as containerd names them.
    pub repo_digests: Vec<String>,
}

/// The node's containerd.
pub struct Runtime {
    channel: Channel,
    socket: PathBuf,
}

fn spec(image: &str) -> ImageSpec {
    ImageSpec { image: image.to_string(), ..Default::default() }
}

/// A gRPC failure as its message (containerd's error text, e.g. the registry's answer).
fn rpc(status: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{} ({:?})", status.message(), status.code())
}

impl Runtime {
    /// Connects to containerd at `socket` (nothing is sent until a request).
    pub async fn connect(socket: &Path) -> anyhow::Result<Runtime> {
        let channel = containerd_client::connect(socket)
            .await
            .with_context(|| format!("connecting to containerd at {}", socket.display()))?;
        Ok(Runtime { channel, socket: socket.to_path_buf() })
    }

    fn cri(&self) -> ImageServiceClient<Channel> {
        ImageServiceClient::new(self.channel.clone())
    }

    fn images(&self) -> ImagesClient<Channel> {
        ImagesClient::new(self.channel.clone())
    }

    /// The CRI's view of `image`; `None` when the runtime does not have it.
    pub async fn image(&self, image: &str) -> anyhow::Result<Option<CriImage>> {
        let request = ImageStatusRequest { image: Some(spec(image)), verbose: false };
        let response = self
            .cri()
            .image_status(Request::new(request))
            .await
            .map_err(rpc)
            .with_context(|| format!("asking containerd at {} for image {image}", self.socket.display()))?;
        Ok(response.into_inner().image.map(|i| CriImage { pinned: i.pinned, repo_digests: i.repo_digests }))
    }

    /// Pulls `image` through the CRI with `auth`.
    pub async fn pull(&self, image: &str, auth: Option<AuthConfig>) -> anyhow::Result<()> {
        let request = PullImageRequest { image: Some(spec(image)), auth, sandbox_config: None };
        self.cri().pull_image(Request::new(request)).await.map_err(rpc).with_context(|| format!("pulling {image}"))?;
        Ok(())
    }

    /// The names of the images mco pinned.
    pub async fn pinned_by_mco(&self) -> anyhow::Result<BTreeSet<String>> {
        let request = with_namespace!(ListImagesRequest { filters: Vec::new() }, CRI_NAMESPACE);
        let images = self.images().list(request).await.map_err(rpc).context("listing containerd's images")?;
        Ok(images
            .into_inner()
            .images
            .into_iter()
            .filter(|i| i.labels.get(MCO_PIN_LABEL).is_some_and(|v| v == MCO_PIN_VALUE))
            .map(|i| i.name)
            .collect())
    }

    /// containerd's record of `image`: its own name, or the name containerd gave it (a reference
    /// normalized as `docker.io/library/...`), which the CRI lists among its repo digests.
    async fn record(&self, image: &str) -> anyhow::Result<Option<Image>> {
        let mut names = vec![image.to_string()];
        if let Some((_, digest)) = image.split_once('@')
            && let Some(cri) = self.image(image).await?
        {
            names.extend(cri.repo_digests.into_iter().filter(|r| r.ends_with(&format!("@{digest}"))));
        }
        for name in names {
            let request = with_namespace!(GetImageRequest { name: name.clone() }, CRI_NAMESPACE);
            match self.images().get(request).await {
                Ok(response) => return Ok(response.into_inner().image),
                Err(status) if status.code() == Code::NotFound => continue,
                Err(status) => return Err(rpc(status)).with_context(|| format!("reading containerd's image {name}")),
            }
        }
        Ok(None)
    }

    /// The name of containerd's record of `image`, which carries its pin (`None`: not there).
    pub async fn record_name(&self, image: &str) -> anyhow::Result<Option<String>> {
        Ok(self.record(image).await?.map(|r| r.name))
    }

    /// Sets (or, with `None`, removes) the pin labels of `record`.
    async fn label(&self, mut record: Image, value: Option<(&str, &str)>) -> anyhow::Result<()> {
        let name = record.name.clone();
        let mut paths = Vec::new();
        for (key, set) in [(PINNED_LABEL, value.map(|v| v.0)), (MCO_PIN_LABEL, value.map(|v| v.1))] {
            // A label absent from the update but named in the mask is removed.
            match set {
                Some(v) => record.labels.insert(key.to_string(), v.to_string()),
                None => record.labels.remove(key),
            };
            paths.push(format!("labels.{key}"));
        }
        let update = UpdateImageRequest {
            image: Some(record),
            update_mask: Some(prost_types::FieldMask { paths }),
            ..Default::default()
        };
        self.images()
            .update(with_namespace!(update, CRI_NAMESPACE))
            .await
            .map_err(rpc)
            .with_context(|| format!("labelling containerd's image {name}"))?;
        Ok(())
    }

    /// Pins `image`, which the runtime must have. An image already pinned by another (without
    /// mco's mark) is left as it is, so that unpinning it later is not mco's to do.
    pub async fn pin(&self, image: &str) -> anyhow::Result<()> {
        let record = self.record(image).await?.with_context(|| format!("image {image} is not in containerd"))?;
        if record.labels.get(PINNED_LABEL).is_some_and(|v| v == PINNED_VALUE) {
            return Ok(());
        }
        self.label(record, Some((PINNED_VALUE, MCO_PIN_VALUE))).await
    }

    /// Removes mco's pin of `image` (nothing if the runtime no longer has it, or mco did not pin it).
    pub async fn unpin(&self, image: &str) -> anyhow::Result<()> {
        match self.record(image).await? {
            Some(record) if record.labels.get(MCO_PIN_LABEL).is_some_and(|v| v == MCO_PIN_VALUE) => {
                self.label(record, None).await
            }
            _ => Ok(()),
        }
    }
}
