//! The runtime client against a real containerd v2 (built by hack/kube-binaries.sh) and a real
//! registry that asks for credentials: pulls through the CRI with the pull secret's credentials,
//! pins and unpins as the CRI then reports them, and names the image in every failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mco_cri::{Runtime, auth};
use mco_os::registry::LocalRegistry;
use mco_testenv::{eventually, find_binaries, satisfying};

const USER: &str = "puller";
const PASSWORD: &str = "pull-pw";

/// A containerd serving its CRI on a socket of its own, with the registry at `registry` reached
/// over plain HTTP (as the lab's nodes reach theirs).
struct Containerd {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Containerd {
    fn start(dir: &Path, registry: &str) -> Containerd {
        let [containerd] = find_binaries(["containerd"]).unwrap();
        let hosts = dir.join("certs.d").join(registry);
        std::fs::create_dir_all(&hosts).unwrap();
        std::fs::write(
            hosts.join("hosts.toml"),
            format!("server = \"http://{registry}\"\n[host.\"http://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"),
        )
        .unwrap();
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                r#"version = 3
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = "{certs}"
"#,
                root = dir.join("root").display(),
                state = dir.join("state").display(),
                socket = socket.display(),
                certs = dir.join("certs.d").display(),
            ),
        )
        .unwrap();
        let log = dir.join("containerd.log");
        let child = Command::new(containerd)
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Containerd { child, socket, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn connect(&self) -> Runtime {
        // containerd makes its socket after loading its plugins: ask until the CRI answers.
        eventually("containerd's CRI to answer", || async {
            let runtime = Runtime::connect(&self.socket).await.map_err(|e| format!("{e:#}\n{}", self.log()))?;
            runtime.image("127.0.0.1:1/none:1").await.map_err(|e| format!("{e:#}\n{}", self.log()))?;
            Ok::<_, String>(runtime)
        })
        .await
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pushes an image of one file, built with buildah from scratch, as `HOST/NAME:TAG` with the
/// registry's credentials; returns its reference by digest.
fn push_image(dir: &Path, registry: &LocalRegistry, name_tag: &str) -> String {
    let storage = dir.join("buildah");
    let buildah = |args: &[&str]| {
        let out = Command::new("buildah")
            .arg("--root")
            .arg(&storage)
            .arg("--runroot")
            .arg(&storage)
            .args(["--storage-driver", "vfs"])
            .args(args)
            .env("CONTAINERS_REGISTRIES_CONF", &registry.registries_conf)
            .output()
            .unwrap();
        assert!(out.status.success(), "buildah {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let file = dir.join(format!("{}.txt", name_tag.replace(['/', ':'], "-")));
    std::fs::write(&file, name_tag).unwrap();
    let container = buildah(&["from", "scratch"]);
    buildah(&["copy", &container, file.to_str().unwrap(), "/content.txt"]);
    let local = format!("localhost/{name_tag}");
    buildah(&["commit", "--rm", "--format", "oci", &container, &local]);
    let digest_file = dir.join("digest");
    let to = format!("docker://{}/{name_tag}", registry.host());
    buildah(&[
        "push",
        "--creds",
        &format!("{USER}:{PASSWORD}"),
        "--digestfile",
        digest_file.to_str().unwrap(),
        &local,
        &to,
    ]);
    let digest = std::fs::read_to_string(digest_file).unwrap();
    let repository = name_tag.split(':').next().unwrap();
    format!("{}/{repository}@{}", registry.host(), digest.trim())
}

#[tokio::test]
async fn images_are_pulled_with_the_pull_secret_pinned_and_unpinned_as_the_cri_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let htpasswd = format!("{USER}:{}\n", bcrypt::hash(PASSWORD, 4).unwrap());
    let registry = LocalRegistry::start_authenticated(&tmp.path().join("registry"), &htpasswd).unwrap();
    let first = push_image(tmp.path(), &registry, "lab/first:1");
    let second = push_image(tmp.path(), &registry, "lab/second:1");
    let containerd = Containerd::start(&tmp.path().join("containerd"), &registry.host());
    let runtime = containerd.connect().await;

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
    for image in [&first, &second] {
        let credentials = auth::for_image(&secret, image).unwrap();
        assert!(credentials.is_some(), "the secret has credentials for {image}");
        runtime.pull(image, credentials).await.unwrap();
        let pulled = runtime.image(image).await.unwrap().expect("pulled");
        assert!(!pulled.pinned, "a pulled image is not pinned: {pulled:?}");
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
