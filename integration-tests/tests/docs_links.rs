//! The docs' links resolve inside the repository.
//!
//! Every Markdown file of the repository (README, CHANGELOG, `docs/`, and
//! the others outside `target/`) is read; every inline link `[text](target)`
//! outside code is checked: it is relative (no scheme: a doc never points
//! outside the repository, so a reader of a checkout has everything), its
//! path exists, and a `#fragment` names a heading of the file it points at,
//! by GitHub's anchor rules. A renamed section or a moved file fails here,
//! not in a reader's browser.
//!
//! A Markdown file may also be named without a link, in prose, in code
//! spans or in a Rust comment ("see `formats.md`"). Every such mention in
//! the docs (`docs/`, README.md, CHANGELOG.md) and in every `.rs` source
//! (outside `target/`) must name a file of the repository: relative to the
//! mentioning file, to the repository root, or to `docs/`. A page kept
//! outside the repository (a contract the reader of a checkout does not
//! have) is not cited by name; the text says what it needs, or points at
//! the repository's own page that covers it.

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

/// The files whose `.md` mentions are checked: README.md, CHANGELOG.md,
/// the Markdown files under `docs/`, and every `.rs` file of the
/// repository outside build output, installed clients and hidden
/// directories.
fn mentioning_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, keep: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
        let entries = std::fs::read_dir(dir).expect("read a repository directory");
        for entry in entries {
            let entry = entry.expect("read a directory entry");
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            if entry.file_type().expect("file type").is_dir() {
                walk(&entry.path(), keep, out);
            } else if keep(&name) {
                out.push(entry.path());
            }
        }
    }
    let mut files = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    walk(
        &root.join("docs"),
        &|name| name.ends_with(".md"),
        &mut files,
    );
    walk(root, &|name| name.ends_with(".rs"), &mut files);
    files.sort();
    files.dedup();
    files
}

/// Whether `c` is a character of a mentioned path (`[\w./-]`).
fn in_path(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// The Markdown files one line mentions: each `.md` that no word character
/// follows, with the path characters before it (`[\w./-]+\.md\b`, taken
/// whole, so `../x` keeps its `../`). A bare `.md` (an extension, as in
/// `ends_with`) names no file and is not a mention.
fn md_mentions(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = line[from..].find(".md").map(|i| from + i) {
        let end = at + 3;
        from = end;
        if line[end..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let start = line[..at]
            .char_indices()
            .rev()
            .take_while(|&(_, c)| in_path(c))
            .last()
            .map_or(at, |(i, _)| i);
        let before = &line[start..at];
        if before.chars().any(|c| c.is_alphanumeric() || c == '_') {
            found.push(line[start..end].to_string());
        }
    }
    found
}

/// Whether `mention`, found in `file`, names a file of the repository
/// (relative to `file`, to the root, or to `docs/`): one that exists and
/// lies inside the repository once `..` is resolved. A checkout beside
/// other folders (`../shared/`) would otherwise pass here and fail in a
/// clone that has none.
fn mention_resolves(root: &Path, file: &Path, mention: &str) -> bool {
    let from_root = mention.trim_start_matches('/');
    let dir = file.parent().expect("a file has a parent");
    let root = root.canonicalize().expect("the repository root resolves");
    [
        dir.join(mention),
        root.join(from_root),
        root.join("docs").join(from_root),
    ]
    .iter()
    .filter_map(|candidate| candidate.canonicalize().ok())
    .any(|found| found.is_file() && found.starts_with(&root))
}

#[test]
fn every_markdown_file_the_docs_and_sources_mention_is_in_the_repository() {
    let root = repo_root();
    let files = mentioning_files(&root);
    assert!(
        files.iter().any(|f| f.ends_with("docs/ARCHITECTURE.md"))
            && files
                .iter()
                .any(|f| f.ends_with("integration-tests/tests/docs_links.rs")),
        "the walk found the docs and the sources: {files:?}"
    );

    let mut checked = 0;
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a doc or a source file");
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (number, line) in text.lines().enumerate() {
            for mention in md_mentions(line) {
                checked += 1;
                if !mention_resolves(&root, file, &mention) {
                    problems.push(format!(
                        "{shown}:{}: {mention} is not a file of the repository: {}",
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "found only {checked} mentions: the scan is broken"
    );
    assert!(
        problems.is_empty(),
        "{} mentions of Markdown files the repository does not have:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn mentions_are_whole_paths_ending_in_md() {
    // The names are put together at run time: written out here they would
    // be mentions of files the repository does not have.
    let md = "md";
    let line = format!(
        "see `CONFIG.{md}`, [a](../docs/formats.{md}#x) and DESIGN.{md}. Not a.{md}x, `.{md}`, *.{md}"
    );
    assert_eq!(
        md_mentions(&line),
        vec![
            format!("CONFIG.{md}"),
            format!("../docs/formats.{md}"),
            format!("DESIGN.{md}"),
        ]
    );
    let root = repo_root();
    let here = root.join("integration-tests/tests/docs_links.rs");
    assert!(mention_resolves(
        &root,
        &here,
        &format!("docs/formats.{md}")
    ));
    assert!(mention_resolves(&root, &here, &format!("formats.{md}")));
    assert!(mention_resolves(&root, &here, &format!("README.{md}")));
    assert!(mention_resolves(
        &root,
        &here,
        &format!("../../docs/formats.{md}")
    ));
    assert!(!mention_resolves(&root, &here, &format!("CONFIG.{md}")));
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
    // The names are put together at run time: written out they would be
    // mentions of files the repository does not have.
    let md = "md";
    let lines = prose_lines(&format!(
        "see [a](b.{md}) and `[c](d.{md})`\n```\n[e](f.{md})\n```\n"
    ));
    let targets: Vec<String> = lines.iter().flat_map(|(_, l)| link_targets(l)).collect();
    assert_eq!(targets, vec![format!("b.{md}")]);
}
