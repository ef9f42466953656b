//! Kubernetes label selectors: matching and the string form Go's `labels.Selector` prints.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// A selector the API server would have refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector: {0}")]
pub struct InvalidSelector(String);

/// What a pool's selector selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// `nil`: matches nothing.
    Nothing,
    /// `{}`: matches everything (refused for pools: "A non-empty selector is required").
    Everything,
    /// A non-empty selector, as sorted requirements.
    Requirements(Vec<Requirement>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selection {
    /// Interprets a selector as `metav1.LabelSelectorAsSelector` does.
    pub fn new(selector: Option<&LabelSelector>) -> Result<Self, InvalidSelector> {
        let Some(selector) = selector else { return Ok(Selection::Nothing) };
        let mut reqs = Vec::new();
        for (k, v) in selector.match_labels.iter().flatten() {
            reqs.push(Requirement { key: k.clone(), op: Op::Equals, values: vec![v.clone()] });
        }
        for expr in selector.match_expressions.iter().flatten() {
            reqs.push(requirement(expr)?);
        }
        if reqs.is_empty() {
            return Ok(Selection::Everything);
        }
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selection::Requirements(reqs))
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        match self {
            Selection::Nothing => false,
            Selection::Everything => true,
            Selection::Requirements(reqs) => reqs.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.op {
                    Op::Equals | Op::In => value.is_some_and(|v| r.values.contains(v)),
                    Op::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                    Op::Exists => value.is_some(),
                    Op::DoesNotExist => value.is_none(),
                }
            }),
        }
    }
}

/// Go's `labels.Selector.String()`: `a=b,c in (d,e),!f`.
impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Selection::Requirements(reqs) = self else {
            return Ok(());
        };
        let parts: Vec<String> = reqs
            .iter()
            .map(|r| match r.op {
                Op::Equals => format!("{}={}", r.key, r.values[0]),
                Op::In => format!("{} in ({})", r.key, r.values.join(",")),
                Op::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Op::Exists => r.key.clone(),
                Op::DoesNotExist => format!("!{}", r.key),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

fn requirement(expr: &LabelSelectorRequirement) -> Result<Requirement, InvalidSelector> {
    let mut values = expr.values.clone().unwrap_or_default();
    let op = match expr.operator.as_str() {
        "In" => Op::In,
        "NotIn" => Op::NotIn,
        "Exists" => Op::Exists,
        "DoesNotExist" => Op::DoesNotExist,
        other => return Err(InvalidSelector(format!("{other:?} is not a valid label selector operator"))),
    };
    match op {
        Op::In | Op::NotIn if values.is_empty() => {
            return Err(InvalidSelector(format!("{}: values must be non-empty for {}", expr.key, expr.operator)));
        }
        Op::Exists | Op::DoesNotExist if !values.is_empty() => {
            return Err(InvalidSelector(format!("{}: values must be empty for {}", expr.key, expr.operator)));
        }
        _ => {}
    }
    values.sort();
    values.dedup();
    Ok(Requirement { key: expr.key.clone(), op, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(yaml: &str) -> LabelSelector {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn matching_and_printing() {
        // (selector, labels, matches, printed form)
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool, &'a str);
        let cases: &[Case] = &[
            ("matchLabels: {role: worker}", &[("role", "worker")], true, "role=worker"),
            ("matchLabels: {role: worker}", &[("role", "master")], false, "role=worker"),
            ("matchLabels: {role: worker}", &[], false, "role=worker"),
            (
                "matchExpressions: [{key: role, operator: In, values: [worker, infra]}]",
                &[("role", "infra")],
                true,
                "role in (infra,worker)",
            ),
            ("matchExpressions: [{key: role, operator: NotIn, values: [master]}]", &[], true, "role notin (master)"),
            ("matchExpressions: [{key: role, operator: Exists}]", &[("role", "")], true, "role"),
            ("matchExpressions: [{key: role, operator: DoesNotExist}]", &[("role", "x")], false, "!role"),
            (
                "{matchLabels: {b: '1'}, matchExpressions: [{key: a, operator: Exists}]}",
                &[("a", ""), ("b", "1")],
                true,
                "a,b=1",
            ),
        ];
        for (yaml, l, want, printed) in cases {
            let sel = Selection::new(Some(&selector(yaml))).unwrap();
            assert_eq!(sel.matches(Some(&labels(l))), *want, "{yaml} {l:?}");
            assert_eq!(sel.to_string(), *printed);
        }
    }

    #[test]
    fn nil_matches_nothing_and_empty_everything() {
        assert_eq!(Selection::new(None).unwrap(), Selection::Nothing);
        assert!(!Selection::Nothing.matches(None));
        assert_eq!(Selection::new(Some(&selector("{}"))).unwrap(), Selection::Everything);
    }

    #[test]
    fn invalid_selectors_are_refused() {
        for yaml in [
            "matchExpressions: [{key: a, operator: Bogus}]",
            "matchExpressions: [{key: a, operator: In, values: []}]",
            "matchExpressions: [{key: a, operator: Exists, values: [x]}]",
        ] {
            assert!(Selection::new(Some(&selector(yaml))).is_err(), "{yaml}");
        }
    }
}
