//! Reading Kubernetes manifests from files and directories: multi-document YAML or JSON, `List`
//! objects, typed by `apiVersion`/`kind`.

use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mco_api::constants::OS_IMAGE_STREAM_NAME;
use mco_api::{
    ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool, MachineConfiguration,
    MachineOSBuild, MachineOSConfig, MachineSet, OSImageStream,
};
use serde_json::Value;

/// One object read from a manifest.
#[derive(Debug, Clone)]
pub enum Object {
    MachineConfig(Box<MachineConfig>),
    MachineConfigPool(Box<MachineConfigPool>),
    ControllerConfig(Box<ControllerConfig>),
    MachineConfiguration(Box<MachineConfiguration>),
    MachineOSConfig(Box<MachineOSConfig>),
    MachineOSBuild(Box<MachineOSBuild>),
    MachineSet(Box<MachineSet>),
    KubeletConfig(Box<KubeletConfig>),
    ContainerRuntimeConfig(Box<ContainerRuntimeConfig>),
    OSImageStream(Box<OSImageStream>),
    /// A `config.openshift.io/v1` object the kubelet config controller reads (FeatureGate,
    /// APIServer, Node), kept as it is: only a few of its fields matter here.
    ClusterConfig {
        kind: String,
        object: Box<Value>,
    },
}

impl Object {
    /// The kind and metadata of a typed object (a cluster configuration object is kept as it is).
    pub fn kind_and_meta(&self) -> Option<(&'static str, &ObjectMeta)> {
        Some(match self {
            Object::MachineConfig(o) => ("MachineConfig", &o.metadata),
            Object::MachineConfigPool(o) => ("MachineConfigPool", &o.metadata),
            Object::ControllerConfig(o) => ("ControllerConfig", &o.metadata),
            Object::MachineConfiguration(o) => ("MachineConfiguration", &o.metadata),
            Object::MachineOSConfig(o) => ("MachineOSConfig", &o.metadata),
            Object::MachineOSBuild(o) => ("MachineOSBuild", &o.metadata),
            Object::MachineSet(o) => ("MachineSet", &o.metadata),
            Object::KubeletConfig(o) => ("KubeletConfig", &o.metadata),
            Object::ContainerRuntimeConfig(o) => ("ContainerRuntimeConfig", &o.metadata),
            Object::OSImageStream(o) => ("OSImageStream", &o.metadata),
            Object::ClusterConfig { .. } => return None,
        })
    }

    /// What the API server keeps unique: kind, namespace (MachineSets) and name.
    fn identity(&self) -> (String, Option<String>, String) {
        if let Object::ClusterConfig { kind, object } = self {
            let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            return (kind.clone(), None, name.to_string());
        }
        let (kind, meta) = self.kind_and_meta().expect("every typed object has metadata");
        (kind.to_string(), meta.namespace.clone(), meta.name.clone().unwrap_or_default())
    }
}

/// Where an object came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    /// 1-based document number within the file.
    pub document: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {})", self.file.display(), self.document)
    }
}

/// A manifest that could not be read as an object we know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub origin: Origin,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

/// Everything read from a set of paths.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub objects: Vec<(Origin, Object)>,
    pub problems: Vec<Problem>,
}

impl Manifests {
    /// Every object `pick` takes, in manifest order.
    fn all<T: Clone>(&self, pick: impl Fn(&Object) -> Option<&T>) -> Vec<T> {
        self.objects.iter().filter_map(|(_, o)| pick(o).cloned()).collect()
    }

    pub fn machine_configs(&self) -> Vec<MachineConfig> {
        self.all(|o| if let Object::MachineConfig(mc) = o { Some(&**mc) } else { None })
    }

    /// Moves the MachineConfigs out, in manifest order: for a caller that needs them once, as
    /// they hold all the file contents.
    pub fn take_machine_configs(&mut self) -> Vec<MachineConfig> {
        let (machine_configs, others) = std::mem::take(&mut self.objects)
            .into_iter()
            .partition::<Vec<_>, _>(|(_, o)| matches!(o, Object::MachineConfig(_)));
        self.objects = others;
        machine_configs
            .into_iter()
            .filter_map(|(_, o)| if let Object::MachineConfig(mc) = o { Some(*mc) } else { None })
            .collect()
    }

    pub fn pools(&self) -> Vec<MachineConfigPool> {
        self.all(|o| if let Object::MachineConfigPool(p) = o { Some(&**p) } else { None })
    }

