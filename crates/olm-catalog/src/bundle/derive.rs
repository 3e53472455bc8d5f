//! The properties `opm render` derives from a bundle (see the parent
//! module's documentation for the list and order).

use std::{collections::BTreeSet, fmt};

use olm_api::csv::ClusterServiceVersion;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::{
    location::Location,
    property::{self, BundleObject, Gvk, PackageProperty, PackageRequired, Property},
};

use super::{ApiKey, BundleError, BundleWarning, Manifest, PROPERTIES_ANNOTATION};

/// What a bundle's properties are derived from.
pub(super) struct DeriveInput<'a> {
    pub(super) package: &'a str,
    pub(super) csv: &'a ClusterServiceVersion,
    pub(super) objects: &'a [Manifest],
    pub(super) dependencies: &'a [Property],
    pub(super) dependencies_file: Option<&'a str>,
    pub(super) declared: &'a [Property],
    pub(super) properties_file: Option<&'a str>,
    pub(super) provided: &'a BTreeSet<ApiKey>,
    pub(super) required: &'a BTreeSet<ApiKey>,
}

/// A property built from a plain struct, as upstream's `MustBuild` does.
pub(super) fn built(type_: &str, value: &impl serde::Serialize) -> Property {
    // Serializing these plain structs cannot fail; `null` keeps this total.
    Property::new(type_, value).unwrap_or_else(|_| Property {
        type_: type_.to_owned(),
        value: null_raw(),
        extra: Vec::new(),
    })
}

pub(super) fn null_raw() -> Box<RawValue> {
    Box::<RawValue>::default()
}

/// Upstream's `propertySet`: first occurrence of each (type, value text).
pub(super) fn dedupe(properties: Vec<Property>) -> Vec<Property> {
    let mut seen = BTreeSet::new();
    properties
        .into_iter()
        .filter(|p| seen.insert((p.type_.clone(), p.value.get().to_owned())))
        .collect()
}

pub(super) fn property_error(
    file: Option<&str>,
    list: &str,
    index: usize,
    err: impl fmt::Display,
) -> BundleError {
    BundleError::InvalidProperty {
        location: Location {
            origin: crate::location::Origin::new(file.unwrap_or_default(), 0, 0),
            field: Some(format!("{list}[{index}].value")),
        },
        message: err.to_string(),
    }
}

pub(super) fn derive_properties(
    input: &DeriveInput<'_>,
    warnings: &mut Vec<BundleWarning>,
) -> Result<Vec<Property>, BundleError> {
    let version = input.csv.spec.version.as_ref().map_or("", |v| v.as_str());
    let release = input.csv.spec.release.as_ref().map_or("", |r| r.as_str());

    // The parser's derived properties: olm.package first, then those of the
    // CSV's olm.properties annotation, then one olm.gvk per provided API.
    let mut derived = Vec::new();
    if !input.package.is_empty() {
        derived.push(built(
            property::PACKAGE,
            &PackageProperty {
                package_name: input.package.to_owned(),
                version: version.to_owned(),
                release: release.to_owned(),
            },
        ));
    }
    if let Some(text) = input
        .csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROPERTIES_ANNOTATION))
    {
        #[derive(Deserialize)]
        struct Annotated<'a> {
            #[serde(default, rename = "type")]
            type_: String,
            #[serde(borrow)]
            value: Option<&'a RawValue>,
        }
        match serde_json::from_str::<Vec<Annotated<'_>>>(text) {
            Ok(list) => derived.extend(list.into_iter().map(|a| Property {
                type_: a.type_,
                value: a.value.map_or_else(null_raw, ToOwned::to_owned),
                extra: Vec::new(),
            })),
            Err(e) => warnings.push(BundleWarning::InvalidPropertiesAnnotation {
                reason: crate::document::json_error_message(&e),
            }),
        }
    }
    for api in input.provided {
        derived.push(built(
            property::GVK,
            &Gvk {
                group: api.group.clone(),
                kind: api.kind.clone(),
                version: api.version.clone(),
            },
        ));
    }
    let mut declared = input.declared.to_vec();
    declared.extend(dedupe(derived));
    let bundle_properties = dedupe(declared);

    // ObjectsAndPropertiesFromBundle.
    let mut provided: BTreeSet<Gvk> = BTreeSet::new();
    let mut required: BTreeSet<Gvk> = BTreeSet::new();
    let mut package_property = None;
    let mut others = Vec::new();
    for (i, p) in bundle_properties.iter().enumerate() {
        match p.type_.as_str() {
            property::GVK => match p.parse() {
                Ok(property::PropertyValue::Gvk(gvk)) => {
                    provided.insert(gvk);
                }
                Ok(_) => {}
                Err(err) => {
                    return Err(property_error(input.properties_file, "properties", i, err));
                }
            },
            property::PACKAGE => match p.parse() {
                Ok(property::PropertyValue::Package(package)) => {
                    package_property = Some(built(property::PACKAGE, &package));
                }
                Ok(_) => {}
                Err(err) => {
                    return Err(property_error(input.properties_file, "properties", i, err));
                }
            },
            _ => others.push(p.clone()),
        }
    }
    let mut package_required = Vec::new();
    for (i, d) in input.dependencies.iter().enumerate() {
        match d.type_.as_str() {
            property::GVK => {
                let gvk = Property {
                    type_: property::GVK.to_owned(),
                    ..d.clone()
                };
                match gvk.parse() {
                    Ok(property::PropertyValue::Gvk(gvk)) => {
                        required.insert(gvk);
                    }
                    Ok(_) => {}
                    Err(err) => {
                        return Err(property_error(
                            input.dependencies_file,
                            "dependencies",
                            i,
                            err,
                        ));
                    }
                }
            }
            property::PACKAGE => match d.parse() {
                Ok(property::PropertyValue::Package(package)) => package_required.push(built(
                    property::PACKAGE_REQUIRED,
                    &PackageRequired {
                        package_name: package.package_name,
                        version_range: package.version,
                    },
                )),
                Ok(_) => {}
                Err(err) => {
                    return Err(property_error(
                        input.dependencies_file,
                        "dependencies",
                        i,
                        err,
                    ));
                }
            },
            _ => others.push(d.clone()),
        }
    }
    for api in input.required {
        required.insert(Gvk {
            group: api.group.clone(),
            kind: api.kind.clone(),
            version: api.version.clone(),
        });
    }
    for api in input.provided {
        provided.insert(Gvk {
            group: api.group.clone(),
            kind: api.kind.clone(),
            version: api.version.clone(),
        });
    }

    let mut properties: Vec<Property> = input
        .objects
        .iter()
        .map(|o| {
            built(
                property::BUNDLE_OBJECT,
                &BundleObject::encode(o.json.as_bytes()),
            )
        })
        .collect();
    properties.push(package_property.unwrap_or_else(|| {
        built(
            property::PACKAGE,
            &PackageProperty {
                package_name: input.package.to_owned(),
                version: version.to_owned(),
                release: release.to_owned(),
            },
        )
    }));
    properties.extend(provided.iter().map(|gvk| built(property::GVK, gvk)));
    properties.extend(
        required
            .iter()
            .map(|gvk| built(property::GVK_REQUIRED, gvk)),
    );
    properties.extend(package_required);
    properties.extend(others);
    properties
        .sort_by(|a, b| (a.type_.as_str(), a.value.get()).cmp(&(b.type_.as_str(), b.value.get())));
    Ok(properties)
}
