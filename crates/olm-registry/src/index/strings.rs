//! An append-only pool of interned strings: one allocation for all names of
//! a catalog, 4-byte ids instead of pointers, and lookup by content.

use std::collections::HashMap;

/// The id of a string in a [`StrPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StrId(u32);

/// The id of the empty string, which every pool holds.
pub(crate) const EMPTY: StrId = StrId(0);

/// Interned strings, frozen after indexing.
#[derive(Debug, Default)]
pub(crate) struct StrPool {
    bytes: String,
    /// `(start, len)` of each string in `bytes`, by id.
    spans: Vec<(u32, u32)>,
    /// Ids sorted by content, for [`StrPool::find`].
    sorted: Vec<StrId>,
}

impl StrPool {
    /// The string of `id`.
    pub(crate) fn get(&self, id: StrId) -> &str {
        let (start, len) = self.spans[id.0 as usize];
        &self.bytes[start as usize..(start + len) as usize]
    }

    /// The id of `s`, if the catalog has that string anywhere.
    pub(crate) fn find(&self, s: &str) -> Option<StrId> {
        self.sorted
            .binary_search_by(|id| self.get(*id).cmp(s))
            .ok()
            .map(|i| self.sorted[i])
    }

    /// Bytes held: the text plus the tables.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.spans.capacity() * 8 + self.sorted.capacity() * 4
    }
}

/// Builds a [`StrPool`], merging equal strings.
#[derive(Debug)]
pub(crate) struct StrPoolBuilder {
    pool: StrPool,
    ids: HashMap<Box<str>, StrId>,
}

/// The pool's text would not fit 32-bit offsets.
#[derive(Debug)]
pub(crate) struct PoolFull;

impl StrPoolBuilder {
    pub(crate) fn new() -> Self {
        let mut builder = Self {
            pool: StrPool::default(),
            ids: HashMap::new(),
        };
        let empty = builder.intern("");
        debug_assert_eq!(empty.ok(), Some(EMPTY));
        builder
    }

    /// The id of `s`, adding it when new.
    pub(crate) fn intern(&mut self, s: &str) -> Result<StrId, PoolFull> {
        if let Some(id) = self.ids.get(s) {
            return Ok(*id);
        }
        let start = u32::try_from(self.pool.bytes.len()).map_err(|_| PoolFull)?;
        let len = u32::try_from(s.len()).map_err(|_| PoolFull)?;
        start.checked_add(len).ok_or(PoolFull)?;
        let id = StrId(u32::try_from(self.pool.spans.len()).map_err(|_| PoolFull)?);
        self.pool.bytes.push_str(s);
        self.pool.spans.push((start, len));
        self.ids.insert(s.into(), id);
        Ok(id)
    }

    /// Freezes the pool.
    pub(crate) fn finish(self) -> StrPool {
        let mut pool = self.pool;
        drop(self.ids);
        let mut sorted: Vec<StrId> = (0..pool.spans.len() as u32).map(StrId).collect();
        sorted.sort_unstable_by(|a, b| pool.get(*a).cmp(pool.get(*b)));
        pool.sorted = sorted;
        pool.bytes.shrink_to_fit();
        pool.spans.shrink_to_fit();
        pool
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_an_id_and_can_be_found() {
        let mut builder = StrPoolBuilder::new();
        let a = builder.intern("etcd").expect("fits");
        let b = builder.intern("stable").expect("fits");
        assert_eq!(builder.intern("etcd").expect("fits"), a);
        let pool = builder.finish();
        assert_eq!(pool.get(a), "etcd");
        assert_eq!(pool.find("stable"), Some(b));
        assert_eq!(pool.find(""), Some(EMPTY));
        assert_eq!(pool.find("missing"), None);
    }
}
