//! Errors in Fairway's TOML files (`fairway.toml`, topology files): one type that names
//! the file, line, column and key of what is wrong, for the plugins' logs and the CLI.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use toml::de::{DeTable, DeValue};

/// A TOML file that could not be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum FileError {
    /// The file exists but could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not valid TOML, an unknown, mistyped or out-of-range key, or values that cannot
    /// go together.
    Invalid(Box<Invalid>),
}

/// Where and why a file is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The file.
    pub path: PathBuf,
    /// 1-based line of the offending text.
    pub line: usize,
    /// 1-based column of the offending text.
    pub column: usize,
    /// Dotted key (`priority.max_wait`, `gpu[2].numa`), when the error is about one.
    pub key: Option<String>,
    /// What is wrong, in TOML's or Fairway's words.
    pub message: String,
}

impl FileError {
    /// An error about the text at byte `offset` of `text` (the file at `path`).
    pub fn at(text: &str, path: &Path, offset: usize, key: Option<String>, message: String) -> Self {
        let (line, column) = line_col(text, offset);
        Self::Invalid(Box::new(Invalid { path: path.to_path_buf(), line, column, key, message }))
    }

    /// Where and why, for an invalid file.
    pub fn invalid(&self) -> Option<&Invalid> {
        match self {
            Self::Invalid(i) => Some(i),
            Self::Read { .. } => None,
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Self::Invalid(i) => {
                write!(f, "{}:{}:{}: ", i.path.display(), i.line, i.column)?;
                if let Some(key) = &i.key {
                    write!(f, "key `{key}`: ")?;
                }
                f.write_str(&i.message)
            }
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Read { source, .. } => Some(source),
            Self::Invalid(_) => None,
        }
    }
}

/// Deserializes `text` (the file at `path`), naming the line, column and key of the
/// first error.
pub(crate) fn parse<T: DeserializeOwned>(text: &str, path: &Path) -> Result<T, FileError> {
    toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let key = DeTable::parse(text).ok().and_then(|t| key_at(t.get_ref(), span.start, ""));
        // toml's message may already end in a newline; keep one line per error.
        FileError::at(text, path, span.start, key, e.message().trim().to_string())
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn contains(span: &Range<usize>, pos: usize) -> bool {
    span.start <= pos && pos < span.end.max(span.start + 1)
}

/// The deepest dotted key whose key or value text covers byte `pos`; entries of an
/// array of tables are named by position (`gpu[2].numa`).
fn key_at(table: &DeTable<'_>, pos: usize, prefix: &str) -> Option<String> {
    for (k, v) in table {
        let dotted = if prefix.is_empty() { k.get_ref().to_string() } else { format!("{prefix}.{}", k.get_ref()) };
        match v.get_ref() {
            DeValue::Table(inner) => {
                if let Some(deeper) = key_at(inner, pos, &dotted) {
                    return Some(deeper);
                }
            }
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let DeValue::Table(inner) = item.get_ref() {
                        if let Some(deeper) = key_at(inner, pos, &format!("{dotted}[{i}]")) {
                            return Some(deeper);
                        }
                    }
                }
            }
            _ => {}
        }
        if contains(&k.span(), pos) || contains(&v.span(), pos) {
            return Some(dotted);
        }
    }
    None
}
