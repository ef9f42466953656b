//! `mco image`: OS images on real OSTree — commit a bootable test tree, encapsulate a commit into
//! an OCI image (ostree-ext), inspect an image.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use mco_os::build::{self as derive, AddError};
use mco_os::image::{self, ImageRefError};
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
    /// Build a derived image: the base image plus one layer of directories and labels; print
    /// the manifest digest.
    Build(BuildArgs),
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The base image (`oci:DIR[:TAG]`, `docker://HOST/NAME[:TAG|@DIGEST]`).
    #[arg(long, value_name = "IMAGE")]
    from: String,
    /// A directory to add, repeatable: SRC_DIR:/DEST with DEST under /usr or /etc.
    #[arg(long = "add", value_name = "SRC:DEST")]
    adds: Vec<String>,
    /// A label of the new image, repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// Destination: `oci:DIR:TAG` or `docker://HOST/NAME:TAG`.
    #[arg(long, value_name = "IMAGE")]
    to: String,
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
}

/// Output formats of `image inspect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InspectOutput {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// `oci:DIR[:TAG]` or `docker://HOST/NAME[:TAG|@DIGEST]`.
    #[arg(value_name = "IMAGE")]
    image: String,
    #[arg(short, long, value_enum, default_value = "text")]
    output: InspectOutput,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

pub fn run(cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    let result = match cmd {
        ImageCommand::TestTree(args) => {
            tree::write_tree(&args.dir, &TreeSpec { kernel_version: args.kernel, version_id: args.version_id })
        }
        ImageCommand::Commit(args) => commit(args),
        ImageCommand::Encapsulate(args) => {
            mco_os::block_on(image::encapsulate(&args.repo, &args.ostree_ref, &args.to))?.map(|d| println!("{d}"))
        }
        ImageCommand::Inspect(args) => inspect(&args),
        ImageCommand::Build(args) => build(args),
    };
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // Refused input (a bad reference, label or tree) is the user's to fix: exit 1.
        Err(e) if e.chain().any(|c| c.is::<ImageRefError>() || c.is::<TreeError>() || c.is::<AddError>()) => {
            eprintln!("error: {e:#}");
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e),
    }
}

fn commit(args: CommitArgs) -> anyhow::Result<()> {
    let labels: BTreeMap<String, String> = args.labels.into_iter().collect();
    let checksum = tree::commit(&args.repo, &args.ostree_ref, &args.tree, &args.version, &labels)?;
    println!("{checksum}");
    Ok(())
}

fn build(args: BuildArgs) -> anyhow::Result<()> {
    let adds = args.adds.iter().map(|a| derive::parse_add(a)).collect::<Result<Vec<_>, _>>()?;
    let labels: BTreeMap<String, String> = args.labels.into_iter().collect();
    println!("{}", derive::build(&args.from, &adds, &labels, &args.to)?);
    Ok(())
}

fn inspect(args: &InspectArgs) -> anyhow::Result<()> {
    let info = mco_os::block_on(image::inspect(&args.image))??;
    match args.output {
        InspectOutput::Json => {
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
        InspectOutput::Text => {
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
