//! containers-policy.json(5) with the allowed and blocked registries (`updatePolicyJSON`), written
//! as the original writes it: c/image's `signature.Policy` through Go's `json.MarshalIndent` with
//! two spaces (maps sorted by key, `<`, `>`, `&` escaped, no final newline).
//!
//! The base policy must be one the templates could produce: requirements of the types
//! `insecureAcceptAnything` and `reject` only (the original says it cannot safely edit others).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{RegistriesError, ScopeList};
use crate::reference::parse_named;
use crate::scope::is_valid_registries_conf_scope;

/// A requirement the templates use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
enum Requirement {
    #[serde(rename = "insecureAcceptAnything")]
    InsecureAcceptAnything,
    #[serde(rename = "reject")]
    Reject,
}

/// `signature.Policy`: the default requirements and, per transport, per scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Policy {
    default: Vec<Requirement>,
    transports: BTreeMap<String, BTreeMap<String, Vec<Requirement>>>,
}

/// The policy with `allowed` accepted and everything else rejected, or `blocked` rejected and
/// everything else accepted. An empty list is taken for Go's nil (the controller never passes an
/// empty one); with both empty `base` is returned as it is.
///
/// Both lists set is refused, except for the allowed list the controller makes itself when the
/// payload's registry is blocked: exactly the payload repository of `release_image`.
pub fn update_policy_json(
    base: &str,
    blocked: &[String],
    allowed: &[String],
    release_image: &str,
) -> Result<String, RegistriesError> {
    if !allowed.is_empty() && !blocked.is_empty() {
        let payload = parse_named(release_image).ok_or(RegistriesError::ReleaseImage)?;
        if !(allowed.len() == 1 && allowed[0] == payload.name()) {
            return Err(RegistriesError::AllowedAndBlocked);
        }
    }
    if allowed.is_empty() && blocked.is_empty() {
        return Ok(base.to_string());
    }
    for (list, scopes) in [(ScopeList::Blocked, blocked), (ScopeList::Allowed, allowed)] {
        if let Some(scope) = scopes.iter().find(|s| !is_valid_registries_conf_scope(s)) {
            return Err(RegistriesError::InvalidScope { list, scope: scope.clone() });
        }
    }
    let mut policy = parse_policy(base)?;
    let mut scopes: BTreeMap<String, Vec<Requirement>> = BTreeMap::new();
    if !allowed.is_empty() {
        policy.default = vec![Requirement::Reject];
        for scope in allowed {
            scopes.insert(scope.clone(), vec![Requirement::InsecureAcceptAnything]);
        }
    }
    if !blocked.is_empty() {
        policy.default = vec![Requirement::InsecureAcceptAnything];
        for scope in blocked {
            scopes.insert(scope.clone(), vec![Requirement::Reject]);
        }
    }
    if !scopes.is_empty() {
        // "atomic" is "docker" without the scopes of three or more slashes, which it cannot hold.
        let atomic = scopes.iter().filter(|(scope, _)| scope.matches('/').count() < 3);
        let atomic = atomic.map(|(scope, requirements)| (scope.clone(), requirements.clone())).collect();
        policy.transports.insert("atomic".into(), atomic);
        policy.transports.insert("docker".into(), scopes);
    }
    Ok(go_marshal_indent(&policy))
}

/// Reads a policy as c/image's strict parser would, for the requirement types above.
fn parse_policy(text: &str) -> Result<Policy, RegistriesError> {
    let error = |message: String| RegistriesError::PolicyDecode(message);
    let value: Value = serde_json::from_str(text).map_err(|e| error(e.to_string()))?;
    let object = value.as_object().ok_or_else(|| error("the policy is not an object".into()))?;
    let mut default = None;
    let mut transports = BTreeMap::new();
    for (key, value) in object {
        match key.as_str() {
            "default" => default = Some(requirements(value).map_err(error)?),
            "transports" => {
                for (transport, scopes) in as_object(value, "transports").map_err(error)? {
                    let mut by_scope = BTreeMap::new();
                    for (scope, list) in as_object(scopes, transport).map_err(error)? {
                        by_scope.insert(scope.clone(), requirements(list).map_err(error)?);
                    }
                    transports.insert(transport.clone(), by_scope);
                }
            }
            other => return Err(error(format!("unknown key {other:?}"))),
        }
    }
    let default = default.ok_or_else(|| error("Default policy is missing".into()))?;
    Ok(Policy { default, transports })
}

