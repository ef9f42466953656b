//! OS images on real OSTree: bootable test OS trees committed with libostree ([`tree`]), and
//! those commits as OCI images built, read and imported with ostree-ext ([`image`]), and derived
//! images layered on them ([`build`]), and directory sysroots that install, boot and deploy those
//! images ([`sysroot`]).
//!
//! libostree is reached only through `ostree_ext::ostree` (and its `gio`/`glib`): a second
//! version of the `ostree` crate would link libostree twice.

pub mod aleph;
pub mod build;
pub mod image;
pub mod registry;
pub mod signing;
pub mod sysroot;
pub mod tree;

/// Run one of this crate's async operations to completion, for callers without a runtime (the
/// CLI). ostree-ext needs tokio's process and blocking-pool support, which a current-thread
/// runtime with all drivers provides.
pub fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(rt.block_on(f))
}
