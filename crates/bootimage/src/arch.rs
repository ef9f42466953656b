//! Architectures: Kubernetes names (`amd64`) on MachineSets, RPM names (`x86_64`) in streams.

use std::fmt;
use std::str::FromStr;

use mco_api::constants::AUTOSCALER_LABELS_ANNOTATION;

/// A CPU architecture boot images exist for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    X86_64,
    Aarch64,
    S390x,
    Ppc64le,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::X86_64, Arch::Aarch64, Arch::S390x, Arch::Ppc64le];

    /// The RPM name, as stream metadata keys architectures.
    pub fn rpm(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::S390x => "s390x",
            Arch::Ppc64le => "ppc64le",
        }
    }

    /// The Kubernetes name (`kubernetes.io/arch`).
    pub fn kube(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
            Arch::S390x => "s390x",
            Arch::Ppc64le => "ppc64le",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rpm())
    }
}

/// An architecture name that is neither a Kubernetes nor an RPM name we know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown architecture {0:?} (expected one of amd64, arm64, s390x, ppc64le)")]
pub struct UnknownArch(pub String);

/// Accepts both the Kubernetes and the RPM name.
impl FromStr for Arch {
    type Err = UnknownArch;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::ALL.into_iter().find(|a| a.kube() == s || a.rpm() == s).ok_or_else(|| UnknownArch(s.to_string()))
    }
}

/// What the autoscaler labels annotation says about a MachineSet's architecture.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchAnnotationError {
    #[error("annotation {AUTOSCALER_LABELS_ANNOTATION} has no kubernetes.io/arch label: {0:?}")]
    NoArchLabel(String),
    #[error("annotation {AUTOSCALER_LABELS_ANNOTATION}: {0}")]
    Unknown(UnknownArch),
}

/// The architecture named by `kubernetes.io/arch=<arch>` in the comma-separated autoscaler
/// labels annotation (entries trimmed). Only Kubernetes names count here, as upstream maps them.
pub fn arch_from_autoscaler_labels(annotation: &str) -> Result<Arch, ArchAnnotationError> {
    let value = annotation
        .split(',')
        .map(str::trim)
        .find_map(|entry| entry.strip_prefix("kubernetes.io/arch="))
        .ok_or_else(|| ArchAnnotationError::NoArchLabel(annotation.to_string()))?;
    Arch::ALL
        .into_iter()
        .find(|a| a.kube() == value)
        .ok_or_else(|| ArchAnnotationError::Unknown(UnknownArch(value.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autoscaler_labels_table() {
        let cases: &[(&str, Result<Arch, ArchAnnotationError>)] = &[
            ("kubernetes.io/arch=amd64", Ok(Arch::X86_64)),
            ("kubernetes.io/arch=arm64", Ok(Arch::Aarch64)),
            ("kubernetes.io/arch=s390x", Ok(Arch::S390x)),
            ("kubernetes.io/arch=ppc64le", Ok(Arch::Ppc64le)),
            ("foo=bar, kubernetes.io/arch=arm64 ,x=y", Ok(Arch::Aarch64)),
            // RPM names are not Kubernetes label values.
            ("kubernetes.io/arch=x86_64", Err(ArchAnnotationError::Unknown(UnknownArch("x86_64".into())))),
            ("kubernetes.io/arch=riscv64", Err(ArchAnnotationError::Unknown(UnknownArch("riscv64".into())))),
            ("foo=bar", Err(ArchAnnotationError::NoArchLabel("foo=bar".into()))),
            ("", Err(ArchAnnotationError::NoArchLabel(String::new()))),
        ];
        for (annotation, want) in cases {
            assert_eq!(&arch_from_autoscaler_labels(annotation), want, "{annotation:?}");
        }
    }

    #[test]
    fn names_round_trip() {
        for arch in Arch::ALL {
            assert_eq!(arch.kube().parse::<Arch>(), Ok(arch));
            assert_eq!(arch.rpm().parse::<Arch>(), Ok(arch));
        }
        assert!("mips".parse::<Arch>().is_err());
    }
}
