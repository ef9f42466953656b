//! The pools' kubelet config template (`templates/<role>/01-<role>-kubelet/_base/files/kubelet.yaml`
//! of the original, vendored in `templates/`) and the part of Go's `text/template` it uses:
//! `{{.Field.Path}}`, `{{.}}`, `{{range .List}}`, `{{if eq .Field "literal"}}`, `{{end}}` and
//! the `{{-`/`-}}` whitespace trimming.

use std::collections::BTreeMap;

/// A value the template can refer to.
#[derive(Debug, Clone)]
pub(crate) enum Data {
    Str(String),
    List(Vec<Data>),
    Map(BTreeMap<&'static str, Data>),
}

/// Why a template could not be executed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("template: unsupported action {0:?}")]
    Unsupported(String),
    #[error("template: no {0} in the data")]
    Missing(String),
    #[error("template: {{{{{0}}}}} has no {{{{end}}}}")]
    Unclosed(String),
    #[error("template: unexpected {{{{end}}}}")]
    UnexpectedEnd,
    #[error("template: unclosed action")]
    UnclosedAction,
}

/// The template of a role: `master` and `arbiter` have their own, every other pool (custom pools
/// are the worker's children) uses the worker's.
pub(crate) fn kubelet_template(role: &str) -> &'static str {
    match role {
        "master" => include_str!("../templates/master-kubelet.yaml"),
        "arbiter" => include_str!("../templates/arbiter-kubelet.yaml"),
        _ => include_str!("../templates/worker-kubelet.yaml"),
    }
}

enum Node {
    Text(String),
    Print(String),
    Range(String, Vec<Node>),
    IfEq(String, String, Vec<Node>),
}

/// Executes `template` with `data` as the dot.
pub(crate) fn execute(template: &str, data: &Data) -> Result<String, TemplateError> {
    let tokens = tokenize(template)?;
    let mut tokens = tokens.into_iter();
    let nodes = parse(&mut tokens, None)?;
    let mut out = String::new();
    run(&nodes, data, &mut out)?;
    Ok(out)
}

enum Token {
    Text(String),
    Action(String),
}

/// Text and actions, with the text around `{{-` and `-}}` trimmed.
fn tokenize(template: &str) -> Result<Vec<Token>, TemplateError> {
    let mut tokens = Vec::new();
    let mut rest = template;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let mut text = &rest[..start];
        if trim_next {
            text = text.trim_start();
        }
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or(TemplateError::UnclosedAction)?;
        let mut action = &after[..end];
        if let Some(trimmed) = action.strip_prefix("- ") {
            text = text.trim_end();
            action = trimmed;
        }
        trim_next = false;
        if let Some(trimmed) = action.strip_suffix(" -") {
            trim_next = true;
            action = trimmed;
        }
        tokens.push(Token::Text(text.to_string()));
        tokens.push(Token::Action(action.trim().to_string()));
        rest = &after[end + 2..];
    }
    tokens.push(Token::Text(if trim_next { rest.trim_start() } else { rest }.to_string()));
    Ok(tokens)
}

fn parse(tokens: &mut impl Iterator<Item = Token>, open: Option<&str>) -> Result<Vec<Node>, TemplateError> {
    let mut nodes = Vec::new();
    while let Some(token) = tokens.next() {
        let action = match token {
            Token::Text(text) => {
                nodes.push(Node::Text(text));
                continue;
            }
            Token::Action(action) => action,
        };
        let words: Vec<&str> = action.split_whitespace().collect();
        match words.as_slice() {
            ["end"] if open.is_some() => return Ok(nodes),
            ["end"] => return Err(TemplateError::UnexpectedEnd),
            [path] if path.starts_with('.') => nodes.push(Node::Print(path.to_string())),
            ["range", path] if path.starts_with('.') => {
                nodes.push(Node::Range(path.to_string(), parse(tokens, Some(&action))?));
            }
            ["if", "eq", path, literal] if path.starts_with('.') && literal.len() >= 2 && literal.starts_with('"') => {
                let literal = literal.trim_matches('"').to_string();
                nodes.push(Node::IfEq(path.to_string(), literal, parse(tokens, Some(&action))?));
            }
            _ => return Err(TemplateError::Unsupported(action)),
        }
    }
    match open {
        Some(action) => Err(TemplateError::Unclosed(action.to_string())),
        None => Ok(nodes),
    }
}

