//! The words of the catalog rules that both `opm validate` and the
//! registry's streaming index (`opm serve`) report, so a problem reads the
//! same whichever found it. Each is upstream's text (`model.Validate` and
//! `declcfg.ConvertToModel` in operator-registry).

use std::fmt::Display;

/// `icon-invalid`.
pub fn icon_invalid(error: impl Display) -> String {
    format!("icon data is not valid base64: {error}")
}

/// `channel-unknown-package`.
pub fn channel_unknown_package(package: &str, channel: &str) -> String {
    format!("unknown package {package:?} for channel {channel:?}")
}

/// `channel-name-missing`.
pub fn channel_name_missing(package: &str) -> String {
    format!("package {package:?} contains channel with no name")
}

/// `bundle-package-missing`.
pub fn bundle_package_missing(bundle: &str) -> String {
    format!("package name must be set for bundle {bundle:?}")
}

/// `bundle-unknown-package`.
pub fn bundle_unknown_package(package: &str, bundle: &str) -> String {
    format!("unknown package {package:?} for bundle {bundle:?}")
}

/// `invalid-bundle-object`: an `olm.bundle.object` of the bundle that does
/// not decode (base64, then YAML or JSON).
pub fn bundle_object_invalid(package: &str, bundle: &str, error: impl Display) -> String {
    format!("package {package:?}, bundle {bundle:?}: bundle object does not decode: {error}")
}

/// `invalid-property` (and `invalid-constraint`): a property of the bundle
/// whose value does not decode as its type.
pub fn property_invalid(bundle: &str, error: impl Display) -> String {
    format!("parse properties for bundle {bundle:?}: {error}")
}

/// `bundle-name-missing`.
pub const BUNDLE_NAME_MISSING: &str = "bundle name must be set";

/// `image-missing`.
pub fn bundle_image_missing(bundle: &str) -> String {
    format!("invalid bundle {bundle:?}: bundle image must be set")
}

/// `deprecation-package-missing`.
pub const DEPRECATION_PACKAGE_MISSING: &str = "package name must be set for deprecation item";

/// `deprecation-unknown-package`.
pub fn deprecation_unknown_package(package: &str) -> String {
    format!("cannot apply deprecations to an unknown package {package:?}")
}

/// `duplicate-deprecation`.
pub fn duplicate_deprecation(package: &str) -> String {
    format!("expected a maximum of one deprecation per package: {package:?}")
}

/// `deprecation-schema-missing`: entry `index` of `package`'s deprecations.
pub fn deprecation_schema_missing(index: usize, package: &str) -> String {
    format!("schema must be set for deprecation entry [{index}] for package {package:?}")
}

/// `deprecation-unknown-schema`: entry `index` of `package`'s deprecations
/// references an object of a schema that cannot be deprecated. Upstream
/// prints the reference with Go's `%#v`.
pub fn deprecation_unknown_schema(schema: &str, name: &str, index: usize, package: &str) -> String {
    use olm_api::go_text::quote;
    format!(
        "cannot deprecate object declcfg.PackageScopedReference{{Schema:{}, Name:{}}} referenced by entry {index} for package {}: object schema unknown",
        quote(schema),
        quote(name),
        quote(package)
    )
}

/// `deprecation-unknown-bundle`.
pub fn deprecation_unknown_bundle(bundle: &str, package: &str) -> String {
    format!("cannot deprecate bundle {bundle:?} for package {package:?}: bundle not found")
}

/// `deprecation-unknown-channel`.
pub fn deprecation_unknown_channel(channel: &str, package: &str) -> String {
    format!("cannot deprecate channel {channel:?} for package {package:?}: channel not found")
}

/// `deprecation-package-name-set`.
pub fn deprecation_package_name_set(package: &str, specified: &str) -> String {
    format!(
        "package name must be empty for deprecated package {package:?} (specified {specified:?})"
    )
}
