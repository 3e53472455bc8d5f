//! Reading a JSON value tree into typed values the way Go's `encoding/json`
//! reads `null`: for anything that is not a pointer, map, slice or
//! interface, `null` is a no-op and leaves the zero value. So
//! `"keywords": ["k", null]` reads as `["k", ""]`, `"maintainers": [null]`
//! as one empty maintainer, and `"supported": null` as `false`, where serde
//! refuses each ("invalid type: null").
//!
//! [`GoNulls`] wraps a borrowed [`Value`] and asks the type what it expects:
//! a string, a number, a boolean, a struct, a map or a sequence given `null`
//! is given its zero value instead; an `Option` (Go's pointer) is given
//! `None`. Everything else is read as serde_json reads a `Value`.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Error, Value};

/// A value tree read with Go's `null`: see the module documentation.
#[derive(Clone, Copy)]
pub(crate) struct GoNulls<'a>(pub(crate) &'a Value);

/// `T` read from `value` as Go reads it into the matching type.
pub(crate) fn from_value<'a, T: de::Deserialize<'a>>(value: &'a Value) -> Result<T, Error> {
    T::deserialize(GoNulls(value))
}

/// The deserialize methods of one kind of scalar: `null` visits `$zero`.
macro_rules! zero_on_null {
    ($($method:ident => |$visitor:ident| $zero:expr;)*) => {
        $(
            fn $method<V: Visitor<'a>>(self, $visitor: V) -> Result<V::Value, Error> {
                if self.0.is_null() {
                    $zero
                } else {
                    self.deserialize_any($visitor)
                }
            }
        )*
    };
}

impl<'a> Deserializer<'a> for GoNulls<'a> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            Value::Object(entries) => visitor.visit_map(Entries {
                entries: entries.iter(),
                value: None,
            }),
            other => other.deserialize_any(visitor),
        }
    }

    zero_on_null! {
        deserialize_bool => |visitor| visitor.visit_bool(false);
        deserialize_i8 => |visitor| visitor.visit_i64(0);
        deserialize_i16 => |visitor| visitor.visit_i64(0);
        deserialize_i32 => |visitor| visitor.visit_i64(0);
        deserialize_i64 => |visitor| visitor.visit_i64(0);
        deserialize_u8 => |visitor| visitor.visit_u64(0);
        deserialize_u16 => |visitor| visitor.visit_u64(0);
        deserialize_u32 => |visitor| visitor.visit_u64(0);
        deserialize_u64 => |visitor| visitor.visit_u64(0);
        deserialize_f32 => |visitor| visitor.visit_f64(0.0);
        deserialize_f64 => |visitor| visitor.visit_f64(0.0);
        deserialize_str => |visitor| visitor.visit_borrowed_str("");
        deserialize_string => |visitor| visitor.visit_borrowed_str("");
        deserialize_seq => |visitor| visitor.visit_seq(Items([].iter()));
        deserialize_map => |visitor| visitor.visit_map(
            de::value::MapDeserializer::new(std::iter::empty::<(&str, &str)>()),
        );
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.0.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    // Null or not, these read as serde_json reads the value.
    serde::forward_to_deserialize_any! {
        <W: Visitor<'a>>
        char bytes byte_buf unit unit_struct identifier
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

/// The items of an array, each read with Go's `null`.
struct Items<'a>(std::slice::Iter<'a, Value>);

impl<'a> SeqAccess<'a> for Items<'a> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|item| seed.deserialize(GoNulls(item)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// The entries of an object, each value read with Go's `null`.
struct Entries<'a> {
    entries: serde_json::map::Iter<'a>,
    /// The value of the key just given.
    value: Option<&'a Value>,
}

impl<'a> MapAccess<'a> for Entries<'a> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.entries.next() {
            None => Ok(None),
            Some((key, value)) => {
                self.value = Some(value);
                let key = de::value::BorrowedStrDeserializer::<Error>::new(key.as_str());
                seed.deserialize(key).map(Some)
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(GoNulls(value)),
            None => Err(de::Error::custom("a value asked for before its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// As Go's structs: a field left out keeps its zero value.
    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct Inner {
        name: String,
        supported: bool,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Outer {
        words: Vec<String>,
        inner: Vec<Inner>,
        flag: bool,
        count: u32,
        ratio: f64,
        labels: BTreeMap<String, String>,
        maybe: Option<String>,
        nested: Inner,
        list: Vec<u8>,
        any: Value,
    }

    #[test]
    fn null_reads_as_the_zero_value_as_in_go() {
        let value = json!({
            "words": ["k", null],
            "inner": [null, {"name": "n", "supported": null}],
            "flag": null,
            "count": null,
            "ratio": null,
            "labels": {"a": null},
            "maybe": null,
            "nested": null,
            "list": null,
            "any": null,
        });
        assert_eq!(
            from_value::<Outer>(&value).unwrap(),
            Outer {
                words: vec!["k".into(), String::new()],
                inner: vec![
                    Inner::default(),
                    Inner {
                        name: "n".into(),
                        supported: false
                    }
                ],
                flag: false,
                count: 0,
                ratio: 0.0,
                labels: BTreeMap::from([("a".into(), String::new())]),
                maybe: None,
                nested: Inner::default(),
                list: Vec::new(),
                any: Value::Null,
            }
        );
    }

    #[test]
    fn other_values_read_as_serde_json_reads_them() {
        let value = json!({
            "words": ["a"],
            "inner": [{"name": "x", "supported": true, "extra": [1, {"y": null}]}],
            "flag": true,
            "count": 7,
            "ratio": 0.5,
            "labels": {"k": "v"},
            "maybe": "m",
            "nested": {"name": "z"},
            "list": [1, 2],
            "any": {"deep": [null, 1.5]},
        });
        assert_eq!(
            from_value::<Outer>(&value).unwrap(),
            serde_json::from_value::<Outer>(value.clone()).unwrap()
        );
        // And the same errors for values of the wrong type.
        for (field, wrong) in [
            ("words", json!("k")),
            ("count", json!(-1)),
            ("flag", json!("yes")),
            ("inner", json!([1])),
            ("nested", json!("x")),
        ] {
            let mut broken = value.clone();
            broken[field] = wrong;
            let ours = from_value::<Outer>(&broken).unwrap_err().to_string();
            let theirs = serde_json::from_value::<Outer>(broken)
                .unwrap_err()
                .to_string();
            assert_eq!(ours, theirs, "{field}");
        }
    }
}
