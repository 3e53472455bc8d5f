//! How commands print: aligned tables for people (stable columns, no
//! timestamps), JSON or YAML for tools.

use std::io::Write as _;

use anyhow::Result;
use serde::Serialize;

/// `-o`: the output format of a command that lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns.
    #[default]
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// `-o` of the commands that list (its default from `KUBECTL_OLM_OUTPUT`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct FormatArg {
    /// Output format.
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value_t,
        env = "KUBECTL_OLM_OUTPUT"
    )]
    pub output: Format,
}

/// Aligns `rows` under `header`, two spaces between columns, no trailing
/// spaces.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Prints `value` as JSON or YAML (a table is the command's own).
pub(crate) fn print_data<T: Serialize>(value: &T, format: Format) -> Result<()> {
    let text = match format {
        Format::Yaml => serde_yaml_ng::to_string(value)?,
        Format::Json | Format::Table => serde_json::to_string_pretty(value)? + "\n",
    };
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_without_trailing_space() {
        let text = table(
            &["NAME", "STATE", "CAUSE"],
            &[
                vec!["a".into(), "Succeeded".into(), String::new()],
                vec!["longer-name".into(), "Failed".into(), "boom".into()],
            ],
        );
        assert_eq!(
            text,
            "NAME         STATE      CAUSE\na            Succeeded\nlonger-name  Failed     boom\n"
        );
    }
}
