//! Where the lab keeps its state: one directory holding the API server's data, the registry,
//! the images, the certificates, every node's root and sysroot, and the logs.

use std::path::{Path, PathBuf};

/// Overrides the default state directory.
pub const DIR_ENV: &str = "MCO_LAB_DIR";

/// `$MCO_LAB_DIR`, else `$XDG_STATE_HOME/mco/lab`, else `~/.local/state/mco/lab`.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(DIR_ENV) {
        return dir.into();
    }
    let state_home = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/var/lib"));
    state_home.join("mco/lab")
}

/// The paths inside a lab's state directory.
#[derive(Debug, Clone)]
pub struct Layout {
    pub dir: PathBuf,
}

/// One lab node's directories.
#[derive(Debug, Clone)]
pub struct NodeDirs {
    /// The node's OSTree sysroot (its disk): the deployments it boots, their `/etc` and the
    /// stateroot's `/var`.
    pub sysroot: PathBuf,
}

impl Layout {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Layout { dir: dir.into() }
    }

    /// Administrator kubeconfig of the lab's API server.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// What the supervisor reports (see [`crate::state::LabState`]).
    pub fn state_file(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("supervisor.pid")
    }

    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }

    pub fn log(&self, name: &str) -> PathBuf {
        self.logs().join(format!("{name}.log"))
    }

    pub fn certs(&self) -> PathBuf {
        self.dir.join("certs")
    }

    pub fn registry(&self) -> PathBuf {
        self.dir.join("registry")
    }

    /// The signature store's files: images signed into it with `lookaside-staging: file://DIR`.
    pub fn signatures(&self) -> PathBuf {
        self.dir.join("signatures")
    }

    /// `registries.conf` for the image tools: the lab registry speaks plain HTTP.
    pub fn registries_conf(&self) -> PathBuf {
        self.dir.join("registries.conf")
    }

    /// OSTree repository and trees the images are built from.
    pub fn images(&self) -> PathBuf {
        self.dir.join("images")
    }

    /// The root filesystem of the lab's OS images: the nodes' userland (a link to the cached
    /// `hack/image.sh --node-userland`): systemd, a shell and coreutils (which `RUN` steps of image
    /// builds find), runc and the CNI plugins.
    pub fn userland(&self) -> PathBuf {
        self.images().join("userland.tar")
    }

    /// Shims first on the PATH of Ignition (a no-op `setfiles`: lab roots have no SELinux).
    pub fn bin(&self) -> PathBuf {
        self.dir.join("bin")
    }

    /// Node requests of `mco lab add-node` waiting for the supervisor ([`crate::request`]).
    pub fn requests(&self) -> PathBuf {
        self.dir.join("requests")
    }

    /// The boot images' installed disks ([`crate::disk`]).
    pub fn disks(&self) -> PathBuf {
        self.dir.join("disks")
    }

    /// The installed disk of the boot image `image` (`HOST/NAME@sha256:HEX`), named by its digest.
    pub fn disk(&self, image: &str) -> PathBuf {
        let name = image.rsplit_once('@').map_or(image, |(_, digest)| digest);
        self.disks().join(name.replace(['/', ':'], "-"))
    }

    /// One directory per node, named after it.
    pub fn nodes(&self) -> PathBuf {
        self.dir.join("nodes")
    }

    pub fn node(&self, name: &str) -> NodeDirs {
        let dir = self.nodes().join(name);
        NodeDirs { sysroot: dir.join("sysroot") }
    }
}
