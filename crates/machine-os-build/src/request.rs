//! What one build is made of (upstream `buildrequest`): the MachineOSBuild for a MachineOSConfig
//! and its pool's rendered config, under upstream's hashed name; the Containerfile that bakes the
//! rendered config into the pool's base OS image and adds the admin's content; the ConfigMaps
//! that carry the inputs; the Job whose pod runs `mco image build-machine-os` with buildah.

use std::collections::BTreeMap;
use std::io::Write as _;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, KeyToPath, PodSpec, PodTemplateSpec,
    SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use mco_api::constants::{
    EPHEMERAL_BUILD_OBJECT_LABEL, MACHINE_OS_BUILD_LABEL, MACHINE_OS_CONFIG_LABEL, MCFG_API_VERSION,
    ON_CLUSTER_LAYERING_LABEL, RELEASE_IMAGE_VERSION_ANNOTATION, RENDERED_IMAGE_PUSH_SECRET_ANNOTATION,
    RENDERED_MACHINE_CONFIG_LABEL, RENDERED_PREFIX, TARGET_MACHINE_CONFIG_POOL_LABEL,
};
use mco_api::machineconfiguration::{ContainerfileArch, MachineOSBuildSpec, MachineOSBuildStatus, NameReference};
use mco_api::{MachineConfig, MachineConfigPool, MachineOSBuild, MachineOSConfig};
use mco_ignition::v3;
use serde_json::{Value, json};

/// The build pod's container, as upstream names its build container.
pub const BUILD_CONTAINER: &str = "image-build";
/// The service account build pods run as: no API access at all (its token is not mounted).
pub const BUILDER_SERVICE_ACCOUNT: &str = "machine-os-builder";
/// Where the build pod finds its inputs.
const INPUTS: &str = "/etc/mco-build";
/// The node files the build pod uses as its own image tools' configuration, as upstream does.
const NODE_CONTAINER_CONFIGS: [(&str, &str); 2] =
    [("etc-registries", "/etc/containers/registries.conf"), ("etc-policy", "/etc/containers/policy.json")];

/// Why no build can be made for a MachineOSConfig (the reason is the MachineOSConfig's to fix).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("MachineConfigPool {pool} has no rendered config yet")]
    NotRendered { pool: String },
    #[error("MachineConfig {0} is not a rendered MachineConfig")]
    NotRenderedConfig(String),
    #[error("rendered MachineConfig {0} names no OS image (spec.osImageURL) to build from")]
    NoBaseImage(String),
    #[error("renderedImagePushSpec {0:?} is not a pushable image name: host[:port]/path[:tag], without a digest")]
    PushSpec(String),
    #[error("MachineOSConfig {config} has {count} Containerfiles for {arch:?}; at most one per architecture")]
    Containerfiles { config: String, arch: ContainerfileArch, count: usize },
    #[error("rendered MachineConfig {name}: {error}")]
    Config { name: String, error: String },
}

/// Where a build pod runs, beyond what upstream's pod says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildPod {
    /// The pod uses its node's network (a registry only on the nodes' loopback, as the lab's).
    pub host_network: bool,
    /// buildah's storage on a memory-backed emptyDir: vfs writes a full copy of the OS tree at
    /// each step (the base image pulled, each stage's container and commit), which a disk makes
    /// seconds slower and which contends with everything else on the node; it costs that much
    /// memory (about 2 GB for a 500-MB OS) while the build runs.
    pub scratch_in_memory: bool,
}

/// A MachineOSConfig with its pool and the pool's rendered config: one build's inputs.
#[derive(Debug, Clone, Copy)]
pub struct BuildRequest<'a> {
    pub config: &'a MachineOSConfig,
    pub pool: &'a MachineConfigPool,
    pub rendered: &'a MachineConfig,
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

impl<'a> BuildRequest<'a> {
    /// Checks the inputs belong together: the rendered config is the pool's current one.
    pub fn new(
        config: &'a MachineOSConfig,
        pool: &'a MachineConfigPool,
        rendered: &'a MachineConfig,
    ) -> Result<Self, RequestError> {
        let rendered_name = name_of(&rendered.metadata);
        if !rendered_name.starts_with(RENDERED_PREFIX) {
            return Err(RequestError::NotRenderedConfig(rendered_name.to_string()));
        }
        if rendered.spec.os_image_url.is_empty() {
            return Err(RequestError::NoBaseImage(rendered_name.to_string()));
        }
        push_repository(&config.spec.rendered_image_push_spec)?;
        Ok(BuildRequest { config, pool, rendered })
    }

