//! Least privilege, checked both ways: the requests mco's service accounts made (the API server's
//! audit log) against the RBAC rules `deploy/` grants them. Every request must have been allowed,
//! and every verb on every resource a rule grants must have been used, apart from a documented list
//! of grants a lab run does not exercise.

use std::collections::BTreeSet;
use std::fmt;

use anyhow::Context as _;
use serde::Deserialize;
use serde_json::Value;

/// A request from the audit log (audit.k8s.io/v1 Event, level Metadata).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub user: String,
    pub verb: String,
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub code: u16,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}.{}", self.user, self.verb, self.resource, self.group)?;
        if let Some(namespace) = &self.namespace {
            write!(f, " in {namespace}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " named {name}")?;
        }
        write!(f, " ({})", self.code)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    verb: String,
    user: User,
    object_ref: Option<ObjectRef>,
    response_status: Option<Status>,
}

#[derive(Deserialize)]
struct User {
    username: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    api_group: Option<String>,
}

#[derive(Deserialize)]
struct Status {
    code: Option<u16>,
}

/// The resource requests of an audit log (JSON lines); non-resource requests (discovery) are left
/// out.
pub fn parse_audit_log(text: &str) -> anyhow::Result<Vec<Request>> {
    let mut requests = Vec::new();
    for (index, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let event: Event = serde_json::from_str(line).with_context(|| format!("audit log line {}", index + 1))?;
        let Some(object) = event.object_ref else { continue };
        let Some(resource) = object.resource else { continue };
        let resource = match object.subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource,
        };
        requests.push(Request {
            user: event.user.username,
            verb: event.verb,
            group: object.api_group.unwrap_or_default(),
            resource,
            namespace: object.namespace,
            name: object.name,
            code: event.response_status.and_then(|s| s.code).unwrap_or(0),
        });
    }
    Ok(requests)
}

/// One verb on one resource that a rule grants a service account (rules are expanded so that each
/// can be found used or unused on its own).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// `system:serviceaccount:NS:NAME`
    pub user: String,
    /// The Role's namespace; `None` for a ClusterRole bound cluster-wide.
    pub namespace: Option<String>,
    /// `ClusterRole/NAME` or `Role/NS/NAME`.
    pub role: String,
    pub group: String,
    pub resource: String,
    pub verb: String,
    /// Empty: any name.
    pub names: Vec<String>,
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} may {} {}.{}", self.role, self.verb, self.resource, self.group)?;
        if !self.names.is_empty() {
            write!(f, " named {}", self.names.join(","))?;
        }
        Ok(())
    }
}