    pub fn controller_configs(&self) -> Vec<ControllerConfig> {
        self.all(|o| if let Object::ControllerConfig(c) = o { Some(&**c) } else { None })
    }

    pub fn kubelet_configs(&self) -> Vec<KubeletConfig> {
        self.all(|o| if let Object::KubeletConfig(k) = o { Some(&**k) } else { None })
    }

    pub fn container_runtime_configs(&self) -> Vec<ContainerRuntimeConfig> {
        self.all(|o| if let Object::ContainerRuntimeConfig(c) = o { Some(&**c) } else { None })
    }

    /// The OSImageStream `cluster`, if given.
    pub fn os_image_stream(&self) -> Option<&OSImageStream> {
        self.objects.iter().find_map(|(_, o)| match o {
            Object::OSImageStream(s) if s.metadata.name.as_deref() == Some(OS_IMAGE_STREAM_NAME) => Some(&**s),
            _ => None,
        })
    }

    /// The `config.openshift.io/v1` object of `kind` named `cluster`, if given.
    pub fn cluster_config(&self, wanted: &str) -> Option<&Value> {
        self.objects.iter().find_map(|(_, o)| match o {
            Object::ClusterConfig { kind, object } if kind == wanted && object["metadata"]["name"] == "cluster" => {
                Some(&**object)
            }
            _ => None,
        })
    }
}

/// The most a manifest file (or standard input) may hold: far beyond any object the API server
/// stores (etcd refuses more than 1.5 MiB), far below what would exhaust memory.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// Reads every `.yaml`, `.yml` and `.json` file under the given paths (directories recursively,
/// in name order). Unreadable files are errors; unreadable documents become problems. Inside
/// directories only regular files are read (a FIFO would block, a device never end) and a
/// directory that contains itself through a link is an error; no file is read past
/// [`MAX_MANIFEST_BYTES`].
pub fn load(paths: &[PathBuf]) -> anyhow::Result<Manifests> {
    let mut files = Vec::new();
    for path in paths {
        if path == Path::new("-") {
            files.push(path.to_path_buf());
        } else {
            collect_files(path, &mut Vec::new(), &mut files)?;
        }
    }
    // Each file is read and parsed on its own; the results are gathered in file order.
    let per_file = mco_render::parallel::map(&files, |file| -> anyhow::Result<Manifests> {
        let text = if file == Path::new("-") {
            read_bounded(std::io::stdin(), "standard input")?
        } else {
            let f = std::fs::File::open(file).map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
            read_bounded(f, &file.display().to_string())?
        };
        let mut manifests = Manifests::default();
        read_documents(file, &text, &mut manifests);
        Ok(manifests)
    });
    let mut manifests = Manifests::default();
    for file_manifests in per_file {
        let file_manifests = file_manifests?;
        manifests.objects.extend(file_manifests.objects);
        manifests.problems.extend(file_manifests.problems);
    }
    refuse_duplicates(&mut manifests);
    Ok(manifests)
}

/// Two objects with one name would be one object on a cluster (the second replacing the first):
/// a second definition is a problem naming both places, and neither is used silently.
fn refuse_duplicates(manifests: &mut Manifests) {
    let mut first: std::collections::HashMap<(String, Option<String>, String), Origin> = Default::default();
    let mut kept = Vec::with_capacity(manifests.objects.len());
    for (origin, object) in std::mem::take(&mut manifests.objects) {
        let identity = object.identity();
        match first.get(&identity) {
            Some(earlier) => {
                let (kind, namespace, name) = &identity;
                let name = namespace.as_ref().map_or(name.clone(), |ns| format!("{ns}/{name}"));
                let message = format!("{kind} {name} is defined twice: here and in {earlier}");
                manifests.problems.push(Problem { origin, message });
            }
            None => {
                first.insert(identity, origin.clone());
                kept.push((origin, object));
            }
        }
    }
    manifests.objects = kept;
}

/// All of `reader` as text, refused past [`MAX_MANIFEST_BYTES`] before more is read.
fn read_bounded(reader: impl std::io::Read, name: &str) -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    reader
        .take(MAX_MANIFEST_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| anyhow::anyhow!("reading {name}: {e}"))?;
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        anyhow::bail!("{name} is larger than {} MiB: not a manifest", MAX_MANIFEST_BYTES >> 20);
    }
    Ok(text)
}

