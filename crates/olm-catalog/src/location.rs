//! Where something was read from: the file, the document within it and the
//! field, so that every error and validation problem can point at its source.

use std::{fmt, sync::Arc};

/// The document an object was read from.
///
/// Equality ignores nothing: two objects read from different places differ.
/// Compare models with [`Origin::default`] origins to ignore where they came
/// from (see `Catalog::clear_origins` in [`crate::fbc`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Origin {
    /// The file, relative to the catalog or bundle root, with `/` separators.
    /// Empty for objects built in memory.
    pub file: Arc<str>,
    /// The 0-based index of the document within the file.
    pub document: usize,
    /// The 1-based line on which the document starts; 0 when unknown.
    pub line: usize,
    /// The byte range of the document in the file (`offset..offset + len`),
    /// so that it can be read again alone (see
    /// [`crate::fbc::Catalog::load_document`]); both 0 when unknown.
    pub offset: usize,
    /// The length of that range in bytes.
    pub len: usize,
}

impl Origin {
    /// An origin in `file`, document `document`, starting at `line`.
    pub fn new(file: impl Into<Arc<str>>, document: usize, line: usize) -> Self {
        Self {
            file: file.into(),
            document,
            line,
            offset: 0,
            len: 0,
        }
    }

    /// This origin with the document's byte range in the file.
    #[must_use]
    pub fn with_bytes(mut self, offset: usize, len: usize) -> Self {
        self.offset = offset;
        self.len = len;
        self
    }

    /// This origin with a field path, for an error about that field.
    pub fn field(&self, field: impl Into<String>) -> Location {
        Location {
            origin: self.clone(),
            field: Some(field.into()),
        }
    }

    /// This origin as a location without a field.
    pub fn location(&self) -> Location {
        Location {
            origin: self.clone(),
            field: None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.file.is_empty() {
            f.write_str("<memory>")?;
        } else {
            f.write_str(&self.file)?;
        }
        write!(f, ", document index {}", self.document)?;
        if self.line > 0 {
            write!(f, " (line {})", self.line)?;
        }
        Ok(())
    }
}

/// A document and, optionally, a field within it, written as a path such as
/// `entries[2].replaces` or `properties[0].value.packageName`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Location {
    /// The document.
    pub origin: Origin,
    /// The field within the document, if the problem is about one field.
    pub field: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(field) = &self.field {
            write!(f, ", field {field}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_name_file_document_line_and_field() {
        let origin = Origin::new("etcd/catalog.yaml", 3, 120);
        assert_eq!(
            origin.field("entries[2].replaces").to_string(),
            "etcd/catalog.yaml, document index 3 (line 120), field entries[2].replaces"
        );
        assert_eq!(
            Origin::default().location().to_string(),
            "<memory>, document index 0"
        );
    }
}
