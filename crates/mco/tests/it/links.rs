//! The manual's links: every relative link in `README.md` and `docs/**/*.md` must lead to a file
//! of the repository and, with `#anchor`, to a heading of that file, as GitHub makes anchors; and
//! every page of the manual a code comment points at (`docs/behaviour.md#the-first-boot`) must too.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_relative_link_of_the_manual_resolves() {
    let root = repo();
    let mut pages = BTreeMap::new();
    pages.insert(PathBuf::from("README.md"), fs::read_to_string(root.join("README.md")).unwrap());
    collect_markdown(&root, Path::new("docs"), &mut pages);
    assert!(pages.len() > 10, "the manual is in docs/: found only {:?}", pages.keys());
    let broken = broken_links(&pages, |path| root.join(path).exists());
    assert!(broken.is_empty(), "broken links in the manual:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_manual_a_code_comment_cites_exists() {
    let root = repo();
    let mut pages = BTreeMap::new();
    collect_markdown(&root, Path::new("docs"), &mut pages);
    let anchors: BTreeMap<&PathBuf, BTreeSet<String>> =
        pages.iter().map(|(path, text)| (path, anchors(text))).collect();
    let mut sources = Vec::new();
    for dir in ["crates", "deploy"] {
        collect_sources(&root, Path::new(dir), &mut sources);
    }
    let mut cited = 0;
    let mut broken = Vec::new();
    for source in &sources {
        let text = fs::read_to_string(root.join(source)).unwrap();
        for (index, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if !(trimmed.starts_with("//") || trimmed.starts_with('#')) {
                continue;
            }
            for citation in doc_citations(trimmed) {
                cited += 1;
                let (file, anchor) = citation.split_once('#').map_or((citation, None), |(f, a)| (f, Some(a)));
                let why = match (anchors.get(&PathBuf::from(file)), anchor) {
                    (None, _) => "no such page",
                    (Some(headings), Some(anchor)) if !headings.contains(anchor) => "no heading with that anchor",
                    _ => continue,
                };
                broken.push(format!("{}:{}: {citation}: {why}", source.display(), index + 1));
            }
        }
    }
    assert!(cited > 10, "found only {cited} citations of docs/ in the code's comments");
    assert!(broken.is_empty(), "comments citing the manual wrongly:\n{}", broken.join("\n"));
}

