//! Rendering for people (aligned tables) and scripts (`--json`), on
//! stdout; a closed stdout is reported as a broken pipe, which `run` treats
//! as the reader having had enough.

use std::io::Write as _;

use serde_json::Value;

use crate::error::CliError;

/// Writes `text` to stdout and flushes it.
pub fn print(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|source| CliError::Io {
            what: "writing to stdout",
            source,
        })
}

/// One JSON document on one line.
pub fn print_json(value: &Value) -> Result<(), CliError> {
    print(&format!("{value}\n"))
}

/// Columns padded to their widest cell, two spaces apart; the last column
/// is not padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_row).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths.get(i).copied().unwrap_or(0);
                line.push_str(&format!("{cell:<pad$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A JSON value as a table cell: strings without quotes, null as `-`.
pub fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let t = table(
            &["NAME", "N"],
            &[
                vec!["events".into(), "4".into()],
                vec!["a".into(), "10".into()],
            ],
        );
        assert_eq!(t, "NAME    N\nevents  4\na       10\n");
        assert_eq!(cell(&Value::Null), "-");
        assert_eq!(cell(&serde_json::json!("x")), "x");
        assert_eq!(cell(&serde_json::json!(3)), "3");
    }
}
