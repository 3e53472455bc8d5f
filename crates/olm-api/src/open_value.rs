//! Open value sets: string newtypes with documented known values.
//!
//! Phases, states, reasons and condition types grow over time. An older binary
//! must read (and write back unchanged) a value that a newer one wrote, so these
//! are never closed Rust enums on the wire (ARCHITECTURE rule 4). Each set is a
//! transparent string newtype with one associated constant per known value.
//!
//! The constants are `Cow::Borrowed`, so they can be compared with and
//! assigned to fields without allocation:
//!
//! ```
//! use olm_api::install_plan::InstallPlanPhase;
//!
//! let phase: InstallPlanPhase = serde_json::from_str("\"Rollingback\"").unwrap();
//! assert!(!phase.is_known());
//! assert_eq!(serde_json::to_string(&phase).unwrap(), "\"Rollingback\"");
//! assert_eq!(InstallPlanPhase::COMPLETE, "Complete");
//! ```

/// Declares an open string value set.
///
/// `schema = open` gives a plain string schema (every status field, and spec
/// fields that upstream leaves free). `schema = closed` lists the known values
/// as a schema `enum`; it is used only where upstream's CRD already has that
/// exact enum on a spec field, and the Rust type still reads unknown values.
macro_rules! open_string {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident (schema = $mode:ident) {
            $(
                $(#[$cmeta:meta])*
                $konst:ident = $value:literal,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(transparent)]
        $vis struct $name(::std::borrow::Cow<'static, str>);

        impl $name {
            $(
                $(#[$cmeta])*
                pub const $konst: Self = Self(::std::borrow::Cow::Borrowed($value));
            )*

            /// Every value this version of the code knows, in declaration order.
            pub const KNOWN: &'static [Self] = &[$(Self::$konst),*];

            /// Wraps any value, known or not.
            pub fn new(value: impl Into<::std::borrow::Cow<'static, str>>) -> Self {
                Self(value.into())
            }

            /// The value as it appears on the wire.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Whether the value is one this version of the code knows.
            pub fn is_known(&self) -> bool {
                Self::KNOWN.contains(self)
            }

            /// Whether the value is the empty string (upstream's "none" value).
            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::convert::AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::convert::From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(::std::borrow::Cow::Owned(value.to_owned()))
            }
        }

        impl ::std::convert::From<String> for $name {
            fn from(value: String) -> Self {
                Self(::std::borrow::Cow::Owned(value))
            }
        }

        impl ::std::convert::From<$name> for String {
            fn from(value: $name) -> Self {
                value.0.into_owned()
            }
        }

        impl ::std::cmp::PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl ::std::cmp::PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                $crate::open_value::string_schema(
                    $crate::open_value::schema_mode!($mode),
                    &[$($value),*],
                )
            }
        }
    };
}

pub(crate) use open_string;

/// Maps the `schema = open | closed` keyword of [`open_string!`] to a [`SchemaMode`].
macro_rules! schema_mode {
    (open) => {
        $crate::open_value::SchemaMode::Open
    };
    (closed) => {
        $crate::open_value::SchemaMode::Closed
    };
}

pub(crate) use schema_mode;

/// Whether a value set's schema lists its known values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SchemaMode {
    /// A plain string: any value is accepted by the API server.
    Open,
    /// A string restricted to the known values (only where upstream does so).
    Closed,
}

/// The schema of an open value set.
pub(crate) fn string_schema(mode: SchemaMode, known: &[&str]) -> schemars::Schema {
    match mode {
        SchemaMode::Open => schemars::json_schema!({ "type": "string" }),
        SchemaMode::Closed => schemars::json_schema!({ "type": "string", "enum": known }),
    }
}
