//! The golden cases of `testdata/cases`: each `input.yaml` run through this crate, every output
//! compared with the bytes the original produced for it (`expected/`, see `testdata/README.md`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mco_api::image_config::{Image, ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet};
use mco_api::{MachineConfig, MachineConfigPool};
use mco_registries::{
    BaseFiles, BlockedAndAllowed, Cluster, ImageInputs, MirrorRules, blocked_and_allowed, bootstrap_image_config,
    sync_image_config, update_policy_json, update_registries_conf,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The controller version of a Go test build (`pkg/version.Hash` when not set at link time).
const CONTROLLER_VERSION: &str = "was-not-built-properly";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    release_image: String,
    #[serde(default)]
    pools: Vec<PoolInput>,
    image: Option<Image>,
    #[serde(default)]
    image_content_source_policies: Vec<ImageContentSourcePolicy>,
    #[serde(default)]
    image_digest_mirror_sets: Vec<ImageDigestMirrorSet>,
    #[serde(default)]
    image_tag_mirror_sets: Vec<ImageTagMirrorSet>,
    #[serde(default)]
    machine_configs: Vec<MachineConfig>,
    #[serde(default)]
    bootstrap: bool,
    base_registries_conf: Option<String>,
    #[serde(rename = "basePolicyJSON")]
    base_policy_json: Option<String>,
}

#[derive(Deserialize)]
struct PoolInput {
    metadata: ObjectMeta,
}

#[derive(Deserialize)]
struct Action {
    verb: String,
    name: String,
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/cases");
    let mut cases: Vec<PathBuf> = fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    cases.sort();
    cases
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The settings as the oracle writes them (`null` for a nil list).
fn settings_json(lists: &BlockedAndAllowed) -> Value {
    json!({
        "registriesBlocked": lists.registries_blocked,
        "policyBlocked": lists.policy_blocked,
        "allowed": lists.allowed,
        "error": lists.warning.as_ref().map(ToString::to_string).unwrap_or_default(),
    })
}

/// c/image names the temporary registries.conf the original wrote; mco writes none.
fn without_temporary_path(message: &str) -> String {
    match message.strip_prefix("loading registries configuration \"") {
        Some(rest) => rest.split_once("\": ").map(|(_, detail)| detail.to_string()).unwrap_or(message.into()),
        None => message.to_string(),
    }
}

/// What a MachineConfig's metadata says, as the oracle writes it.
fn metadata_json(mc: &MachineConfig) -> Value {
    let mut meta = serde_json::to_value(&mc.metadata).unwrap();
    let object = meta.as_object_mut().unwrap();
    object.retain(|k, _| ["name", "labels", "annotations", "ownerReferences"].contains(&k.as_str()));
    json!({ "metadata": meta })
}

/// The files of a config, decoded, by the oracle's flattened names.
fn decoded_files(config: &Value) -> Vec<(String, String)> {
    let files = config["storage"]["files"].as_array().cloned().unwrap_or_default();
    files
        .iter()
        .map(|file| {
            let path = file["path"].as_str().unwrap();
            let source = file["contents"]["source"].as_str().unwrap();
            let data = source.strip_prefix("data:text/plain;charset=utf-8;base64,").unwrap();
            let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
            (path.trim_start_matches('/').replace('/', "_"), String::from_utf8(bytes).unwrap())
        })
        .collect()
}

fn check_machine_config(case: &str, expected: &Path, mc: &MachineConfig) {
    let name = mc.metadata.name.as_deref().unwrap();
    let config = mc.spec.config.as_ref().unwrap();
    for (file, contents) in decoded_files(config) {
        let want = read(&expected.join("files").join(name).join(&file));
        assert_eq!(contents, want, "{case}: {name} {file}");
    }
    let want_files = fs::read_dir(expected.join("files").join(name)).map(|d| d.count()).unwrap_or(0);
    assert_eq!(decoded_files(config).len(), want_files, "{case}: {name} files");
    let bytes = mco_goser::to_go_json(config, mco_goser::Escaping::Legacy).unwrap();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        read(&expected.join(format!("config-{name}.json"))),
        "{case}: {name}"
    );
    let want_meta: Value = serde_json::from_str(&read(&expected.join(format!("machineconfig-{name}.json")))).unwrap();
    assert_eq!(metadata_json(mc), want_meta, "{case}: {name} metadata");
}

