//! The docs' links resolve inside the repository.
//!
//! Every Markdown file of the repository (README, CHANGELOG, `docs/`, and
//! the others outside `target/`) is read; every inline link `[text](target)`
//! outside code is checked: it is relative (no scheme: a doc never points
//! outside the repository, so a reader of a checkout has everything), its
//! path exists, and a `#fragment` names a heading of the file it points at,
//! by GitHub's anchor rules. A renamed section or a moved file fails here,
//! not in a reader's browser.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("integration-tests/ sits in the repository root")
        .to_path_buf()
}

/// Markdown files of the repository, skipping build output, installed
/// clients and hidden directories.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).expect("read a repository directory");
    for entry in entries {
        let entry = entry.expect("read a directory entry");
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            markdown_files(&path, out);
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The text outside fenced code blocks and inline code spans, line by line
/// (code may show link-like text that is not a link).
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut in_fence = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut prose = String::with_capacity(line.len());
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                prose.push(c);
            }
        }
        lines.push((number + 1, prose));
    }
    lines
}

/// Targets of inline links `[text](target)` in one line of prose.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                let target = after[..end].trim();
                // `[text](target "title")`: the title is not part of it.
                let target = target.split_whitespace().next().unwrap_or("");
                targets.push(target.to_string());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    targets
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_`
/// dropped, spaces to `-`; a repeated anchor gets `-1`, `-2`, ...
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let base: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

#[test]
fn every_link_of_the_docs_resolves_inside_the_repository() {
    let root = repo_root();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with("docs/ARCHITECTURE.md")),
        "the walk found the docs: {files:?}"
    );

    let mut checked = 0;
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a Markdown file");
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (line_number, line) in prose_lines(&text) {
            for target in link_targets(&line) {
                checked += 1;
                let at = format!("{shown}:{line_number}: ({target})");
                if target.is_empty() {
                    problems.push(format!("{at}: empty link"));
                    continue;
                }
                if target.contains("://") || target.starts_with("mailto:") {
                    problems.push(format!("{at}: points outside the repository"));
                    continue;
                }
                let (path_part, fragment) = match target.split_once('#') {
                    Some((p, f)) => (p, Some(f)),
                    None => (target.as_str(), None),
                };
                let linked = if path_part.is_empty() {
                    file.clone()
                } else if let Some(from_root) = path_part.strip_prefix('/') {
                    root.join(from_root)
                } else {
                    file.parent().expect("a file has a parent").join(path_part)
                };
                if !linked.exists() {
                    problems.push(format!("{at}: {} does not exist", linked.display()));
                    continue;
                }
                if let Some(fragment) = fragment {
                    if linked.extension().is_some_and(|e| e == "md") {
                        let linked_text =
                            std::fs::read_to_string(&linked).expect("read a linked Markdown file");
                        if !anchors(&linked_text).contains(fragment) {
                            problems.push(format!("{at}: no heading with anchor #{fragment}"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        checked > 20,
        "found only {checked} links: the scan is broken"
    );
    assert!(
        problems.is_empty(),
        "{} broken links:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    let text = "# Start-up and shutdown (`Broker::open`)\n## Retention\n## Retention\n```\n# not a heading\n```\n";
    let found = anchors(text);
    assert!(
        found.contains("start-up-and-shutdown-brokeropen"),
        "{found:?}"
    );
    assert!(found.contains("retention"));
    assert!(found.contains("retention-1"));
    assert!(!found.contains("not-a-heading"));
}

#[test]
fn links_in_code_are_not_links() {
    let lines = prose_lines("see [a](b.md) and `[c](d.md)`\n```\n[e](f.md)\n```\n");
    let targets: Vec<String> = lines.iter().flat_map(|(_, l)| link_targets(l)).collect();
    assert_eq!(targets, vec!["b.md".to_string()]);
}
