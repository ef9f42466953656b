//! Stub Ignition upgrade and trust checks, with real certificates (testdata/stubs/generate.sh)
//! checked by rustls' verifier, and the upgraded stubs checked by the real `ignition-validate`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mco_bootimage::stub::{
    STUB_IGNITION_UPGRADED_AT_ANNOTATION, Secret, StubError, StubUpgrade, UnixTime, check_server_certificate,
    stub_trust, upgrade_stub, upgrade_user_data_secret,
};
use mco_ignition::Target;

use serde_json::{Value, json};

fn stubs(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/stubs").join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(stubs(name)).unwrap()
}

fn upgraded(name: &str, target: Target) -> (Box<mco_ignition::v3::Config>, Value) {
    match upgrade_stub(&read(name), target).unwrap() {
        StubUpgrade::Upgraded { from, config, json } => {
            assert_eq!(from, "2.2.0");
            (config, serde_json::from_str(&json).unwrap())
        }
        other => panic!("{other:?}"),
    }
}

/// 2030-01-01, inside the 100-year validity of the test certificates (made in 2026).
fn now() -> UnixTime {
    UnixTime::since_unix_epoch(Duration::from_secs(1_893_456_000))
}

#[test]
fn spec_2_2_stub_upgrades_keeping_every_customisation() {
    let original: Value = serde_json::from_slice(&read("stub-2.2.ign")).unwrap();
    let (_, v) = upgraded("stub-2.2.ign", Target::V3_1);
    assert_eq!(v["ignition"]["version"], "3.1.0");
    // append → merge, same source; the CA and the timeout survive.
    assert_eq!(
        v["ignition"]["config"]["merge"],
        json!([{"source": "https://api-int.ci.example.com:22623/config/worker"}])
    );
    assert!(v["ignition"]["config"].get("append").is_none());
    assert_eq!(
        v["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"],
        original["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"]
    );
    assert_eq!(v["ignition"]["timeouts"], json!({"httpResponseHeaders": 30}));
    // The admin's user key, file and unit. Spec 2 overwrote files by default, spec 3 does not:
    // the translation makes that explicit.
    assert_eq!(v["passwd"]["users"], original["passwd"]["users"]);
    assert_eq!(
        v["storage"]["files"],
        json!([{"overwrite": true, "path": "/etc/custom-marker", "contents": {"source": "data:,installed-by-admin"}, "mode": 420}])
    );
    assert_eq!(v["systemd"]["units"], original["systemd"]["units"]);
}

#[test]
fn upgrade_targets() {
    for (target, version) in
        [(Target::V3_1, "3.1.0"), (Target::V3_2, "3.2.0"), (Target::V3_4, "3.4.0"), (Target::V3_5, "3.5.0")]
    {
        let (config, v) = upgraded("stub-2.2.ign", target);
        assert_eq!(config.ignition.version, version);
        assert_eq!(v["ignition"]["version"], version);
    }
    assert_eq!(upgrade_stub(&read("stub-2.2.ign"), Target::V2_2), Err(StubError::TargetNotSpec3(Target::V2_2)));
}

/// The real Ignition validator (2.14 reads 3.0-3.3) accepts the upgraded stub and refuses the
/// spec 2.2 original, which is why the stub must be upgraded before new boot images use it.
#[test]
fn real_ignition_validate_accepts_the_upgraded_stub() {
    let dir = tempfile::tempdir().unwrap();
    let run = |bytes: &[u8]| {
        let path = dir.path().join("config.ign");
        std::fs::write(&path, bytes).unwrap();
        let out = Command::new("ignition-validate").arg(&path).output().expect("ignition-validate is installed");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
        )
    };
    let (ok, output) = run(&read("stub-2.2.ign"));
    assert!(!ok, "ignition-validate accepted spec 2.2: {output}");
    for target in [Target::V3_1, Target::V3_3] {
        let StubUpgrade::Upgraded { json, .. } = upgrade_stub(&read("stub-2.2.ign"), target).unwrap() else {
            panic!("not upgraded")
        };
        let (ok, output) = run(json.as_bytes());
        assert!(ok, "ignition-validate refused the {target} stub: {output}\n{json}");
    }
}

#[test]
fn spec_3_stub_is_left_alone() {
    assert_eq!(
        upgrade_stub(&read("stub-3.1.ign"), Target::V3_1),
        Ok(StubUpgrade::AlreadySpec3 { version: "3.1.0".into() })
    );
}

#[test]
fn not_ignition() {
    for input in [&b"hello"[..], br#"{"foo": 1}"#, br#"{"ignition": {"version": "9.9.9"}}"#, br#"[]"#] {
        let err = upgrade_stub(input, Target::V3_1).unwrap_err();
        assert!(matches!(err, StubError::NotIgnition(_)), "{err:?}");
        assert!(err.to_string().starts_with("not an Ignition config: parsing Ignition config failed"), "{err}");
    }
}