impl Grant {
    pub fn allows(&self, request: &Request) -> bool {
        self.user == request.user
            && self.group == request.group
            && self.resource == request.resource
            && self.verb == request.verb
            && (self.namespace.is_none() || self.namespace == request.namespace)
            && (self.names.is_empty() || request.name.as_ref().is_some_and(|n| self.names.contains(n)))
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// The grants of every (Cluster)RoleBinding among `objects` to a ServiceAccount, resolved through
/// the Roles and ClusterRoles among them. Wildcards are refused: least privilege has none.
pub fn grants(objects: &[Value]) -> anyhow::Result<Vec<Grant>> {
    let find = |kind: &str, namespace: Option<&str>, name: &str| {
        objects.iter().find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
        })
    };
    let mut out = Vec::new();
    for binding in objects.iter().filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding") {
        let namespace = binding["metadata"]["namespace"].as_str();
        let (kind, name) =
            (binding["roleRef"]["kind"].as_str().unwrap_or(""), binding["roleRef"]["name"].as_str().unwrap_or(""));
        let role_namespace = if kind == "Role" { namespace } else { None };
        let role = find(kind, role_namespace, name).with_context(|| {
            format!("{} {} binds {kind} {name}, which is not there", binding["kind"], binding["metadata"]["name"])
        })?;
        let role_name = match role_namespace {
            Some(ns) => format!("Role/{ns}/{name}"),
            None => format!("ClusterRole/{name}"),
        };
        let subjects = binding["subjects"].as_array().cloned().unwrap_or_default();
        for subject in subjects.iter().filter(|s| s["kind"] == "ServiceAccount") {
            let user = format!(
                "system:serviceaccount:{}:{}",
                subject["namespace"].as_str().unwrap_or_default(),
                subject["name"].as_str().unwrap_or_default()
            );
            for rule in role["rules"].as_array().into_iter().flatten() {
                let (groups, resources, verbs) =
                    (strings(&rule["apiGroups"]), strings(&rule["resources"]), strings(&rule["verbs"]));
                if [&groups, &resources, &verbs].iter().any(|list| list.iter().any(|v| v == "*")) {
                    anyhow::bail!("{role_name} has a wildcard rule: {rule}");
                }
                for group in &groups {
                    for resource in &resources {
                        for verb in &verbs {
                            out.push(Grant {
                                user: user.clone(),
                                namespace: namespace.map(String::from),
                                role: role_name.clone(),
                                group: group.clone(),
                                resource: resource.clone(),
                                verb: verb.clone(),
                                names: strings(&rule["resourceNames"]),
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// What the comparison found for the service accounts checked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Requests refused (403) or that no grant allows.
    pub missing: BTreeSet<Request>,
    /// Grants no request used.
    pub unused: BTreeSet<Grant>,
}

/// Compares the requests of `users` with their grants; `unexercised` grants (documented as
/// not used by the run that made the log) are not reported unused.
pub fn check(grants: &[Grant], requests: &[Request], users: &[&str], unexercised: &[&Grant]) -> Findings {
    let mut findings = Findings::default();
    let ours: Vec<&Request> = requests.iter().filter(|r| users.contains(&r.user.as_str())).collect();
    for request in &ours {
        if request.code == 403 || !grants.iter().any(|g| g.allows(request)) {
            findings.missing.insert((*request).clone());
        }
    }
    for grant in grants.iter().filter(|g| users.contains(&g.user.as_str())) {
        if !unexercised.contains(&grant) && !ours.iter().any(|r| r.code != 403 && grant.allows(r)) {
            findings.unused.insert(grant.clone());
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SA: &str = "system:serviceaccount:mco:controller";

    fn event(
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        code: u16,
    ) -> String {
        json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": "ResponseComplete",
            "verb": verb, "user": {"username": SA, "groups": ["system:serviceaccounts"]},
            "objectRef": {"resource": resource, "namespace": namespace, "name": name, "apiGroup": group, "apiVersion": "v1"},
            "responseStatus": {"metadata": {}, "code": code},
        })
        .to_string()
    }

    fn manifests() -> Vec<Value> {
        vec![
            json!({"kind": "ClusterRole", "metadata": {"name": "c"}, "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
            ]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "c"}, "roleRef": {"kind": "ClusterRole", "name": "c"},
                "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": "mco"}]}),
            json!({"kind": "Role", "metadata": {"name": "r", "namespace": "mco"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["l"], "verbs": ["update"]},
            ]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "r", "namespace": "mco"}, "roleRef": {"kind": "Role", "name": "r"},
                "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": "mco"}]}),
        ]
    }

    #[test]
    fn the_audit_log_gives_each_resource_request_and_skips_the_rest() {
        let log = [
            event("get", "", "nodes", None, Some("n1"), 200),
            json!({"verb": "get", "user": {"username": SA}, "requestURI": "/version", "responseStatus": {"code": 200}})
                .to_string(),
            String::new(),
        ]
        .join("\n");
        let requests = parse_audit_log(&log).unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].to_string(), format!("{SA} get nodes. named n1 (200)"));
        let error = parse_audit_log("{not json").unwrap_err();
        assert!(format!("{error:#}").starts_with("audit log line 1: "), "{error:#}");
    }

    #[test]
    fn rules_expand_per_verb_and_keep_their_role_namespace_and_names() {
        let grants = grants(&manifests()).unwrap();
        let shown: Vec<String> = grants.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "ClusterRole/c may get nodes.",
                "ClusterRole/c may patch nodes.",
                "Role/mco/r may update leases.coordination.k8s.io named l"
            ]
        );
        assert_eq!(grants[2].namespace.as_deref(), Some("mco"));
    }

    #[test]
    fn wildcards_and_dangling_role_refs_are_errors() {
        let mut objects = manifests();
        objects[0]["rules"][0]["verbs"] = json!(["*"]);
        assert!(grants(&objects).unwrap_err().to_string().contains("ClusterRole/c has a wildcard rule"));
        let mut objects = manifests();
        objects.remove(2);
        assert!(grants(&objects).unwrap_err().to_string().contains("binds Role r, which is not there"));
    }

    #[test]
    fn check_finds_refused_and_ungranted_requests_and_unused_grants() {
        let grants = grants(&manifests()).unwrap();
        let log = [
            event("get", "", "nodes", None, Some("n1"), 200),
            event("update", "coordination.k8s.io", "leases", Some("mco"), Some("l"), 200),
            // Refused by the API server.
            event("list", "", "secrets", Some("kube-system"), None, 403),
            // Another name than the rule's: no grant allows it.
            event("update", "coordination.k8s.io", "leases", Some("mco"), Some("other"), 200),
            // Someone else's requests are not looked at.
            event("delete", "", "pods", Some("x"), Some("y"), 403).replace(SA, "system:serviceaccount:mco:other"),
        ]
        .join("\n");
        let requests = parse_audit_log(&log).unwrap();
        let findings = check(&grants, &requests, &[SA], &[]);
        let missing: Vec<String> = findings.missing.iter().map(ToString::to_string).collect();
        assert_eq!(
            missing,
            [
                format!("{SA} list secrets. in kube-system (403)"),
                format!("{SA} update leases.coordination.k8s.io in mco named other (200)"),
            ]
        );
        let unused: Vec<String> = findings.unused.iter().map(ToString::to_string).collect();
        assert_eq!(unused, ["ClusterRole/c may patch nodes."]);
        // A documented exception is not reported.
        let patch = grants.iter().find(|g| g.verb == "patch").unwrap();
        assert!(check(&grants, &requests, &[SA], &[patch]).unused.is_empty());
    }
}
