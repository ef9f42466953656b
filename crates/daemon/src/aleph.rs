//! Boot image provenance: the aleph file ([`mco_os::aleph`]) says which build the machine was
//! installed from. The daemon reports it on the Node ([`mco_api::constants::BOOT_IMAGE_ANNOTATION`])
//! so that boot image skew can be judged per node; upstream only logs the file.

pub use mco_os::aleph::{ALEPH_FILE, AlephError, BootImage, read};

/// The annotation value of `image`.
pub fn annotation(image: &BootImage) -> String {
    serde_json::to_string(image).expect("two strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_holds_the_build_and_the_commit() {
        let image = BootImage {
            build: "416.94.202405211741-0".into(),
            ostree_commit: "3d8e3c0f3e9f9f6fd4b5c0e5c2f1b0a9a8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3".into(),
        };
        assert_eq!(
            annotation(&image),
            r#"{"build":"416.94.202405211741-0","ostree-commit":"3d8e3c0f3e9f9f6fd4b5c0e5c2f1b0a9a8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3"}"#
        );
    }
}
