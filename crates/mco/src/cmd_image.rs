//! `mco image`: OS images on real OSTree — commit a bootable test tree, encapsulate a commit into
//! an OCI image (ostree-ext), inspect an image.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use mco_os::build::{self as derive, AddError};
use mco_os::image::{self, ImageRefError, LayerCompression, PullConfig};
use mco_os::sysroot::{self, SysrootError};
use mco_os::tree::{self, TreeError, TreeSpec};
use serde_json::json;

#[derive(Debug, clap::Subcommand)]
pub enum ImageCommand {
    /// Write a bootable test OS tree (placeholder kernel and initramfs, `/usr/etc`, os-release)
    /// into an empty or new directory.
    TestTree(TestTreeArgs),
    /// Commit a directory to an OSTree repository, marked
    /// bootable like `ostree commit --bootable`; print the commit checksum.
    Commit(CommitArgs),
    /// Encapsulate an OSTree commit into an OCI image; print the manifest digest.
    Encapsulate(EncapsulateArgs),
    /// Import an image as a node would and describe it: digest, commit, version, kernel,
    /// labels and the files (as `ostree ls -R`).
    Inspect(InspectArgs),
    /// Build a derived image, the base image plus one layer of directories and labels, or a
    /// Containerfile with buildah (`-f`); push it and print the manifest digest.
    Build(BuildArgs),
    /// A MachineOSBuild's build (the build pod's command): bake the rendered MachineConfig into
    /// the build context's `machineconfig/` directory, build the Containerfile with buildah, push
    /// it, and write the pushed image by digest (HOST/NAME@sha256:...) to the termination log
    /// and stdout; on failure, the error to the termination log.
    BuildMachineOs(BuildMachineOsArgs),
    /// Install an OS image into an empty OSTree sysroot directory (init, stateroot, import,
    /// deploy with the kernel arguments) and boot it (see `boot`).
    Install(InstallArgs),
    /// Boot the default deployment: write its boot entry's options, `ostree=` resolved to the
    /// deployment directory, to the kernel command line file (a reboot of the machine).
    Boot(SysrootArgs),
    /// List the deployments of an OSTree sysroot: booted (*), pending (staged), image, kernel
    /// arguments.
    Status(SysrootArgs),
}

#[derive(Debug, clap::Args)]
pub struct SysrootArgs {
    /// The OSTree sysroot directory.
    #[arg(long, value_name = "DIR")]
    sysroot: PathBuf,
    /// The kernel command line file naming the booted deployment [default: SYSROOT/.mco-cmdline].
    #[arg(long, value_name = "FILE")]
    cmdline: Option<PathBuf>,
}

