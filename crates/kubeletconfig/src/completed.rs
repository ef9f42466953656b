//! Whether the controllers that generate MachineConfigs are done with a pool (upstream's
//! `AreMCGeneratingSubControllersCompletedForPool`): the render controller renders a pool only
//! once every ContainerRuntimeConfig and KubeletConfig selecting it has a status for its current
//! generation whose last condition says it succeeded, so that a pool never renders halfway through
//! a change. A config object that failed keeps its pools from rendering, as upstream.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use mco_api::machineconfiguration::{ConfigCondition, KubeletConfigStatus, config_condition};
use mco_api::{ContainerRuntimeConfig, KubeletConfig, MachineConfigPool};
use mco_render::Selection;

/// `Ok` when `pool` may render, else upstream's message saying which object it waits for.
pub fn generating_controllers_completed(
    pool: &MachineConfigPool,
    runtime_configs: &[ContainerRuntimeConfig],
    kubelet_configs: &[KubeletConfig],
) -> Result<(), String> {
    let labels = pool.metadata.labels.as_ref();
    for crc in runtime_configs {
        let selector = crc.spec.machine_config_pool_selector.as_ref();
        // Upstream indexes the last condition without looking (and panics on none).
        let done = |last: &ConfigCondition| last.type_ == config_condition::SUCCESS;
        check("ContainerRuntimeConfig", &crc.metadata, selector, crc.status.as_ref(), labels, done)?;
    }
    for kc in kubelet_configs {
        let selector = kc.spec.machine_config_pool_selector.as_ref();
        let done = |last: &ConfigCondition| {
            (last.type_ == config_condition::ACCEPTED && last.status.as_deref() == Some("True"))
                || last.type_ == config_condition::SUCCESS
        };
        check("KubeletConfig", &kc.metadata, selector, kc.status.as_ref(), labels, done)?;
    }
    Ok(())
}

/// One config object: nothing to wait for unless it selects the pool (as
/// metav1.LabelSelectorAsSelector: nil selects nothing, `{}` every pool); then its status must be
/// for its generation (Go's int64 zero values: a missing one reads 0) and its last condition `done`.
fn check(
    kind: &str,
    meta: &ObjectMeta,
    selector: Option<&LabelSelector>,
    status: Option<&KubeletConfigStatus>,
    pool_labels: Option<&BTreeMap<String, String>>,
    done: impl Fn(&ConfigCondition) -> bool,
) -> Result<(), String> {
    if !Selection::new(selector).map_err(|e| e.to_string())?.matches(pool_labels) {
        return Ok(());
    }
    let (generation, observed) =
        (meta.generation.unwrap_or(0), status.and_then(|s| s.observed_generation).unwrap_or(0));
    if generation != observed {
        return Err(format!(
            "status for {kind} {} is being reported for {observed}, expecting it for {generation}",
            meta.name.as_deref().unwrap_or_default()
        ));
    }
    let last = status.and_then(|s| s.conditions.as_ref()).and_then(|c| c.last());
    if last.is_some_and(done) { Ok(()) } else { Err(format!("{kind} has not completed")) }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn pool() -> MachineConfigPool {
        serde_json::from_value(json!({"metadata": {"name": "worker",
            "labels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}}, "spec": {}}))
        .unwrap()
    }

    fn object<T: serde::de::DeserializeOwned>(selector: Value, generation: i64, status: Value) -> T {
        serde_json::from_value(json!({"metadata": {"name": "x", "generation": generation},
            "spec": {"machineConfigPoolSelector": selector, "containerRuntimeConfig": {}}, "status": status}))
        .unwrap()
    }

    const WORKER: &str = r#"{"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}}"#;

    #[test]
    fn waits_for_every_selecting_config_objects_current_success() {
        let worker: Value = serde_json::from_str(WORKER).unwrap();
        let master = json!({"matchLabels": {"pools.operator.machineconfiguration.openshift.io/master": ""}});
        let conditions = |types: &[(&str, &str)]| -> Value {
            json!(types.iter().map(|(t, s)| json!({"type": t, "status": s})).collect::<Vec<_>>())
        };
        let kc = |selector: &Value, generation, observed, types: &[(&str, &str)]| -> KubeletConfig {
            object(
                selector.clone(),
                generation,
                json!({"observedGeneration": observed, "conditions": conditions(types)}),
            )
        };
        let crc = |selector: &Value, generation, observed, types: &[(&str, &str)]| -> ContainerRuntimeConfig {
            object(
                selector.clone(),
                generation,
                json!({"observedGeneration": observed, "conditions": conditions(types)}),
            )
        };
        let done_kc = kc(&worker, 2, 2, &[("Accepted", "True"), ("Success", "True")]);
        let done_crc = crc(&worker, 1, 1, &[("Success", "True")]);
        type Case = (&'static str, Vec<ContainerRuntimeConfig>, Vec<KubeletConfig>, Result<(), &'static str>);
        let cases: Vec<Case> = vec![
            ("nothing selects the pool", vec![crc(&master, 3, 1, &[])], vec![kc(&master, 3, 1, &[])], Ok(())),
            ("nil selects nothing", vec![object(Value::Null, 3, json!({}))], vec![], Ok(())),
            ("both done", vec![done_crc.clone()], vec![done_kc.clone()], Ok(())),
            ("accepted is enough", vec![], vec![kc(&worker, 1, 1, &[("Accepted", "True")])], Ok(())),
            (
                "a stale KubeletConfig status",
                vec![],
                vec![kc(&worker, 3, 2, &[("Success", "True")])],
                Err("status for KubeletConfig x is being reported for 2, expecting it for 3"),
            ),
            (
                "a failed KubeletConfig",
                vec![],
                vec![kc(&worker, 1, 1, &[("Accepted", "False"), ("Failure", "True")])],
                Err("KubeletConfig has not completed"),
            ),
            (
                "no status yet",
                vec![],
                vec![object(worker.clone(), 1, Value::Null)],
                Err("status for KubeletConfig x is being reported for 0, expecting it for 1"),
            ),
            (
                "{} selects every pool",
                vec![crc(&json!({}), 1, 1, &[("Failure", "True")])],
                vec![],
                Err("ContainerRuntimeConfig has not completed"),
            ),
            (
                "no condition (upstream panics)",
                vec![crc(&worker, 1, 1, &[])],
                vec![done_kc],
                Err("ContainerRuntimeConfig has not completed"),
            ),
        ];
        for (name, crcs, kcs, expected) in cases {
            assert_eq!(
                generating_controllers_completed(&pool(), &crcs, &kcs),
                expected.map_err(str::to_string),
                "{name}"
            );
        }
    }
}
