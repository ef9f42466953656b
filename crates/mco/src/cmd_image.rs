//! `mco image`: OS images on real OSTree — commit a bootable test tree, encapsulate a commit into
//! an OCI image (ostree-ext), inspect an image.

use std::collections::BTreeMap;
use std::path::PathBuf;
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
        ImageCommand::Install(args) => install(&args),
        ImageCommand::Boot(args) => sysroot::boot(&args.sysroot, &args.cmdline()).map(|line| println!("{line}")),
        ImageCommand::Status(args) => status(&args),
    };
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // Refused input (a bad reference, label or tree) is the user's to fix: exit 1.
        Err(e)
            if e.chain().any(|c| {
                c.is::<ImageRefError>() || c.is::<TreeError>() || c.is::<AddError>() || c.is::<SysrootError>()
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
            derive::build_containerfile(&spec, &PullConfig { registries_conf: None, authfile: args.authfile })?
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