impl SysrootArgs {
    fn cmdline(&self) -> PathBuf {
        self.cmdline.clone().unwrap_or_else(|| sysroot::default_cmdline(&self.sysroot))
    }
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    #[command(flatten)]
    target: SysrootArgs,
    /// The OS image, as in osImageURL: HOST/NAME@sha256:DIGEST or oci:DIR[:TAG]
    /// (CONTAINERS_REGISTRIES_CONF applies).
    #[arg(long, value_name = "IMAGE")]
    image: String,
    /// A kernel argument of the deployment, repeatable.
    #[arg(long = "karg", value_name = "ARG")]
    kargs: Vec<String>,
    /// The stateroot (the `--os` of `ostree admin`).
    #[arg(long, value_name = "NAME", default_value = "mco")]
    stateroot: String,
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The base image (`oci:DIR[:TAG]`, `docker://HOST/NAME[:TAG|@DIGEST]`), to add directories to.
    #[arg(long, value_name = "IMAGE", required_unless_present = "file", conflicts_with = "file")]
    from: Option<String>,
    /// A directory to add, repeatable: SRC_DIR:/DEST with DEST under /usr or /etc.
    #[arg(long = "add", value_name = "SRC:DEST", conflicts_with = "file")]
    adds: Vec<String>,
    /// Build this Containerfile instead (`FROM` the base image; `RUN`, `COPY`, ... as in any
    /// container build) with buildah.
    #[arg(short = 'f', long, value_name = "CONTAINERFILE")]
    file: Option<PathBuf>,
    /// An `ARG` value of the Containerfile, repeatable.
    #[arg(long = "build-arg", value_name = "KEY=VALUE", value_parser = parse_label, requires = "file")]
    build_args: Vec<(String, String)>,
    /// Credentials (containers-auth.json) for pulling the Containerfile's base image and pushing.
    #[arg(long, value_name = "FILE", requires = "file")]
    authfile: Option<PathBuf>,
    /// A label of the new image, repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// Destination: `oci:DIR:TAG` or `docker://HOST/NAME:TAG`.
    #[arg(long, value_name = "IMAGE")]
    to: String,
    /// gzip level 1 for the added layer (`--add` builds): bigger, written several times faster.
    #[arg(long, conflicts_with = "file")]
    compression_fast: bool,
    /// The Containerfile's build context (`COPY` sources) [default: the current directory, as for
    /// buildah and podman].
    #[arg(value_name = "CONTEXT", requires = "file")]
    context: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct BuildMachineOsArgs {
    /// The rendered MachineConfig, gzipped JSON.
    #[arg(long, value_name = "FILE")]
    machine_config: PathBuf,
    /// The Containerfile; it finds the baked config in the context's `machineconfig/`
    /// (`COPY ./machineconfig/ /`).
    #[arg(long, value_name = "FILE")]
    containerfile: PathBuf,
    /// Where to push: HOST/NAME:TAG (or docker://HOST/NAME:TAG, oci:DIR:TAG).
    #[arg(long, value_name = "IMAGE")]
    to: String,
    /// Credentials (docker config.json) for the build's pulls (the Containerfile's `FROM`
    /// images): the MachineOSConfig's base image pull secret. Skipped if missing.
    #[arg(long, value_name = "FILE")]
    pull_authfile: Option<PathBuf>,
    /// Credentials (docker config.json) for the push: the MachineOSConfig's rendered image push
    /// secret. Skipped if missing (the push then uses the pull credentials, if any).
    #[arg(long, value_name = "FILE")]
    push_authfile: Option<PathBuf>,
    /// Where to write the result for the pod's status (Kubernetes' termination message): the
    /// pushed image by digest, or the error (its last 4096 bytes).
    #[arg(long, value_name = "FILE")]
    termination_log: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct TestTreeArgs {
    /// Where to write the tree (must not exist or be empty).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Kernel version (`/usr/lib/modules/<KVER>`).
    #[arg(long, value_name = "KVER")]
    kernel: String,
    /// os-release `VERSION_ID`.
    #[arg(long, value_name = "VERSION_ID")]
    version_id: String,
    /// Add this many small files under /usr/share/mco-filler (for benchmarks).
    #[arg(long, value_name = "N", default_value_t = 0)]
    filler_files: usize,
    /// Add the root filesystem in this tarball (e.g. from `mmdebstrap --format=tar`): `/etc` as
    /// `/usr/etc`, `/usr`, `/var` and the merged-/usr links; the test tree's own files stay.
    #[arg(long, value_name = "TAR")]
    userland: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CommitArgs {
    /// The OSTree repository (a bare-user one is created if missing).
    #[arg(long, value_name = "REPO")]
    repo: PathBuf,
    /// The ref to point at the new commit.
    #[arg(long = "ref", value_name = "REF")]
    ostree_ref: String,
    /// The OS version (commit metadata `version`, image label `org.opencontainers.image.version`).
    #[arg(long, value_name = "VERSION")]
    version: String,
    /// The tree to commit (it must hold `/usr/lib/modules/<kver>/vmlinuz`).
    #[arg(long, value_name = "DIR")]
    tree: PathBuf,
    /// Commit metadata copied into the image labels, repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    labels: Vec<(String, String)>,
}

#[derive(Debug, clap::Args)]
pub struct EncapsulateArgs {
    #[arg(long, value_name = "REPO")]
    repo: PathBuf,
    #[arg(long = "ref", value_name = "REF")]
    ostree_ref: String,
    /// Destination: `oci:DIR:TAG` or `docker://HOST/NAME:TAG` (registries.conf and
    /// CONTAINERS_REGISTRIES_CONF apply).
    #[arg(long, value_name = "IMAGE")]
    to: String,
    /// gzip level 1 instead of the default level: a bigger layer, written several times faster
    /// (for images that only cross a fast network, such as the lab's).
    #[arg(long)]
    compression_fast: bool,
}

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// `oci:DIR[:TAG]` or `docker://HOST/NAME[:TAG|@DIGEST]`.
    #[arg(value_name = "IMAGE")]
    image: String,
    #[arg(short, long, value_enum, default_value = "text")]
    output: crate::Report,
}

fn compression(fast: bool) -> LayerCompression {
    if fast { LayerCompression::Fast } else { LayerCompression::Default }
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

pub fn run(cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    let result = match cmd {
        ImageCommand::TestTree(args) => test_tree(args),
        ImageCommand::Commit(args) => commit(args),
        ImageCommand::Encapsulate(args) => mco_os::block_on(image::encapsulate_with(
            &args.repo,
            &args.ostree_ref,
            &args.to,
            &PullConfig::default(),
            compression(args.compression_fast),
        ))?
        .map(|d| println!("{d}")),
        ImageCommand::Inspect(args) => inspect(&args),
        ImageCommand::Build(args) => build(args),
        ImageCommand::BuildMachineOs(args) => build_machine_os(&args),
        ImageCommand::Install(args) => install(&args),
        ImageCommand::Boot(args) => sysroot::boot(&args.sysroot, &args.cmdline()).map(|line| println!("{line}")),
        ImageCommand::Status(args) => status(&args),
    };
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // Refused input (a bad reference, label or tree) is the user's to fix: exit 1.
        Err(e)
            if e.chain().any(|c| {
                c.is::<ImageRefError>()
                    || c.is::<TreeError>()
                    || c.is::<AddError>()
                    || c.is::<SysrootError>()
                    || c.is::<InputError>()
            }) =>
        {
            eprintln!("error: {e:#}");
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e),
    }
}

fn test_tree(args: TestTreeArgs) -> anyhow::Result<()> {
    tree::write_tree(&args.dir, &TreeSpec { kernel_version: args.kernel, version_id: args.version_id })?;
    if let Some(tarball) = &args.userland {
        tree::add_userland(&args.dir, tarball)?;
    }
    tree::write_filler(&args.dir, args.filler_files)
}

fn commit(args: CommitArgs) -> anyhow::Result<()> {
    let labels: BTreeMap<String, String> = args.labels.into_iter().collect();
    let checksum = tree::commit(&args.repo, &args.ostree_ref, &args.tree, &args.version, &labels)?;
    println!("{checksum}");
    Ok(())
}

fn build(args: BuildArgs) -> anyhow::Result<()> {
    let labels: BTreeMap<String, String> = args.labels.into_iter().collect();
    let digest = match args.file {
        Some(containerfile) => {
            let context = args.context.unwrap_or_else(|| PathBuf::from("."));
            let spec = derive::ContainerBuild {
                containerfile,
                context,
                build_args: args.build_args.into_iter().collect(),
                labels,
                to: args.to,
            };
            derive::build_containerfile(&spec, &PullConfig { authfile: args.authfile, ..Default::default() })?
        }
        None => {
            let from = args.from.context("--from or --file is required")?;
            let adds = args.adds.iter().map(|a| derive::parse_add(a)).collect::<Result<Vec<_>, _>>()?;
            derive::build(&from, &adds, &labels, &args.to, compression(args.compression_fast))?
        }
    };
    println!("{digest}");
    Ok(())
}

/// An input file of `build-machine-os` that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
struct InputError {
    path: String,
    reason: String,
}

impl InputError {
    fn new(path: &Path, reason: impl std::fmt::Display) -> Self {
        InputError { path: path.display().to_string(), reason: reason.to_string() }
    }
}

/// Kubernetes keeps at most this many bytes of a termination message.
const TERMINATION_MESSAGE_MAX: usize = 4096;

fn build_machine_os(args: &BuildMachineOsArgs) -> anyhow::Result<()> {
    let result = build_machine_os_image(args);
    let message = match &result {
        Ok(pushed) => pushed.clone(),
        Err(e) => termination_message(&format!("{e:#}")),
    };
    if let Some(log) = &args.termination_log {
        let written = std::fs::write(log, &message).with_context(|| format!("Writing {}", log.display()));
        match (&result, written) {
            (Ok(_), Err(e)) => return Err(e),
            (Err(_), Err(e)) => tracing::warn!("{e:#}"),
            (_, Ok(())) => {}
        }
    }
    let pushed = result?;
    println!("{pushed}");
    Ok(())
}

/// Bakes, builds and pushes; the pushed image by digest.
fn build_machine_os_image(args: &BuildMachineOsArgs) -> anyhow::Result<String> {
    let to = if args.to.starts_with("docker://") || args.to.starts_with("oci:") {
        args.to.clone()
    } else {
        format!("docker://{}", args.to)
    };
    let to_ref = image::parse_destination(&to)?;
    let mc = read_machine_config(&args.machine_config)?;
    let name = mc.metadata.name.clone().unwrap_or_default();
    let work = tempfile::Builder::new().prefix("mco-build-machine-os-").tempdir_in(derive::scratch_dir())?;
    let context = work.path().join("context");
    tracing::info!(machineconfig = %name, context = %context.display(), "baking the MachineConfig");
    mco_apply::bake::bake_config(&context.join("machineconfig"), &mc)?;
    let pull_authfile = existing_authfile(args.pull_authfile.as_deref())?;
    let push_authfile = existing_authfile(args.push_authfile.as_deref())?;
    let spec = derive::ContainerBuild { containerfile: args.containerfile.clone(), context, to, ..Default::default() };
    tracing::info!(to = spec.to, containerfile = %spec.containerfile.display(), "building");
    // Without push credentials, the push tries the pull credentials.
    let push_authfile = push_authfile.or_else(|| pull_authfile.clone());
    let pull = PullConfig { authfile: pull_authfile, ..Default::default() };
    let digest = derive::build_containerfile_pushing_with(&spec, &pull, push_authfile.as_deref())?;
    let pushed = image::pinned(&to_ref, &digest);
    let pushed = pushed.strip_prefix("docker://").unwrap_or(&pushed).to_string();
    tracing::info!(image = pushed, machineconfig = %name, "pushed");
    Ok(pushed)
}

/// The gzipped JSON MachineConfig at `path`.
fn read_machine_config(path: &Path) -> anyhow::Result<mco_api::MachineConfig> {
    let gz = std::fs::read(path).with_context(|| format!("Reading {}", path.display()))?;
    let mut json = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut json)
        .map_err(|e| InputError::new(path, format!("not a gzipped MachineConfig: {e}")))?;
    let value: serde_json::Value = serde_json::from_slice(&json)
        .map_err(|e| InputError::new(path, format!("not a MachineConfig: not JSON: {e}")))?;
    if value["kind"] != "MachineConfig" {
        let kind = value["kind"].as_str().unwrap_or("none");
        return Err(InputError::new(path, format!("not a MachineConfig: kind is {kind}")).into());
    }
    serde_path_to_error::deserialize(value)
        .map_err(|e| InputError::new(path, format!("not a MachineConfig: {}: {}", e.path(), e.inner())).into())
}

/// The docker config file `file` if given and present (a missing one is skipped: the build pod
/// mounts its Secrets that way), checked to be one: its `auths`, if any, a map.
fn existing_authfile(file: Option<&Path>) -> anyhow::Result<Option<PathBuf>> {
    let Some(file) = file else { return Ok(None) };
    let text = match std::fs::read(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(file = %file.display(), "no credentials file, skipped");
            return Ok(None);
        }
        Err(e) => return Err(e).with_context(|| format!("Reading {}", file.display())),
    };
    let config: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| InputError::new(file, format!("not a docker config JSON: {e}")))?;
    let reason = match config.get("auths") {
        _ if !config.is_object() => "not a docker config JSON: not an object",
        None | Some(serde_json::Value::Object(_)) => return Ok(Some(file.to_path_buf())),
        Some(_) => "not a docker config JSON: auths is not an object",
    };
    Err(InputError::new(file, reason).into())
}

