//! The daemon's writes to its Node (pure): JSON merge patches of only the annotations it owns,
//! holding only what changes, so the controller's keys (`desiredConfig`, `lastAppliedDrain`, ...)
//! are never overwritten, whatever the daemon last read.

use std::collections::BTreeMap;

use mco_api::constants::{
    BOOT_IMAGE_ANNOTATION, CURRENT_CONFIG_ANNOTATION, CURRENT_IMAGE_ANNOTATION, DESIRED_DRAIN_ANNOTATION,
    DESIRED_IMAGE_ANNOTATION, POST_CONFIG_ACTION_ANNOTATION, PRESTAGE_ERROR_ANNOTATION, PRESTAGED_ANNOTATION,
    REASON_ANNOTATION, STATE_ANNOTATION, STATE_DONE, STATE_REBOOTING,
};
use serde_json::{Map, Value, json};

/// The annotations the daemon writes. `desiredImage` is only ever removed when empty (SetDone).
const OWNED: [&str; 10] = [
    CURRENT_CONFIG_ANNOTATION,
    STATE_ANNOTATION,
    REASON_ANNOTATION,
    DESIRED_DRAIN_ANNOTATION,
    POST_CONFIG_ACTION_ANNOTATION,
    CURRENT_IMAGE_ANNOTATION,
    DESIRED_IMAGE_ANNOTATION,
    BOOT_IMAGE_ANNOTATION,
    // mco's pre-staging answers.
    PRESTAGED_ANNOTATION,
    PRESTAGE_ERROR_ANNOTATION,
];