#[test]
fn golden_cases_match_the_original() {
    let base = BaseFiles::from_templates();
    let cases = cases();
    assert!(cases.len() >= 8, "the golden cases are missing");
    for dir in cases {
        let case = dir.file_name().unwrap().to_string_lossy().into_owned();
        let input: Input =
            serde_yaml::from_str(&read(&dir.join("input.yaml"))).unwrap_or_else(|e| panic!("{case}: {e}"));
        let expected = dir.join("expected");
        let pools: Vec<MachineConfigPool> = input
            .pools
            .iter()
            .map(|p| MachineConfigPool { metadata: p.metadata.clone(), spec: Default::default(), status: None })
            .collect();
        let mirrors = MirrorRules {
            image_digest_mirror_sets: &input.image_digest_mirror_sets,
            image_tag_mirror_sets: &input.image_tag_mirror_sets,
            image_content_source_policies: &input.image_content_source_policies,
        };

        if let Some(image) = &input.image {
            let want: Value = serde_json::from_str(&read(&expected.join("settings.json"))).unwrap();
            let mut want = want;
            want["error"] = Value::String(without_temporary_path(want["error"].as_str().unwrap()));
            let got = match blocked_and_allowed(&image.spec, &input.release_image, &mirrors) {
                Ok(lists) => settings_json(&lists),
                Err(e) => {
                    json!({"registriesBlocked": null, "policyBlocked": null, "allowed": null, "error": e.to_string()})
                }
            };
            assert_eq!(got, want, "{case}: settings");

            let lists = blocked_and_allowed(&image.spec, &input.release_image, &mirrors).unwrap_or_default();
            let sources = image.spec.registry_sources.clone().unwrap_or_default();
            if let Some(base_conf) = &input.base_registries_conf {
                let got = update_registries_conf(
                    base_conf,
                    sources.insecure_registries.as_deref().unwrap_or_default(),
                    lists.registries_blocked.as_deref().unwrap_or_default(),
                    &mirrors,
                );
                let (conf, error) = match got {
                    Ok(conf) => (conf, String::new()),
                    Err(e) => (String::new(), e.to_string()),
                };
                assert_eq!(conf, read(&expected.join("direct/registries.conf")), "{case}: direct registries.conf");
                assert_eq!(error, read(&expected.join("direct/registries.error")), "{case}: direct registries error");
            }
            if let Some(base_policy) = &input.base_policy_json {
                let got = update_policy_json(
                    base_policy,
                    lists.policy_blocked.as_deref().unwrap_or_default(),
                    lists.allowed.as_deref().unwrap_or_default(),
                    &input.release_image,
                );
                let (policy, error) = match got {
                    Ok(policy) => (policy, String::new()),
                    Err(e) => (String::new(), e.to_string()),
                };
                assert_eq!(policy, read(&expected.join("direct/policy.json")), "{case}: direct policy.json");
                assert_eq!(error, read(&expected.join("direct/policy.error")), "{case}: direct policy error");
            }
        }

        let want_error = read(&expected.join("error.txt"));
        if input.bootstrap {
            let got = bootstrap_image_config(&pools, &input.release_image, input.image.as_ref(), &mirrors, &base);
            match got {
                Ok(bootstrap) => {
                    assert_eq!(want_error, "", "{case}");
                    for mc in &bootstrap.machine_configs {
                        check_machine_config(&case, &expected, mc);
                    }
                    assert_eq!(bootstrap.machine_configs.len(), pools.len(), "{case}");
                }
                Err(e) => assert_eq!(e.to_string(), want_error, "{case}"),
            }
            continue;
        }

        let inputs = ImageInputs { image: input.image.as_ref(), release_image: Some(&input.release_image), mirrors };
        let cluster = Cluster {
            pools: &pools,
            machine_configs: &input.machine_configs,
            controller_version: CONTROLLER_VERSION,
            base: &base,
        };
        let sync = sync_image_config(&inputs, &cluster);
        let got_error = sync.outcome.as_ref().err().map(ToString::to_string).unwrap_or_default();
        assert_eq!(got_error, want_error, "{case}: error");

        let actions: Vec<Action> = serde_json::from_str::<Option<Vec<Action>>>(&read(&expected.join("actions.json")))
            .unwrap()
            .unwrap_or_default();
        let mut written: Vec<&str> = Vec::new();
        for action in actions.iter().filter(|a| a.verb != "delete") {
            if !written.contains(&action.name.as_str()) {
                written.push(&action.name);
            }
        }
        let deleted: Vec<&str> = actions.iter().filter(|a| a.verb == "delete").map(|a| a.name.as_str()).collect();
        let got_names: Vec<&str> = sync.machine_configs.iter().map(|mc| mc.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(got_names, written, "{case}: MachineConfigs written");
        assert_eq!(sync.deletions, deleted, "{case}: MachineConfigs deleted");
        for mc in &sync.machine_configs {
            check_machine_config(&case, &expected, mc);
        }
        // Every MachineConfig the oracle recorded is one of ours.
        let recorded: BTreeSet<String> = fs::read_dir(&expected)
            .unwrap()
            .filter_map(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .strip_prefix("config-")?
                    .strip_suffix(".json")
                    .map(String::from)
            })
            .collect();
        let ours: BTreeSet<String> = got_names.iter().map(|s| s.to_string()).collect();
        assert_eq!(ours, recorded, "{case}: recorded MachineConfigs");
    }
}