/// `message` cut to what Kubernetes keeps, from the front: the end names the failing step.
fn termination_message(message: &str) -> String {
    if message.len() <= TERMINATION_MESSAGE_MAX {
        return message.to_string();
    }
    const CUT: &str = "...";
    let mut start = message.len() - (TERMINATION_MESSAGE_MAX - CUT.len());
    while !message.is_char_boundary(start) {
        start += 1;
    }
    format!("{CUT}{}", &message[start..])
}

fn inspect(args: &InspectArgs) -> anyhow::Result<()> {
    let info = mco_os::block_on(image::inspect(&args.image))??;
    match args.output {
        crate::Report::Json => {
            let files: Vec<String> = info.files.iter().map(ToString::to_string).collect();
            let v = json!({
                "image": args.image,
                "digest": info.digest,
                "pinned": info.pinned,
                "commit": info.commit,
                "mergeCommit": info.merge_commit,
                "version": info.version,
                "kernel": info.kernel,
                "labels": info.labels,
                "files": files,
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        crate::Report::Text => {
            println!("Image:   {}", args.image);
            println!("Digest:  {}", info.digest);
            println!("Pinned:  {}", info.pinned);
            println!("Commit:  {}", info.commit);
            if info.merge_commit != info.commit {
                println!("Merged:  {}", info.merge_commit);
            }
            println!("Version: {}", info.version.as_deref().unwrap_or("<none>"));
            println!("Kernel:  {}", info.kernel.as_deref().unwrap_or("<none>"));
            println!("Labels:");
            for (k, v) in &info.labels {
                println!("  {k}={v}");
            }
            println!("Files:");
            for f in &info.files {
                println!("{f}");
            }
        }
    }
    Ok(())
}

fn install(args: &InstallArgs) -> anyhow::Result<()> {
    let (path, cmdline) = (&args.target.sysroot, args.target.cmdline());
    let d = sysroot::install(path, &cmdline, &args.stateroot, &args.image, &args.kargs, &PullConfig::default())?;
    println!("installed {} ({}) and booted it: {}", args.image, d.commit, cmdline.display());
    Ok(())
}

fn status(args: &SysrootArgs) -> anyhow::Result<()> {
    let status = sysroot::status(&args.sysroot, &args.cmdline())?;
    if status.deployments.is_empty() {
        println!("no deployments");
    }
    let pending = status.pending().len();
    for d in &status.deployments {
        let mark = if Some(d.index) == status.booted { "*" } else { " " };
        let staged = if d.index < pending { " (staged)" } else { "" };
        println!("{mark} {} {}.{}{staged}", d.stateroot, d.commit, d.serial);
        println!("    image: {}", d.image.as_deref().unwrap_or("<none>"));
        println!("    kargs: {}", d.kargs.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_messages_keep_the_end() {
        let long = format!("{}STEP 3/3: RUN false", "é".repeat(3000));
        let cases = [("short", "short".to_string()), (long.as_str(), format!("...{}", &long[long.len() - 4093..]))];
        for (message, want) in cases {
            let got = termination_message(message);
            assert!(got.len() <= TERMINATION_MESSAGE_MAX, "{}", got.len());
            assert_eq!(got, want);
        }
    }

    #[test]
    fn authfiles_are_taken_as_given_missing_ones_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let good = write("good.json", r#"{"auths": {"a.io": {"auth": "cHVsbA=="}}}"#);
        assert_eq!(existing_authfile(Some(&good)).unwrap(), Some(good.clone()));
        assert_eq!(existing_authfile(Some(&dir.path().join("missing.json"))).unwrap(), None);
        assert_eq!(existing_authfile(None).unwrap(), None);
        for (name, text, reason) in [
            ("list.json", r#"{"auths": []}"#, "not a docker config JSON: auths is not an object"),
            ("array.json", "[]", "not a docker config JSON: not an object"),
            ("text.json", "x", "not a docker config JSON: expected value"),
        ] {
            let err = existing_authfile(Some(&write(name, text))).unwrap_err().to_string();
            assert!(err.contains(&format!("{name}: {reason}")), "{err}");
        }
    }
}