/// An annotation value to write; `None` removes the annotation.
pub type Change = (&'static str, Option<String>);

/// The merge patch that makes `annotations` hold `changes`, or `None` when they already do.
///
/// # Panics
/// On a key the daemon does not own (a programming error).
pub fn merge_patch(annotations: &BTreeMap<String, String>, changes: &[Change]) -> Option<Value> {
    let mut patch = Map::new();
    for (key, value) in changes {
        assert!(OWNED.contains(key), "the daemon does not write the {key} annotation");
        if annotations.get(*key) != value.as_ref() {
            patch.insert(key.to_string(), value.clone().map_or(Value::Null, Value::String));
        }
    }
    (!patch.is_empty()).then(|| json!({"metadata": {"annotations": patch}}))
}

/// `state` and `reason` of a failure (the reason already truncated).
pub fn failed(state: &str, reason: String) -> Vec<Change> {
    vec![(STATE_ANNOTATION, Some(state.to_string())), (REASON_ANNOTATION, Some(reason))]
}

/// SetDone (the handshake's last step, `docs/behaviour.md#the-node-handshake`): the config is
/// current, state Done, reason cleared; `currentImage` is the on-disk image (removed when not
/// layered); an empty `desiredImage` is removed.
pub fn done(annotations: &BTreeMap<String, String>, config: &str, current_image: Option<&str>) -> Vec<Change> {
    let mut changes = vec![
        (CURRENT_CONFIG_ANNOTATION, Some(config.to_string())),
        (STATE_ANNOTATION, Some(STATE_DONE.to_string())),
        (REASON_ANNOTATION, Some(String::new())),
        (CURRENT_IMAGE_ANNOTATION, current_image.filter(|i| !i.is_empty()).map(str::to_string)),
    ];
    if annotations.get(DESIRED_IMAGE_ANNOTATION).is_some_and(String::is_empty) {
        changes.push((DESIRED_IMAGE_ANNOTATION, None));
    }
    changes
}

/// `post-config-action=Rebooting` before a reboot, `""` after it (or when the update failed).
pub fn rebooting(yes: bool) -> Change {
    (POST_CONFIG_ACTION_ANNOTATION, Some(if yes { STATE_REBOOTING.to_string() } else { String::new() }))
}

/// The seed annotations of a node's first boot (`node-annotations.json`, written by the server)
/// for a Node without `currentConfig` (upstream `loadNodeAnnotations`). Keys the Node already has
/// are kept: `desiredConfig` in particular belongs to the node controller once it has set it.
pub fn seed_patch(annotations: &BTreeMap<String, String>, seed: &BTreeMap<String, String>) -> Option<Value> {
    if annotations.contains_key(CURRENT_CONFIG_ANNOTATION) {
        return None;
    }
    let patch: Map<String, Value> = seed
        .iter()
        .filter(|(key, _)| !annotations.contains_key(*key))
        .map(|(key, value)| (key.clone(), Value::String(value.clone())))
        .collect();
    (!patch.is_empty()).then(|| json!({"metadata": {"annotations": patch}}))
}

#[cfg(test)]
mod tests {
    use mco_api::constants::DESIRED_CONFIG_ANNOTATION;

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn patches_hold_only_changes() {
        let node = map(&[(STATE_ANNOTATION, "Working"), (REASON_ANNOTATION, ""), (CURRENT_IMAGE_ANNOTATION, "img")]);
        let cases: Vec<(&str, Vec<Change>, Option<Value>)> = vec![
            ("no change", vec![(STATE_ANNOTATION, Some("Working".into()))], None),
            (
                "changed and removed",
                vec![
                    (STATE_ANNOTATION, Some("Done".into())),
                    (REASON_ANNOTATION, Some(String::new())),
                    (CURRENT_IMAGE_ANNOTATION, None),
                    (DESIRED_IMAGE_ANNOTATION, None),
                ],
                Some(json!({"metadata": {"annotations": {STATE_ANNOTATION: "Done", CURRENT_IMAGE_ANNOTATION: null}}})),
            ),
        ];
        for (what, changes, want) in cases {
            assert_eq!(merge_patch(&node, &changes), want, "{what}");
        }
    }

    #[test]
    #[should_panic(expected = "does not write the machineconfiguration.openshift.io/desiredConfig annotation")]
    fn desired_config_is_never_written() {
        merge_patch(&BTreeMap::new(), &[(DESIRED_CONFIG_ANNOTATION, Some("x".into()))]);
    }

    #[test]
    fn done_clears_reason_and_empty_images() {
        let node = map(&[(DESIRED_IMAGE_ANNOTATION, ""), (REASON_ANNOTATION, "it broke")]);
        let patch = merge_patch(&node, &done(&node, "rendered-b", Some(""))).unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {
                CURRENT_CONFIG_ANNOTATION: "rendered-b", STATE_ANNOTATION: "Done", REASON_ANNOTATION: "",
                DESIRED_IMAGE_ANNOTATION: null,
            }}})
        );
        let layered = done(&BTreeMap::new(), "rendered-b", Some("quay.io/os@sha256:1"));
        assert!(layered.contains(&(CURRENT_IMAGE_ANNOTATION, Some("quay.io/os@sha256:1".into()))));
        assert_eq!(layered.len(), 4, "a missing desiredImage is left alone");
    }

    #[test]
    fn seeds_fill_only_a_node_without_current_config() {
        let seed = map(&[
            (CURRENT_CONFIG_ANNOTATION, "rendered-a"),
            (DESIRED_CONFIG_ANNOTATION, "rendered-a"),
            (STATE_ANNOTATION, "Done"),
        ]);
        let cases = [
            (
                "new node",
                map(&[]),
                Some(json!({"metadata": {"annotations": {
                    CURRENT_CONFIG_ANNOTATION: "rendered-a", DESIRED_CONFIG_ANNOTATION: "rendered-a",
                    STATE_ANNOTATION: "Done"}}})),
            ),
            (
                "the controller already targeted it",
                map(&[(DESIRED_CONFIG_ANNOTATION, "rendered-b")]),
                Some(json!({"metadata": {"annotations": {
                    CURRENT_CONFIG_ANNOTATION: "rendered-a", STATE_ANNOTATION: "Done"}}})),
            ),
            ("already annotated", map(&[(CURRENT_CONFIG_ANNOTATION, "rendered-x")]), None),
        ];
        for (what, node, want) in cases {
            let got = seed_patch(&node, &seed);
            assert_eq!(got, want, "{what}");
        }
    }
}
