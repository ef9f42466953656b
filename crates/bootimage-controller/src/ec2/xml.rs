//! A minimal XML element tree over the `xmlparser` tokenizer, enough for EC2 Query API answers:
//! element names (namespace prefixes dropped), text (entities and character references
//! resolved, CDATA kept verbatim) and child elements. Attributes, comments and processing
//! instructions are ignored; documents with a DTD are refused (EC2 never sends one), and so is
//! nesting deeper than [`MAX_DEPTH`] (EC2's answers are a few levels deep).

/// The deepest nesting accepted (it also bounds the recursion of dropping a tree).
pub const MAX_DEPTH: usize = 64;

/// An XML element: its local name, its text (the concatenation of its own text nodes) and its
/// child elements in document order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    name: String,
    /// The name as written (`prefix:local`), to match the end tag against.
    qualified: String,
    text: String,
    children: Vec<Element>,
}

impl Element {
    /// The local name (`item` of `<ec2:item>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The element's own text, unescaped; empty for `<a/>`.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The child elements in document order.
    pub fn children(&self) -> &[Element] {
        &self.children
    }

    /// The first child element named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// The child elements named `name`.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The first element at `path` below this one (`["instancesSet", "item", "instanceId"]`):
    /// the first child matching each step.
    pub fn find(&self, path: &[&str]) -> Option<&Element> {
        path.iter().try_fold(self, |element, name| element.child(name))
    }

    /// The text of [`Element::find`]`(path)`.
    pub fn text_at(&self, path: &[&str]) -> Option<&str> {
        self.find(path).map(Element::text)
    }
}

/// Parses a whole document into its root element.
pub fn parse(document: &str) -> Result<Element, String> {
    use xmlparser::{ElementEnd, Token};

    let mut open: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    for token in xmlparser::Tokenizer::from(document) {
        match token.map_err(|e| e.to_string())? {
            Token::DtdStart { .. } | Token::EmptyDtd { .. } | Token::EntityDeclaration { .. } => {
                return Err("documents with a DTD are not supported".to_string());
            }
            Token::ElementStart { prefix, local, .. } => {
                if root.is_some() {
                    return Err("more than one root element".to_string());
                }
                if open.len() >= MAX_DEPTH {
                    return Err(format!("elements nested deeper than {MAX_DEPTH} levels"));
                }
                let qualified = if prefix.is_empty() { local.to_string() } else { format!("{prefix}:{local}") };
                open.push(Element { name: local.to_string(), qualified, ..Element::default() });
            }
            Token::ElementEnd { end: ElementEnd::Open, .. } => {}
            Token::ElementEnd { end, .. } => {
                let element = open.pop().ok_or("an end tag without a start tag")?;
                if let ElementEnd::Close(prefix, local) = end {
                    let closed = if prefix.is_empty() { local.to_string() } else { format!("{prefix}:{local}") };
                    if closed != element.qualified {
                        return Err(format!("</{closed}> closes <{}>", element.qualified));
                    }
                }
                match open.last_mut() {
                    Some(parent) => parent.children.push(element),
                    None => root = Some(element),
                }
            }
            Token::Text { text } => {
                if let Some(element) = open.last_mut() {
                    unescape_into(text.as_str(), &mut element.text)?;
                }
            }
            Token::Cdata { text, .. } => {
                if let Some(element) = open.last_mut() {
                    element.text.push_str(text.as_str());
                }
            }
            Token::Declaration { .. }
            | Token::ProcessingInstruction { .. }
            | Token::Comment { .. }
            | Token::Attribute { .. }
            | Token::DtdEnd { .. } => {}
        }
    }
    if let Some(element) = open.last() {
        return Err(format!("<{}> is not closed", element.qualified));
    }
    root.ok_or_else(|| "no root element".to_string())
}

/// Appends `raw` to `out` with the predefined entities and character references resolved.
fn unescape_into(raw: &str, out: &mut String) -> Result<(), String> {
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let semicolon = after.find(';').ok_or_else(|| format!("an unterminated reference in {raw:?}"))?;
        let reference = &after[..semicolon];
        let c = match reference {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "apos" => '\'',
            "quot" => '"',
            _ => {
                let code = if let Some(hex) = reference.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(decimal) = reference.strip_prefix('#') {
                    decimal.parse().ok()
                } else {
                    None
                };
                code.and_then(char::from_u32).ok_or_else(|| format!("an unknown reference &{reference};"))?
            }
        };
        out.push(c);
        rest = &after[semicolon + 1..];
    }
    out.push_str(rest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_text_and_children() {
        let root = parse(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- a comment -->
<ec2:A xmlns:ec2="urn:x" attr="1">
  <b>one &amp; &lt;two&gt; &#65;&#x42; &quot;&apos;</b>
  <c/><b><![CDATA[<raw> &amp;]]></b>
  <ec2:d>x<?pi?>y</ec2:d>
</ec2:A>"#,
        )
        .unwrap();
        assert_eq!(root.name(), "A");
        assert_eq!(root.children().iter().map(Element::name).collect::<Vec<_>>(), ["b", "c", "b", "d"]);
        assert_eq!(root.text_at(&["b"]), Some("one & <two> AB \"'"));
        assert_eq!(root.children_named("b").nth(1).map(Element::text), Some("<raw> &amp;"));
        assert_eq!(root.text_at(&["c"]), Some(""));
        assert_eq!(root.text_at(&["d"]), Some("xy"));
        assert_eq!(root.find(&["c", "e"]), None);
        assert_eq!(root.find(&[]), Some(&root));
    }

    #[test]
    fn malformed_documents_are_refused() {
        let deep = format!("{}{}", "<a>".repeat(MAX_DEPTH + 1), "</a>".repeat(MAX_DEPTH + 1));
        let ok_deep = format!("{}{}", "<a>".repeat(MAX_DEPTH), "</a>".repeat(MAX_DEPTH));
        assert!(parse(&ok_deep).is_ok());
        for (document, expected) in [
            ("", "no root element"),
            ("<a><b></a>", "</a> closes <b>"),
            ("<a>", "<a> is not closed"),
            ("<a>&bogus;</a>", "an unknown reference &bogus;"),
            ("<a>&#xD800;</a>", "an unknown reference &#xD800;"),
            ("<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;</a>", "documents with a DTD are not supported"),
            (deep.as_str(), "elements nested deeper than 64 levels"),
            ("<html><body>Service Unavailable", "<body> is not closed"),
        ] {
            let error = parse(document).unwrap_err();
            assert!(error.contains(expected), "{document:?}: {error}");
        }
        assert!(parse("not xml at all").is_err());
        assert!(parse("<a/><b/>").is_err());
    }
}
