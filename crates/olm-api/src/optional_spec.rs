//! Specs that may be missing from an object.
//!
//! Upstream does not require `spec` on OperatorGroup, OperatorCondition,
//! Operator, OLMConfig and OperatorHub (`kind: OperatorGroup` with only
//! metadata is the usual "all namespaces" group). kube-derive's root struct
//! requires `spec`, so [`optional_spec!`] gives such a spec type a
//! `Deserialize` that turns a missing or `null` spec into `Default::default()`.
//!
//! It works because serde asks a missing field's type to deserialize itself
//! from a "missing field" deserializer that answers `deserialize_option` with
//! `None`. The fields are deserialized by a derived twin struct with the same
//! fields and serde attributes, so the wire format stays exactly the derived one.

/// Declares a spec struct whose absence deserializes as its default.
///
/// The first bracket holds the serde container attributes shared by the spec
/// and its deserialization twin; the attributes after it (derives, `kube`,
/// docs) apply to the spec only and must not derive `Deserialize`.
macro_rules! optional_spec {
    (
        [$(#[$shared:meta])*]
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $ty:ty,
            )*
        }
    ) => {
        $(#[$meta])*
        $(#[$shared])*
        $vis struct $name {
            $(
                $(#[$fmeta])*
                $fvis $field: $ty,
            )*
        }

        const _: () = {
            // Twin of the spec with a derived `Deserialize`; `JsonSchema` is
            // derived only so that the fields' `schemars` attributes resolve.
            #[derive(::serde::Deserialize, ::schemars::JsonSchema)]
            $(#[$shared])*
            #[allow(dead_code)]
            struct Fields {
                $(
                    $(#[$fmeta])*
                    $field: $ty,
                )*
            }

            impl<'de> ::serde::Deserialize<'de> for $name {
                fn deserialize<D>(deserializer: D) -> ::std::result::Result<Self, D::Error>
                where
                    D: ::serde::Deserializer<'de>,
                {
                    let fields = <::std::option::Option<Fields> as ::serde::Deserialize>::deserialize(deserializer)?;
                    Ok(match fields {
                        Some(Fields { $($field),* }) => $name { $($field),* },
                        None => <$name as ::std::default::Default>::default(),
                    })
                }
            }
        };
    };
}

pub(crate) use optional_spec;