    /// The rendered config the pool is on, if it was rendered.
    pub fn pool_target(pool: &MachineConfigPool) -> Result<&str, RequestError> {
        pool.spec
            .configuration
            .as_ref()
            .and_then(|c| c.name.as_deref())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| RequestError::NotRendered { pool: name_of(&pool.metadata).to_string() })
    }

    fn config_name(&self) -> &str {
        name_of(&self.config.metadata)
    }

    fn rendered_name(&self) -> &str {
        name_of(&self.rendered.metadata)
    }

    fn pool_name(&self) -> &str {
        &self.config.spec.machine_config_pool.name
    }

    fn annotation(&self, key: &str) -> &str {
        self.rendered.metadata.annotations.as_ref().and_then(|a| a.get(key)).map_or("", String::as_str)
    }

    /// Upstream's `<MachineOSConfig>-<md5>`: salt, then the ghodss YAML of the pool's
    /// `spec.configuration`, the MachineOSConfig's spec (a missing Containerfile list is Go's
    /// `null`) and the base images. The same inputs give the same name, so a build is found
    /// again rather than repeated; any change of them is a new build.
    pub fn build_name(&self) -> String {
        // Go's struct: never null, and every field `omitempty`.
        let mut configuration = serde_json::to_value(&self.pool.spec.configuration).unwrap_or(Value::Null);
        if configuration.is_null() {
            configuration = json!({});
        }
        if let Some(fields) = configuration.as_object_mut() {
            fields.retain(|_, v| !(v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty)));
        }
        let mut spec = serde_json::to_value(&self.config.spec).unwrap_or(Value::Null);
        if let Some(fields) = spec.as_object_mut() {
            fields.entry("containerFile").or_insert(Value::Null);
        }
        // (A tag resolved again on request is mco's: upstream's names stay for every other build.)
        let base = self.pool.resolved_os_image(self.rendered_name()).unwrap_or(&self.rendered.spec.os_image_url);
        let images = json!({
            "BaseOSContainerImage": base,
            "BaseOSExtensionsContainerImage": self.rendered.spec.base_os_extensions_container_image,
            "OSImageURL": "",
            "ReleaseVersion": self.annotation(RELEASE_IMAGE_VERSION_ANNOTATION),
        });
        // Names, image references and Containerfile text hold no character ghodss refuses.
        let hash = mco_render::name::salted_yaml_md5(&[configuration, spec, images])
            .expect("ghodss accepts every string an API object holds here");
        format!("{}-{hash}", self.config_name())
    }

    /// The labels of the MachineOSBuild and of every object of its build.
    fn labels(&self, build: &str) -> BTreeMap<String, String> {
        [
            (TARGET_MACHINE_CONFIG_POOL_LABEL, self.pool_name()),
            (RENDERED_MACHINE_CONFIG_LABEL, self.rendered_name()),
            (MACHINE_OS_CONFIG_LABEL, self.config_name()),
            (MACHINE_OS_BUILD_LABEL, build),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The new MachineOSBuild, as upstream's `NewMachineOSBuild`: its push spec is the
    /// MachineOSConfig's with the build's name as tag.
    pub fn machine_os_build(&self, now: &Time) -> MachineOSBuild {
        let name = self.build_name();
        let repository =
            push_repository(&self.config.spec.rendered_image_push_spec).expect("checked by BuildRequest::new");
        let mut build = MachineOSBuild::new(
            &name,
            MachineOSBuildSpec {
                machine_config: NameReference { name: self.rendered_name().to_string() },
                machine_os_config: NameReference { name: self.config_name().to_string() },
                rendered_image_push_spec: format!("{repository}:{name}"),
            },
        );
        build.metadata.labels = Some(self.labels(&name));
        build.metadata.annotations = Some(BTreeMap::from([(
            RENDERED_IMAGE_PUSH_SECRET_ANNOTATION.to_string(),
            self.config.spec.rendered_image_push_secret.name.clone(),
        )]));
        build.status = Some(MachineOSBuildStatus { build_start: Some(now.clone()), ..Default::default() });
        build
    }

    /// The admin's Containerfile for `arch`: its own entry, else the `NoArch` one.
    fn user_containerfile(&self, arch: ContainerfileArch) -> Result<&str, RequestError> {
        let all = self.config.spec.containerfile.as_deref().unwrap_or_default();
        for wanted in [arch, ContainerfileArch::NoArch] {
            let of_arch: Vec<_> =
                all.iter().filter(|c| c.containerfile_arch.unwrap_or(ContainerfileArch::NoArch) == wanted).collect();
            match of_arch.as_slice() {
                [] => continue,
                [one] => return Ok(&one.content),
                more => {
                    return Err(RequestError::Containerfiles {
                        config: self.config_name().to_string(),
                        arch: wanted,
                        count: more.len(),
                    });
                }
            }
        }
        Ok("")
    }

    /// The rendered config's Ignition config.
    fn ignition(&self) -> Result<v3::Config, RequestError> {
        let error = |error: String| RequestError::Config { name: self.rendered_name().to_string(), error };
        match &self.rendered.spec.config {
            None => Ok(v3::Config::new(v3::MAX_VERSION)),
            Some(config) => serde_json::from_value(config.clone()).map_err(|e| error(e.to_string())),
        }
    }

    /// The build's Containerfile, upstream's template in mco's form: stage `configs` is the base
    /// OS image with the rendered config's files and units copied in (the build pod writes them
    /// under `machineconfig/`, as the node daemon would; a file owned by someone else than root
    /// is copied again with `--chown`, resolved in the image), then upstream's labels, then the
    /// admin's content (which may start `FROM configs AS final`, as upstream's examples do).
    pub fn containerfile(&self, arch: ContainerfileArch) -> Result<String, RequestError> {
        // The digest the controller checked the base image at: resolved again on request (recorded
        // on the pool), else pinned on the rendered config.
        let base = match self.pool.resolved_os_image(self.rendered_name()) {
            Some(resolved) => resolved,
            None => self
                .rendered
                .deployed_os_image()
                .map_err(|e| RequestError::Config { name: self.rendered_name().to_string(), error: e.to_string() })?,
        };
        let mut text = format!(
            "# Generated by mco for MachineOSBuild {build} (MachineOSConfig {config}).\n\
             FROM {base} AS configs\n\
             COPY ./machineconfig/ /\n",
            build = self.build_name(),
            config = self.config_name(),
        );
        let invalid = |error: String| RequestError::Config { name: self.rendered_name().to_string(), error };
        for file in self.ignition()?.storage.files {
            let owner = |o: &v3::NodeOwner| match (&o.name, o.id) {
                (Some(name), _) if !name.is_empty() => Some(name.clone()),
                (_, Some(id)) if id != 0 => Some(id.to_string()),
                _ => None,
            };
            let (user, group) = (owner(&file.user), owner(&file.group));
            if user.is_none() && group.is_none() {
                continue;
            }
            // Names go into an instruction as they are; paths in its JSON form, quoted.
            let plain = |name: &String| name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if let Some(bad) = user.iter().chain(&group).find(|n| !plain(n)) {
                return Err(invalid(format!("file {:?} has an owner the image build cannot name: {bad:?}", file.path)));
            }
            // COPY expands variables and globs in its sources, even in the JSON form.
            if file.path.chars().any(|c| c.is_control() || "$*?[\\".contains(c)) {
                let why = "control characters or characters COPY would expand ($ * ? [ \\)";
                return Err(invalid(format!("file path {:?} of an owner other than root has {why}", file.path)));
            }
            let user = user.unwrap_or_else(|| "0".into());
            let group = group.map_or_else(String::new, |g| format!(":{g}"));
            let quoted = |p: String| Value::String(p).to_string();
            let (from, to) = (quoted(format!("./machineconfig{}", file.path)), quoted(file.path.clone()));
            text.push_str(&format!("COPY --chown={user}{group} [{from}, {to}]\n"));
        }
        text.push_str(&format!(
            "LABEL machineconfig={}\nLABEL machineconfigpool={}\nLABEL baseOSContainerImage={base}\n",
            self.rendered_name(),
            self.pool_name(),
        ));
        let user = self.user_containerfile(arch)?;
        if !user.trim().is_empty() {
            text.push('\n');
            text.push_str(user);
            if !user.ends_with('\n') {
                text.push('\n');
            }
        }
        Ok(text)
    }

    /// The ConfigMaps the build pod reads (upstream's names): the Containerfile, the rendered
    /// MachineConfig gzipped, and the node's registries.conf and policy.json from the rendered
    /// config when it has them, so the build pulls and pushes as the nodes will.
    pub fn config_maps(
        &self,
        build: &MachineOSBuild,
        namespace: &str,
        arch: ContainerfileArch,
    ) -> Result<Vec<ConfigMap>, RequestError> {
        let name = name_of(&build.metadata);
        let meta = |prefix: &str| self.object_meta(build, namespace, &format!("{prefix}-{name}"));
        let mut maps = vec![
            ConfigMap {
                metadata: meta("containerfile"),
                data: Some(BTreeMap::from([("Containerfile".to_string(), self.containerfile(arch)?)])),
                ..Default::default()
            },
            ConfigMap {
                metadata: meta("mc"),
                binary_data: Some(BTreeMap::from([(
                    "machineconfig.json.gz".to_string(),
                    ByteString(gzip(&serde_json::to_vec(self.rendered).unwrap_or_default())),
                )])),
                ..Default::default()
            },
        ];
        let ignition = self.ignition()?;
        for (prefix, path) in NODE_CONTAINER_CONFIGS {
            let Some(file) = ignition.storage.files.iter().find(|f| f.path == path) else { continue };
            let contents = mco_ignition::dataurl::decode_contents(&file.contents).map_err(|e| {
                RequestError::Config { name: self.rendered_name().to_string(), error: format!("{path}: {e}") }
            })?;
            let file_name = path.rsplit('/').next().unwrap_or(path);
            maps.push(ConfigMap {
                metadata: meta(prefix),
                data: Some(BTreeMap::from([(file_name.to_string(), String::from_utf8_lossy(&contents).into_owned())])),
                ..Default::default()
            });
        }
        Ok(maps)
    }

    /// Metadata of an object of `build`'s build, owned by the MachineOSBuild so that deleting
    /// the build deletes them (the API server's garbage collector).
    fn object_meta(&self, build: &MachineOSBuild, namespace: &str, name: &str) -> ObjectMeta {
        let build_name = name_of(&build.metadata);
        let mut labels = self.labels(build_name);
        labels.insert(EPHEMERAL_BUILD_OBJECT_LABEL.to_string(), String::new());
        labels.insert(ON_CLUSTER_LAYERING_LABEL.to_string(), String::new());
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                (MACHINE_OS_CONFIG_LABEL.to_string(), self.config_name().to_string()),
                (MACHINE_OS_BUILD_LABEL.to_string(), build_name.to_string()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: MCFG_API_VERSION.to_string(),
                kind: "MachineOSBuild".to_string(),
                name: build_name.to_string(),
                uid: build.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        }
    }

    /// The Job that builds `build` (upstream `build-<MachineOSBuild>`): one privileged pod
    /// running `image` (mco's own) as `mco image build-machine-os`, buildah with chroot isolation
    /// and vfs storage on an emptyDir (placed as `pod` says); it writes the pushed image's
    /// digested pull spec, or why the build failed, as its termination message. `config_maps`
    /// are [`Self::config_maps`].
    /// No retries: a build that fails says why at once; a new build is asked for with the
    /// rebuild annotation or any change of its inputs.
    pub fn job(
        &self,
        build: &MachineOSBuild,
        namespace: &str,
        image: &str,
        pod: BuildPod,
        config_maps: &[ConfigMap],
    ) -> Job {
        let name = format!("build-{}", name_of(&build.metadata));
        let mut mounts = Vec::new();
        let mut volumes = Vec::new();
        let mut args: Vec<String> = vec!["image".into(), "build-machine-os".into()];
        for map in config_maps {
            let map_name = name_of(&map.metadata);
            let suffix = format!("-{}", name_of(&build.metadata));
            let volume = map_name.strip_suffix(&suffix).unwrap_or(map_name).to_string();
            let mount = match NODE_CONTAINER_CONFIGS.iter().find(|(prefix, _)| *prefix == volume) {
                // The node's file replaces the image's own.
                Some((_, path)) => VolumeMount {
                    name: volume.clone(),
                    mount_path: path.to_string(),
                    sub_path: path.rsplit('/').next().map(str::to_string),
                    read_only: Some(true),
                    ..Default::default()
                },
                None => VolumeMount {
                    name: volume.clone(),
                    mount_path: format!("{INPUTS}/{volume}"),
                    read_only: Some(true),
                    ..Default::default()
                },
            };
            mounts.push(mount);
            volumes.push(Volume {
                name: volume,
                config_map: Some(ConfigMapVolumeSource { name: map_name.to_string(), ..Default::default() }),
                ..Default::default()
            });
        }
        args.extend([
            "--machine-config".into(),
            format!("{INPUTS}/mc/machineconfig.json.gz"),
            "--containerfile".into(),
            format!("{INPUTS}/containerfile/Containerfile"),
            "--to".into(),
            build.spec.rendered_image_push_spec.clone(),
        ]);
        // As upstream: the base image pull secret for the build's pulls, the push secret for the
        // push (the same registry host may need different credentials for each).
        let secrets = [
            ("base-pull-creds", "--pull-authfile", self.config.spec.base_image_pull_secret.as_ref()),
            ("push-creds", "--push-authfile", Some(&self.config.spec.rendered_image_push_secret)),
        ];
        for (volume, flag, secret) in secrets {
            let Some(secret) = secret else { continue };
            args.extend([flag.into(), format!("{INPUTS}/{volume}/config.json")]);
            mounts.push(VolumeMount {
                name: volume.into(),
                mount_path: format!("{INPUTS}/{volume}"),
                read_only: Some(true),
                ..Default::default()
            });
            volumes.push(Volume {
                name: volume.into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.name.clone()),
                    items: Some(vec![KeyToPath {
                        key: ".dockerconfigjson".into(),
                        path: "config.json".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        args.extend(["--termination-log".into(), "/dev/termination-log".into()]);
        // buildah's storage and temporary files: the container's own filesystem may be small.
        mounts.push(VolumeMount { name: "scratch".into(), mount_path: "/var/tmp".into(), ..Default::default() });
        volumes.push(Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: pod.scratch_in_memory.then(|| "Memory".to_string()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let meta = self.object_meta(build, namespace, &name);
        Job {
            metadata: meta.clone(),
            spec: Some(JobSpec {
                backoff_limit: Some(0),
                completions: Some(1),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: meta.labels,
                        annotations: meta.annotations,
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        restart_policy: Some("Never".into()),
                        service_account_name: Some(BUILDER_SERVICE_ACCOUNT.into()),
                        automount_service_account_token: Some(false),
                        host_network: pod.host_network.then_some(true),
                        termination_grace_period_seconds: Some(10),
                        containers: vec![Container {
                            name: BUILD_CONTAINER.into(),
                            image: Some(image.to_string()),
                            args: Some(args),
                            env: Some(
                                [("TMPDIR", "/var/tmp"), ("MCO_LOG", "info")]
                                    .map(|(name, value)| EnvVar {
                                        name: name.into(),
                                        value: Some(value.into()),
                                        ..Default::default()
                                    })
                                    .into(),
                            ),
                            // Rootful buildah with chroot isolation mounts and unshares.
                            security_context: Some(SecurityContext { privileged: Some(true), ..Default::default() }),
                            termination_message_policy: Some("FallbackToLogsOnError".into()),
                            volume_mounts: Some(mounts),
                            ..Default::default()
                        }],
                        volumes: Some(volumes),
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// `host[:port]/path` of a push spec (its tag dropped): upstream parses it as a canonical
/// reference (a registry host first) without a digest.
fn push_repository(spec: &str) -> Result<&str, RequestError> {
    let bad = || RequestError::PushSpec(spec.to_string());
    if spec.contains('@') || spec.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    let (host, path) = spec.split_once('/').ok_or_else(bad)?;
    let host_like = host == "localhost" || host.contains('.') || host.contains(':');
    if !host_like || path.is_empty() {
        return Err(bad());
    }
    let last = path.rsplit('/').next().unwrap_or(path);
    let repository = match last.rsplit_once(':') {
        Some((_, "")) => return Err(bad()),
        Some((_, tag)) => &spec[..spec.len() - tag.len() - 1],
        None => spec,
    };
    let valid_path = repository[host.len() + 1..].split('/').all(|c| {
        !c.is_empty() && c.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
    });
    if !valid_path {
        return Err(bad());
    }
    Ok(repository)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests;