fn as_object<'v>(value: &'v Value, what: &str) -> Result<&'v Map<String, Value>, String> {
    value.as_object().ok_or_else(|| format!("{what} is not an object"))
}

fn requirements(value: &Value) -> Result<Vec<Requirement>, String> {
    let list = value.as_array().ok_or("requirements are not a list")?;
    if list.is_empty() {
        return Err("List of verification policy requirements must not be empty".into());
    }
    list.iter()
        .map(|item| {
            let object = as_object(item, "a requirement")?;
            if object.len() != 1 {
                return Err(format!("unsupported requirement {item}"));
            }
            match object.get("type").and_then(Value::as_str) {
                Some("insecureAcceptAnything") => Ok(Requirement::InsecureAcceptAnything),
                Some("reject") => Ok(Requirement::Reject),
                _ => Err(format!("unsupported requirement {item}")),
            }
        })
        .collect()
}

/// Go's `json.MarshalIndent(v, "", "  ")`: compact `encoding/json` output re-indented by
/// `json.Indent`'s rules (empty objects and arrays stay `{}` and `[]`).
fn go_marshal_indent<T: Serialize>(value: &T) -> String {
    let compact = mco_goser::to_go_json(value, mco_goser::Escaping::Modern).expect("a policy always serializes");
    let compact = String::from_utf8(compact).expect("JSON is UTF-8");
    let mut out = String::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                if matches!(chars.peek(), Some('}' | ']')) {
                    out.push(chars.next().expect("peeked"));
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth -= 1;
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = r#"{"default": [{"type": "insecureAcceptAnything"}],
        "transports": {"docker-daemon": {"": [{"type":"insecureAcceptAnything"}]}}}"#;
    const RELEASE: &str = "quay.io/ocp/release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn indentation_is_gos() {
        let value: Value = serde_json::from_str(r#"{"a":[],"b":{},"c":[{"d":"x,y:{}"}],"e":"a\"b"}"#).unwrap();
        assert_eq!(
            go_marshal_indent(&value),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    {\n      \"d\": \"x,y:{}\"\n    }\n  ],\n  \"e\": \"a\\\"b\"\n}"
        );
    }

    #[test]
    fn refusals() {
        // (blocked, allowed, error)
        let cases: &[(&[&str], &[&str], RegistriesError)] = &[
            (&["b.io"], &["a.io"], RegistriesError::AllowedAndBlocked),
            (&["b.io"], &["quay.io/ocp/release", "a.io"], RegistriesError::AllowedAndBlocked),
            (&["*.b.io/x"], &[], RegistriesError::InvalidScope { list: ScopeList::Blocked, scope: "*.b.io/x".into() }),
            (&[], &["a*.io"], RegistriesError::InvalidScope { list: ScopeList::Allowed, scope: "a*.io".into() }),
        ];
        for (blocked, allowed, want) in cases {
            let got = update_policy_json(TEMPLATE, &strings(blocked), &strings(allowed), RELEASE);
            assert_eq!(got.as_ref(), Err(want), "{blocked:?} {allowed:?}");
        }
        // The payload repository alone may be allowed beside blocked registries.
        assert!(update_policy_json(TEMPLATE, &strings(&["b.io"]), &strings(&["quay.io/ocp/release"]), RELEASE).is_ok());
        // ... which needs a release image that parses.
        let got = update_policy_json(TEMPLATE, &strings(&["b.io"]), &strings(&["a.io"]), "release");
        assert_eq!(got, Err(RegistriesError::ReleaseImage));
    }

    #[test]
    fn nothing_to_change_keeps_the_base_bytes() {
        assert_eq!(update_policy_json(TEMPLATE, &[], &[], RELEASE).unwrap(), TEMPLATE);
    }

    #[test]
    fn bases_the_templates_cannot_produce_are_refused() {
        for base in [
            "[]",
            r#"{"transports": {}}"#,
            r#"{"default": []}"#,
            r#"{"default": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/k"}]}"#,
            r#"{"default": [{"type": "reject"}], "extra": 1}"#,
        ] {
            let got = update_policy_json(base, &strings(&["b.io"]), &[], RELEASE);
            assert!(matches!(got, Err(RegistriesError::PolicyDecode(_))), "{base}: {got:?}");
        }
    }
}
