//! TLS settings of the kubelet: a TLS security profile as the original's
//! `GetSecurityProfileCiphers` turns it into a minimum version and IANA cipher names.

use mco_api::config::{TlsProfileType, TlsSecurityProfile, fixed_profile};

/// Minimum TLS version (`VersionTLS12`) and cipher suites (IANA names) of `profile`; no profile,
/// no type, an unknown one or `Custom` without settings mean `Intermediate`. Ciphers Go cannot
/// use are dropped, as library-go's `OpenSSLToIANACipherSuites` drops them.
pub(crate) fn settings(profile: Option<&TlsSecurityProfile>) -> (String, Vec<String>) {
    let intermediate = || {
        let (ciphers, version) = fixed_profile(TlsProfileType::Intermediate).expect("Intermediate is a fixed profile");
        (version.as_str().to_string(), ciphers.iter().map(|c| c.to_string()).collect::<Vec<_>>())
    };
    let (version, ciphers) = match profile.and_then(|p| p.type_.map(|t| (p, t))) {
        Some((profile, TlsProfileType::Custom)) => match &profile.custom {
            Some(custom) => (
                custom.min_tls_version.map(|v| v.as_str().to_string()).unwrap_or_default(),
                custom.ciphers.clone().unwrap_or_default(),
            ),
            None => intermediate(),
        },
        Some((_, fixed)) => fixed_profile(fixed).map_or_else(intermediate, |(ciphers, version)| {
            (version.as_str().to_string(), ciphers.iter().map(|c| c.to_string()).collect())
        }),
        None => intermediate(),
    };
    (version, ciphers.iter().filter_map(|c| iana(c)).map(str::to_string).collect())
}

/// library-go's `openSSLToIANACiphers`.
fn iana(openssl: &str) -> Option<&'static str> {
    Some(match openssl {
        "TLS_AES_128_GCM_SHA256" => "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384" => "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256" => "TLS_CHACHA20_POLY1305_SHA256",
        "ECDHE-ECDSA-AES128-GCM-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384" => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384" => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-RSA-CHACHA20-POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-ECDSA-AES128-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "ECDHE-RSA-AES128-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        "AES128-GCM-SHA256" => "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "AES256-GCM-SHA384" => "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "AES128-SHA256" => "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "ECDHE-ECDSA-AES128-SHA" => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "ECDHE-RSA-AES128-SHA" => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "ECDHE-ECDSA-AES256-SHA" => "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "ECDHE-RSA-AES256-SHA" => "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "AES128-SHA" => "TLS_RSA_WITH_AES_128_CBC_SHA",
        "AES256-SHA" => "TLS_RSA_WITH_AES_256_CBC_SHA",
        "DES-CBC3-SHA" => "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "ECDHE-RSA-DES-CBC3-SHA" => "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use mco_api::config::{TlsProfileSpec, TlsProtocolVersion};

    use super::*;

    fn profile(type_: Option<TlsProfileType>, custom: Option<TlsProfileSpec>) -> TlsSecurityProfile {
        TlsSecurityProfile { type_, custom, ..Default::default() }
    }

    #[test]
    fn profiles_become_a_version_and_iana_ciphers() {
        let (version, ciphers) = settings(None);
        assert_eq!(version, "VersionTLS12");
        assert_eq!(ciphers.len(), 9);
        assert_eq!(ciphers[3], "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");
        // No type and Custom without settings fall back to Intermediate.
        assert_eq!(settings(Some(&profile(None, None))), settings(None));
        assert_eq!(settings(Some(&profile(Some(TlsProfileType::Custom), None))), settings(None));

        let (version, ciphers) = settings(Some(&profile(Some(TlsProfileType::Modern), None)));
        assert_eq!((version.as_str(), ciphers.len()), ("VersionTLS13", 3));
        // Old lists 24 ciphers; Go has no three of them.
        let (version, ciphers) = settings(Some(&profile(Some(TlsProfileType::Old), None)));
        assert_eq!((version.as_str(), ciphers.len()), ("VersionTLS10", 21));
        assert!(!ciphers.iter().any(|c| c.contains("AES_256_CBC_SHA384")));

        let custom = TlsProfileSpec {
            ciphers: Some(vec!["ECDHE-RSA-AES128-GCM-SHA256".into(), "NOT-A-CIPHER".into()]),
            min_tls_version: Some(TlsProtocolVersion::VersionTLS11),
        };
        let (version, ciphers) = settings(Some(&profile(Some(TlsProfileType::Custom), Some(custom))));
        assert_eq!(version, "VersionTLS11");
        assert_eq!(ciphers, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
    }
}
