//! A file-based-catalog file of arbitrary bytes: loading must return a
//! catalog or an error, never panic, and a loaded catalog must validate and
//! render without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_catalog::fbc::Catalog;
use olm_catalog::limits::Limits;
use olm_catalog::render::{self, Format};
use olm_catalog::validate::validate_catalog;

fuzz_target!(|input: (bool, &[u8])| {
    let (yaml, bytes) = input;
    let name = if yaml { "catalog.yaml" } else { "catalog.json" };
    if let Ok(catalog) = Catalog::load_file(name, bytes, &Limits::default()) {
        let report = validate_catalog(&catalog);
        let _ = report.is_valid();
        let _ = render::to_string(&catalog, Format::Json);
        let _ = render::to_string(&catalog, Format::Yaml);
    }
});
