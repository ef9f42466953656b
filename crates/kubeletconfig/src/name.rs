//! Which MachineConfig a KubeletConfig (ContainerRuntimeConfig) writes for a pool:
//! `99-<pool>-generated-kubelet` (`-containerruntime`) for the first one of the pool, `...-<n>`
//! (n up to 9) for later ones, remembered in the object's `mc-name-suffix` annotation — the
//! original's `getManagedKubeletConfigKey` and `getManagedKeyCtrCfg`.

use mco_api::MachineConfigPool;
use mco_api::constants::MC_NAME_SUFFIX_ANNOTATION;
use mco_render::Selection;

use crate::common::PoolConfig;

/// The largest name suffix; an eleventh KubeletConfig for a pool is refused.
const MAX_SUFFIX: i64 = 9;

/// The MachineConfig name, and a pre-4.7 name (`99-<pool>-<pool uid>-kubelet`) whose
/// MachineConfig is to be renamed to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManagedKey {
    pub name: String,
    pub renamed_from: Option<String>,
}

/// `99-<pool>-generated-<word>`.
fn base_name(pool: &str, word: &str) -> String {
    format!("99-{pool}-generated-{word}")
}

/// `GetManagedKey`: the base name, taking over the deprecated one's MachineConfig if only that
/// exists.
fn migrated_base(pool: &MachineConfigPool, word: &str, exists: &dyn Fn(&str) -> bool) -> ManagedKey {
    let name = base_name(pool_name(pool), word);
    let deprecated = format!("99-{}-{}-{word}", pool_name(pool), pool.metadata.uid.as_deref().unwrap_or_default());
    let renamed_from = (!exists(&name) && exists(&deprecated)).then_some(deprecated);
    ManagedKey { name, renamed_from }
}

fn pool_name(pool: &MachineConfigPool) -> &str {
    pool.metadata.name.as_deref().unwrap_or_default()
}

/// Whether a config object's pool selector selects `pool` (nil and `{}` select nothing).
pub(crate) fn selects<C: PoolConfig>(cfg: &C, pool: &MachineConfigPool) -> Result<bool, String> {
    let selection = Selection::new(cfg.pool_selector()).map_err(|e| e.to_string())?;
    Ok(matches!(selection, Selection::Requirements(_)) && selection.matches(pool.metadata.labels.as_ref()))
}

/// The name `cfg` writes its settings for `pool` to. `all` is every object of its kind in the
/// cluster (`cfg` among them); `exists` says whether a MachineConfig exists.
pub(crate) fn managed_key<C: PoolConfig>(
    pool: &MachineConfigPool,
    cfg: &C,
    all: &[C],
    exists: &dyn Fn(&str) -> bool,
) -> Result<ManagedKey, String> {
    let base = base_name(pool_name(pool), C::WORD);
    let mut for_pool = Vec::new();
    for other in all {
        if selects(other, pool)? {
            for_pool.push(other);
        }
    }
    let suffix = |k: &C| k.meta().annotations.as_ref()?.get(MC_NAME_SUFFIX_ANNOTATION).cloned();
    if for_pool.iter().any(|k| k.meta().name == cfg.meta().name) {
        match suffix(cfg) {
            Some(s) if !s.is_empty() => return Ok(plain(format!("{base}-{s}"))),
            Some(_) => return Ok(migrated_base(pool, C::WORD, exists)),
            None => {}
        }
    }
    if for_pool.len() == 1 {
        return Ok(migrated_base(pool, C::WORD, exists));
    }
    // An older object without the annotation (written before it existed): the largest of its
    // finalizers that names an existing MachineConfig of this pool.
    let created = |k: &C| k.meta().creation_timestamp.as_ref().map(|t| t.0);
    if for_pool.iter().any(|k| created(k) > created(cfg)) {
        let mut best: Option<(i64, &String)> = None;
        for finalizer in cfg.meta().finalizers.iter().flatten() {
            if !exists(finalizer) || !finalizer.starts_with(&base) {
                continue;
            }
            let number = match finalizer.rsplit('-').next().and_then(|last| last.parse::<i64>().ok()) {
                Some(n) => n,
                None if *finalizer == base => 0,
                None => continue,
            };
            if best.is_none_or(|(max, _)| number > max) {
                best = Some((number, finalizer));
            }
        }
        if let Some((_, finalizer)) = best {
            return Ok(plain(finalizer.clone()));
        }
    }
    let mut largest = 0;
    for other in &for_pool {
        match suffix(other) {
            Some(s) if !s.is_empty() => {
                let n: i64 =
                    s.parse().map_err(|e| format!("error converting {s} to int: {}", go_atoi_error(&s, &e)))?;
                largest = largest.max(n);
            }
            _ => {}
        }
    }
    if largest + 1 > MAX_SUFFIX {
        return Err(C::TOO_MANY.into());
    }
    Ok(plain(format!("{base}-{}", largest + 1)))
}

