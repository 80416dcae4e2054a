//! How results are printed: text for people, JSON (`--output json`, `--json`) for scripts.

use clap::ValueEnum;
use serde_json::Value;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// Prints a JSON value on stdout, pretty.
pub fn json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// Rows of two or more columns, the first padded to the widest.
pub fn table(rows: &[(String, String)]) {
    let width = rows
        .iter()
        .map(|(a, _)| a.chars().count())
        .max()
        .unwrap_or(0);
    for (a, b) in rows {
        if b.is_empty() {
            println!("{a}");
        } else {
            println!("{a:<width$}  {b}");
        }
    }
}

/// The first line of a description, for one-line listings.
pub fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}
