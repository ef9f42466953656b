//! The runtime client against a real containerd v2 (built by hack/kube-binaries.sh) and a real
//! registry that asks for credentials: pulls through the CRI with the pull secret's credentials,
//! pins and unpins as the CRI then reports them, and names the image in every failure.

use std::path::Path;

use mco_cri::{Runtime, auth};
use mco_os::registry::LocalRegistry;
use mco_testenv::containerd::{Containerd, push_buildah_image};
use mco_testenv::{eventually, satisfying};

const USER: &str = "puller";
const PASSWORD: &str = "pull-pw";

/// A client once containerd's CRI answers.
async fn connect(containerd: &Containerd) -> Runtime {
    containerd
        .eventually_serving(|| async {
            let runtime = Runtime::connect(&containerd.socket).await?;
            runtime.image("127.0.0.1:1/none:1").await?;
            Ok(runtime)
        })
        .await
}

/// Pushes an image (one label, so that each is another) with the registry's credentials; returns
/// its reference by digest.
fn push_image(dir: &Path, registry: &LocalRegistry, name_tag: &str) -> String {
    let creds = format!("{USER}:{PASSWORD}");
    let label = format!("name={name_tag}");
    let digest = push_buildah_image(
        dir,
        &registry.host(),
        &registry.registries_conf,
        name_tag,
        &["--label", &label],
        Some(&creds),
    );
    let repository = name_tag.split(':').next().unwrap();
    format!("{}/{repository}@{digest}", registry.host())
}

#[tokio::test]
async fn images_are_pulled_with_the_pull_secret_pinned_and_unpinned_as_the_cri_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let htpasswd = format!("{USER}:{}\n", bcrypt::hash(PASSWORD, 4).unwrap());
    let registry = LocalRegistry::start_authenticated(&tmp.path().join("registry"), &htpasswd).unwrap();
    let first = push_image(tmp.path(), &registry, "lab/first:1");
    let second = push_image(tmp.path(), &registry, "lab/second:1");
    // containerd pins its sandbox image itself: mco's pins leave it alone.
    let sandbox = push_image(tmp.path(), &registry, "lab/sandbox:1");
    let dir = tmp.path().join("containerd");
    let host = registry.host();
    let containerd = Containerd::start(&dir, &dir.join("containerd.sock"), &[(&host, &host)], Some(&sandbox)).unwrap();
    let runtime = connect(&containerd).await;

    // Without credentials the registry's refusal is the error, naming the image.
    let refused = runtime.pull(&first, None).await.unwrap_err();
    let message = format!("{refused:#}");
    assert!(message.contains(&first) && message.contains("authorization failed"), "{message}");
    assert_eq!(runtime.image(&first).await.unwrap(), None);

    let secret = format!(
        r#"{{"auths": {{"{}": {{"auth": "{}"}}}}}}"#,
        registry.host(),
        base64_of(&format!("{USER}:{PASSWORD}"))
    );
    for image in [&first, &second, &sandbox] {
        let credentials = auth::for_image(&secret, image).unwrap();
        assert!(credentials.is_some(), "the secret has credentials for {image}");
        runtime.pull(image, credentials).await.unwrap();
        let pulled = runtime.image(image).await.unwrap().expect("pulled");
        assert_eq!(pulled.pinned, image == &sandbox, "only containerd's sandbox image is pinned: {image}");
    }

    runtime.pin(&first).await.unwrap();
    let pinned = |image: String| {
        let runtime = &runtime;
        async move { runtime.image(&image).await.unwrap().map(|i| i.pinned) }
    };
    // containerd's CRI learns of the label from containerd's event: awaited.
    eventually("the CRI to report the first image pinned", || async {
        satisfying(pinned(first.clone()).await, |p| *p == Some(true))
    })
    .await;
    assert_eq!(pinned(second.clone()).await, Some(false), "only the first image is pinned");
    assert_eq!(runtime.pinned_by_mco().await.unwrap(), [first.clone()].into());
    // Pinning what containerd pinned does not make it mco's, and unpinning leaves it pinned.
    runtime.pin(&sandbox).await.unwrap();
    runtime.unpin(&sandbox).await.unwrap();
    assert_eq!(runtime.pinned_by_mco().await.unwrap(), [first.clone()].into());
    assert_eq!(pinned(sandbox.clone()).await, Some(true));

    runtime.unpin(&first).await.unwrap();
    eventually("the CRI to report the first image unpinned", || async {
        satisfying(pinned(first.clone()).await, |p| *p == Some(false))
    })
    .await;
    assert!(runtime.pinned_by_mco().await.unwrap().is_empty());
    // Unpinning what is not pinned, or not there, is nothing.
    runtime.unpin(&second).await.unwrap();
    runtime.unpin(&format!("{}/lab/gone@sha256:{}", registry.host(), "0".repeat(64))).await.unwrap();

    // A digest the registry does not have: the error names the image and says so.
    let missing = format!("{}/lab/first@sha256:{}", registry.host(), "1".repeat(64));
    let failed = runtime.pull(&missing, auth::for_image(&secret, &missing).unwrap()).await.unwrap_err();
    let message = format!("{failed:#}");
    assert!(message.contains(&missing) && message.contains("not found"), "{message}");
    let not_there = runtime.pin(&missing).await.unwrap_err();
    assert!(format!("{not_there:#}").contains("is not in containerd"), "{not_there:#}");
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