fn plain(name: String) -> ManagedKey {
    ManagedKey { name, renamed_from: None }
}

/// Go's `strconv.Atoi` error text.
fn go_atoi_error(s: &str, e: &std::num::ParseIntError) -> String {
    let reason = match e.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
        _ => "invalid syntax",
    };
    format!("strconv.Atoi: parsing {s:?}: {reason}")
}

/// The `mc-name-suffix` annotation value for a MachineConfig name: its numeric suffix, or `""`.
pub(crate) fn suffix_of(name: &str) -> String {
    let last = name.rsplit('-').next().unwrap_or_default();
    if last.parse::<i64>().is_ok() { last.to_string() } else { String::new() }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
    use mco_api::KubeletConfig;
    use serde_json::json;

    use super::*;

    fn pool() -> MachineConfigPool {
        serde_json::from_value(json!({
            "metadata": {"name": "worker", "uid": "u1", "labels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}},
            "spec": {},
        }))
        .unwrap()
    }

    fn kc(name: &str, day: i8, suffix: Option<&str>) -> KubeletConfig {
        let mut kc = KubeletConfig::new(name, Default::default());
        kc.spec.machine_config_pool_selector = Some(LabelSelector {
            match_labels: Some(
                [("pools.operator.machineconfiguration.openshift.io/worker".to_string(), String::new())].into(),
            ),
            ..Default::default()
        });
        let time = k8s_openapi::jiff::Timestamp::from_second(i64::from(day) * 86_400).unwrap();
        kc.metadata.creation_timestamp = Some(Time(time));
        kc.metadata.annotations = suffix.map(|s| [(MC_NAME_SUFFIX_ANNOTATION.to_string(), s.to_string())].into());
        kc
    }

    #[test]
    fn names_follow_the_suffix_rules() {
        let none = |_: &str| false;
        let base = "99-worker-generated-kubelet";
        let cases: Vec<(Vec<KubeletConfig>, usize, Result<&str, &str>)> = vec![
            // Alone in its pool, with or without the annotation: the base name.
            (vec![kc("a", 1, None)], 0, Ok(base)),
            (vec![kc("a", 1, Some(""))], 0, Ok(base)),
            // The annotation decides for a KubeletConfig that has it.
            (vec![kc("a", 1, Some("")), kc("b", 2, Some("3"))], 1, Ok("99-worker-generated-kubelet-3")),
            // A new one gets the largest suffix plus one.
            (
                vec![kc("a", 1, Some("")), kc("b", 2, Some("4")), kc("c", 3, None)],
                2,
                Ok("99-worker-generated-kubelet-5"),
            ),
            (
                vec![kc("a", 1, Some("9")), kc("c", 3, None)],
                1,
                Err(
                    "max number of supported kubelet config (10) has been reached. Please delete old kubelet configs before retrying",
                ),
            ),
            (
                vec![kc("a", 1, Some("x")), kc("c", 3, None)],
                1,
                Err("error converting x to int: strconv.Atoi: parsing \"x\": invalid syntax"),
            ),
        ];
        for (all, synced, want) in cases {
            let got = managed_key(&pool(), &all[synced], &all, &none).map(|k| k.name);
            assert_eq!(got.as_deref(), want.map_err(str::to_string).as_deref(), "{:?}", all[synced].metadata.name);
        }
    }

    #[test]
    fn a_pre_4_7_name_is_taken_over() {
        let exists = |name: &str| name == "99-worker-u1-kubelet";
        let key = managed_key(&pool(), &kc("a", 1, None), &[kc("a", 1, None)], &exists).unwrap();
        assert_eq!(
            key,
            ManagedKey {
                name: "99-worker-generated-kubelet".into(),
                renamed_from: Some("99-worker-u1-kubelet".into())
            }
        );
        let both = |name: &str| name.starts_with("99-worker");
        assert_eq!(managed_key(&pool(), &kc("a", 1, None), &[kc("a", 1, None)], &both).unwrap().renamed_from, None);
    }

    #[test]
    fn the_annotation_is_the_numeric_suffix() {
        for (name, want) in [
            ("99-worker-generated-kubelet", ""),
            ("99-worker-generated-kubelet-3", "3"),
            ("99-infra-2-generated-kubelet", ""),
        ] {
            assert_eq!(suffix_of(name), want, "{name}");
        }
    }
}
