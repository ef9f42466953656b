//! Tells a plain `cargo test` (the pure tier: no root, no kube binaries, no network) which tiers
//! it left out and how to run them: one line instead of a failure per test that needs them.
//! Built with the features `bash hack/test.sh` enables, it says nothing.

fn main() {
    let listing = std::env::args().any(|arg| arg == "--list");
    if !cfg!(feature = "real-components") && !listing {
        println!(
            "note: left out the tests that run real components (API server, registry, OSTree, buildah, root) and \
             the lab's scenarios; `bash hack/test.sh` runs every tier (`cargo test --workspace --all-features` \
             once its packages and kube binaries are there)"
        );
    }
}