#[test]
fn missing_files_and_anchors_are_reported_with_file_and_line() {
    let pages = BTreeMap::from([
        (
            PathBuf::from("README.md"),
            "# mco\n\nSee [the lab](docs/lab.md#the-lab-s-state), [the state](docs/lab.md#the-state-directory).\n\
             [gone](docs/gone.md) and [here](#mco), [nowhere](#nowhere).\n\
             ```\n[in a fence](docs/gone.md)\n```\n`[in code](docs/gone.md)` [web](https://example.com/x.md)\n"
                .to_string(),
        ),
        (
            PathBuf::from("docs/lab.md"),
            "# The lab\n\n## The state directory\n\n## `mco lab up`: what it does\n\n[up](#mco-lab-up-what-it-does) \
             [top](../README.md#mco) [dir](../docs) [bad](../README.md#the-lab)\n"
                .to_string(),
        ),
    ]);
    let exists = |path: &Path| pages.contains_key(path) || path == Path::new("docs");
    assert_eq!(
        broken_links(&pages, exists),
        [
            "README.md:3: docs/lab.md#the-lab-s-state: no heading with that anchor in docs/lab.md",
            "README.md:4: docs/gone.md: no such file",
            "README.md:4: #nowhere: no heading with that anchor in README.md",
            "docs/lab.md:7: ../README.md#the-lab: no heading with that anchor in README.md",
        ]
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    for (heading, anchor) in [
        ("The lab", "the-lab"),
        ("`mco lab up`: what it does", "mco-lab-up-what-it-does"),
        ("Image mirrors (Image, ImageDigestMirrorSet)", "image-mirrors-image-imagedigestmirrorset"),
        ("Where we do better than the original (and say so)", "where-we-do-better-than-the-original-and-say-so"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("A [link](x.md) in a heading", "a-link-in-a-heading"),
        ("Skew → 403", "skew--403"),
    ] {
        assert_eq!(anchor_of(heading), anchor, "{heading}");
    }
}

fn collect_markdown(root: &Path, dir: &Path, pages: &mut BTreeMap<PathBuf, String>) {
    for entry in fs::read_dir(root.join(dir)).unwrap() {
        let path = dir.join(entry.unwrap().file_name());
        if root.join(&path).is_dir() {
            collect_markdown(root, &path, pages);
        } else if path.extension().is_some_and(|ext| ext == "md") {
            pages.insert(path.clone(), fs::read_to_string(root.join(&path)).unwrap());
        }
    }
}

fn collect_sources(root: &Path, dir: &Path, sources: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(root.join(dir)).unwrap() {
        let path = dir.join(entry.unwrap().file_name());
        if root.join(&path).is_dir() {
            collect_sources(root, &path, sources);
        } else if path.extension().is_some_and(|ext| ext == "rs" || ext == "yaml") {
            sources.push(path);
        }
    }
}

/// The pages of the manual a line cites: `docs/<path>.md`, maybe with `#anchor`, as a path of its
/// own (not the end of a URL or of another path).
fn doc_citations(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("docs/") {
        let own_path = !rest[..start].ends_with(|c: char| c.is_ascii_alphanumeric() || "/._-".contains(c));
        let cited = &rest[start..];
        let end = cited.find(|c: char| !(c.is_ascii_alphanumeric() || "/._-#".contains(c))).unwrap_or(cited.len());
        let citation = cited[..end].trim_end_matches('.');
        if own_path && citation.contains(".md") {
            found.push(citation);
        }
        rest = &cited[end..];
    }
    found
}

/// Every broken relative link of `pages` (path in the repository → text) as `file:line: link:
/// why`. `exists` says whether a repository path that is not a page exists (a directory, a
/// source file).
fn broken_links(pages: &BTreeMap<PathBuf, String>, exists: impl Fn(&Path) -> bool) -> Vec<String> {
    let anchors: BTreeMap<&PathBuf, BTreeSet<String>> =
        pages.iter().map(|(path, text)| (path, anchors(text))).collect();
    let mut broken = Vec::new();
    for (page, text) in pages {
        for (line, link) in links(text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) =
                link.split_once('#').map_or((link.as_str(), None), |(file, anchor)| (file, Some(anchor)));
            let target = if file.is_empty() { page.clone() } else { normalise(&page.parent().unwrap().join(file)) };
            let why = match (anchors.get(&target), anchor) {
                (None, _) if !exists(&target) => "no such file".to_string(),
                (Some(headings), Some(anchor)) if !headings.contains(anchor) => {
                    format!("no heading with that anchor in {}", target.display())
                }
                _ => continue,
            };
            broken.push(format!("{}:{line}: {link}: {why}", page.display()));
        }
    }
    broken
}

/// `a/b/../c` → `a/c`, lexically (the links of a page are relative to its directory).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The targets of a page's inline links `[text](target)` and reference definitions
/// `[name]: target`, with their line numbers; not inside code fences or code spans.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose_lines(text) {
        let line = without_code_spans(line);
        if let Some(rest) = line.trim_start().strip_prefix('[')
            && let Some((_, target)) = rest.split_once("]:")
        {
            found.push((number, target.split_whitespace().next().unwrap_or_default().to_string()));
            continue;
        }
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or_default();
            found.push((number, target.trim_start_matches('<').trim_end_matches('>').to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// The anchors GitHub gives a page's headings (a repeated one gets `-1`, `-2`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(heading) = line.strip_prefix('#') else { continue };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let anchor = anchor_of(heading.trim());
        let mut unique = anchor.clone();
        let mut n = 0;
        while !anchors.insert(unique.clone()) {
            n += 1;
            unique = format!("{anchor}-{n}");
        }
    }
    anchors
}

/// GitHub's anchor of a heading: its text (a link's text, not its target), lowercased, spaces to
/// `-`, every other character that is not a letter, a digit, `-` or `_` dropped.
fn anchor_of(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(start) = rest.find("](") {
        let Some(end) = rest[start..].find(')') else { break };
        text.push_str(&rest[..start]);
        rest = &rest[start + end + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut in_fence = false;
    text.lines().enumerate().filter_map(move |(index, line)| {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            return None;
        }
        (!in_fence).then_some((index + 1, line))
    })
}

fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}