/// Collects the manifests under `path`; `within` holds the (device, inode) of the directories
/// being walked, to tell a loop.
fn collect_files(path: &Path, within: &mut Vec<(u64, u64)>, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    if !meta.is_dir() {
        // A file named on the command line is read whatever it is (`<(kustomize build)` is a pipe).
        let kind = meta.file_type();
        let named = within.is_empty();
        if !named && !kind.is_file() {
            let what = if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_char_device() || kind.is_block_device() {
                "a device"
            } else if kind.is_socket() {
                "a socket"
            } else {
                "not a regular file"
            };
            anyhow::bail!("{} is {what}: only regular files are read from a manifest directory", path.display());
        }
        out.push(path.to_path_buf());
        return Ok(());
    }
    let id = (meta.dev(), meta.ino());
    if within.contains(&id) {
        anyhow::bail!("{} is a directory that contains itself (a link loop)", path.display());
    }
    let entries = std::fs::read_dir(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let mut children: Vec<PathBuf> = entries.collect::<Result<Vec<_>, _>>()?.into_iter().map(|e| e.path()).collect();
    children.sort();
    within.push(id);
    for child in children {
        let is_manifest = child.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
        if child.is_dir() || is_manifest {
            collect_files(&child, within, out)?;
        }
    }
    within.pop();
    Ok(())
}

/// Splits a file into documents and reads them as kubectl does (YAML 1.1 scalars: `0644` is
/// octal; JSON is YAML too).
pub fn read_documents(file: &Path, text: &str, manifests: &mut Manifests) {
    match mco_goser::yaml_documents(text) {
        Ok(documents) => {
            for (index, value) in documents.into_iter().enumerate() {
                if !value.is_null() {
                    read_object(Origin { file: file.to_path_buf(), document: index + 1 }, value, manifests);
                }
            }
        }
        Err(e) => {
            let origin = Origin { file: file.to_path_buf(), document: e.document };
            manifests.problems.push(Problem { origin, message: format!("invalid YAML: {e}") });
        }
    }
}

fn read_object(origin: Origin, value: Value, manifests: &mut Manifests) {
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<unnamed>").to_string();
    if kind == "List" || kind.ends_with("List") && value.get("items").is_some() {
        for item in value.get("items").and_then(Value::as_array).cloned().unwrap_or_default() {
            read_object(origin.clone(), item, manifests);
        }
        return;
    }
    fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<Box<T>, String> {
        serde_path_to_error::deserialize(value).map(Box::new).map_err(|e| format!("{}: {}", e.path(), e.inner()))
    }
    let object = match (api_version.as_str(), kind.as_str()) {
        ("machineconfiguration.openshift.io/v1", "MachineConfig") => typed(value).map(Object::MachineConfig),
        ("machineconfiguration.openshift.io/v1", "MachineConfigPool") => typed(value).map(Object::MachineConfigPool),
        ("machineconfiguration.openshift.io/v1", "ControllerConfig") => typed(value).map(Object::ControllerConfig),
        ("machineconfiguration.openshift.io/v1", "MachineOSConfig") => typed(value).map(Object::MachineOSConfig),
        ("machineconfiguration.openshift.io/v1", "MachineOSBuild") => typed(value).map(Object::MachineOSBuild),
        ("operator.openshift.io/v1", "MachineConfiguration") => typed(value).map(Object::MachineConfiguration),
        ("machine.openshift.io/v1beta1", "MachineSet") => typed(value).map(Object::MachineSet),
        ("machineconfiguration.openshift.io/v1", "KubeletConfig") => typed(value).map(Object::KubeletConfig),
        ("machineconfiguration.openshift.io/v1", "ContainerRuntimeConfig") => {
            typed(value).map(Object::ContainerRuntimeConfig)
        }
        ("machineconfiguration.openshift.io/v1", "OSImageStream") => typed(value).map(Object::OSImageStream),
        ("config.openshift.io/v1", "FeatureGate" | "APIServer" | "Node") => {
            Ok(Object::ClusterConfig { kind: kind.clone(), object: Box::new(value) })
        }
        ("", _) | (_, "") => Err("not a Kubernetes object: apiVersion and kind are required".to_string()),
        _ => Err(format!("unknown kind {kind} in apiVersion {api_version}")),
    };
    match object {
        Ok(object) => manifests.objects.push((origin, object)),
        Err(message) => manifests.problems.push(Problem { origin, message: format!("{kind} {name}: {message}") }),
    }
}