#[test]
fn trust_of_the_upgraded_stub() {
    let (config, _) = upgraded("stub-2.2.ign", Target::V3_1);
    let trust = stub_trust(&config).unwrap();
    assert_eq!(trust.host, "api-int.ci.example.com");
    assert_eq!(trust.source, "https://api-int.ci.example.com:22623/config/worker");
    assert_eq!(trust.ca_certificates.len(), 1);

    let report = check_server_certificate(&trust, &read("server.crt"), now()).unwrap();
    assert_eq!(report.dns_names, vec!["api-int.ci.example.com".to_string()]);
    assert_eq!(report.subject, "CN=system:machine-config-server");

    let failures = [
        ("server-no-san.crt", now(), "CN=api-int.ci.example.com has no Subject Alternative Name"),
        (
            "server-other-host.crt",
            now(),
            "is not valid for api-int.ci.example.com (Subject Alternative Names: api-int.elsewhere.example.com)",
        ),
        ("server-other-ca.crt", now(), "is not trusted by the stub's CA: UnknownIssuer"),
        // Year 2200: after the certificates expire.
        ("server.crt", UnixTime::since_unix_epoch(Duration::from_secs(7_258_118_400)), "CertExpired"),
        ("ca.crt", now(), "OU=openshift, CN=root-ca has no Subject Alternative Name"),
    ];
    for (file, time, want) in failures {
        let err = check_server_certificate(&trust, &read(file), time).unwrap_err();
        assert!(err.to_string().contains(want), "{file}: {err}");
    }
    let err = check_server_certificate(&trust, b"not pem", now()).unwrap_err();
    assert_eq!(err, StubError::ServerCert("no PEM certificate".into()));
}

#[test]
fn stub_with_two_cas_is_refused() {
    let (config, _) = upgraded("stub-2.2-two-cas.ign", Target::V3_1);
    assert_eq!(stub_trust(&config), Err(StubError::SeveralCas(2)));
}

#[test]
fn a_leaf_certificate_is_not_a_ca() {
    let mut stub: Value = serde_json::from_slice(&read("stub-3.1.ign")).unwrap();
    let server = base64_data_url(&read("server.crt"));
    stub["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"] = json!(server);
    let parsed = mco_ignition::parse_and_convert(&stub).unwrap();
    let err = stub_trust(&parsed).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the stub's certificate authority: CN=system:machine-config-server is not a CA certificate (basicConstraints CA is not set)"
    );
    stub["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"] = json!("https://example.com/ca.crt");
    let err = stub_trust(&mco_ignition::parse_and_convert(&stub).unwrap()).unwrap_err();
    assert!(err.to_string().contains("is not an inline data URL"), "{err}");
}

fn base64_data_url(bytes: &[u8]) -> String {
    use base64::Engine;
    format!("data:text/plain;charset=utf-8;base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

#[test]
fn user_data_secret_upgrade() {
    let secret: Secret = serde_json::from_slice(&read("worker-user-data-secret.json")).unwrap();
    let upgraded = upgrade_user_data_secret(&secret, Target::V3_1, "2026-01-01T00:00:00Z").unwrap().unwrap();
    let annotations = upgraded.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations["machineconfiguration.openshift.io/stub-ignition-upgraded-to"], "3.1.0");
    assert_eq!(annotations[STUB_IGNITION_UPGRADED_AT_ANNOTATION], "2026-01-01T00:00:00Z");
    let data = upgraded.data.as_ref().unwrap();
    assert_eq!(data["disableTemplating"].0, b"true\n");
    let StubUpgrade::Upgraded { json, .. } =
        upgrade_stub(&secret.data.as_ref().unwrap()["userData"].0, Target::V3_1).unwrap()
    else {
        panic!()
    };
    assert_eq!(data["userData"].0, json.into_bytes());
    // Upgrading again finds spec 3 and changes nothing.
    assert_eq!(upgrade_user_data_secret(&upgraded, Target::V3_1, "later"), Ok(None));
    let mut empty = secret.clone();
    empty.data = None;
    assert_eq!(
        upgrade_user_data_secret(&empty, Target::V3_1, "now").unwrap_err().to_string(),
        "secret worker-user-data: has no data.userData"
    );
}

#[test]
fn annotation_time_format() {
    use mco_bootimage::stub::rfc3339;
    assert_eq!(rfc3339(Duration::from_secs(0)), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(Duration::from_millis(1_767_225_600_999)), "2026-01-01T00:00:00Z");
}