fn lookup<'a>(dot: &'a Data, path: &str) -> Result<&'a Data, TemplateError> {
    path.split('.').filter(|p| !p.is_empty()).try_fold(dot, |data, name| match data {
        Data::Map(map) => map.get(name).ok_or_else(|| TemplateError::Missing(path.to_string())),
        _ => Err(TemplateError::Missing(path.to_string())),
    })
}

fn run(nodes: &[Node], dot: &Data, out: &mut String) -> Result<(), TemplateError> {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Print(path) => match lookup(dot, path)? {
                Data::Str(s) => out.push_str(s),
                _ => return Err(TemplateError::Unsupported(format!("printing {path}"))),
            },
            Node::Range(path, body) => {
                if let Data::List(items) = lookup(dot, path)? {
                    for item in items {
                        run(body, item, out)?;
                    }
                }
            }
            Node::IfEq(path, literal, body) => {
                if matches!(lookup(dot, path)?, Data::Str(s) if s == literal) {
                    run(body, dot, out)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Data {
        Data::Map(BTreeMap::from([
            ("Name", Data::Str("x".into())),
            ("List", Data::List(vec![Data::Str("a".into()), Data::Str("b".into())])),
            ("Infra", Data::Map(BTreeMap::from([("Topology", Data::Str("DualReplica".into()))]))),
        ]))
    }

    #[test]
    fn executes_the_subset_with_go_trimming() {
        let cases = [
            ("n: {{.Name}}\n", "n: x\n"),
            ("l:\n  {{- range .List }}\n  - {{ . }}\n  {{- end }}\nz", "l:\n  - a\n  - b\nz"),
            ("{{- if eq .Infra.Topology \"DualReplica\" }}\ndr\n{{- end }}", "\ndr"),
            ("{{ if eq .Name \"y\" }}no{{ end }}yes", "yes"),
            ("a  {{- .Name -}}  b", "axb"),
        ];
        for (template, want) in cases {
            assert_eq!(execute(template, &data()).unwrap(), want, "{template}");
        }
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        assert_eq!(execute("{{ .Nope }}", &data()), Err(TemplateError::Missing(".Nope".into())));
        assert_eq!(
            execute("{{ printf \"%s\" .Name }}", &data()),
            Err(TemplateError::Unsupported("printf \"%s\" .Name".into()))
        );
        assert_eq!(execute("{{ range .List }}", &data()), Err(TemplateError::Unclosed("range .List".into())));
        assert_eq!(execute("{{ end }}", &data()), Err(TemplateError::UnexpectedEnd));
        assert_eq!(execute("{{ .Name", &data()), Err(TemplateError::UnclosedAction));
    }

    #[test]
    fn every_role_template_executes() {
        for role in ["master", "worker", "arbiter", "infra"] {
            let tls = Data::List(vec![Data::Str("TLS_AES_128_GCM_SHA256".into())]);
            let data = Data::Map(BTreeMap::from([
                ("ClusterDNSIP", Data::Str("172.30.0.10".into())),
                ("TLSMinVersion", Data::Str("VersionTLS12".into())),
                ("TLSCipherSuites", tls),
                (
                    "Infra",
                    Data::Map(BTreeMap::from([(
                        "Status",
                        Data::Map(BTreeMap::from([("ControlPlaneTopology", Data::Str("HighlyAvailable".into()))])),
                    )])),
                ),
            ]));
            let out = execute(kubelet_template(role), &data).unwrap();
            assert!(out.contains("- 172.30.0.10\n") && out.contains("- TLS_AES_128_GCM_SHA256"), "{role}: {out}");
        }
    }
}
