//! A file-based-catalog file of arbitrary bytes: loading must return a
//! catalog or an error, never panic, and a loaded catalog must validate and
//! render without panicking. Loaded again with its payloads checked and
//! left out (as `opm validate` loads), it must give the same report, and
//! each payload left out must be where the load noted it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_catalog::fbc::{Catalog, LoadOptions};
use olm_catalog::limits::Limits;
use olm_catalog::render::{self, Format};
use olm_catalog::validate::validate_catalog;

fuzz_target!(|input: (bool, &[u8])| {
    let (yaml, bytes) = input;
    let name = if yaml { "catalog.yaml" } else { "catalog.json" };
    if let Ok(catalog) = Catalog::load_file(name, bytes, &Limits::default()) {
        let report = validate_catalog(&catalog);
        let _ = report.is_valid();
        let options = LoadOptions {
            drop_payloads: true,
            payload_spans: true,
            ..LoadOptions::default()
        };
        let lean = Catalog::load_files([(name, bytes)], &options)
            .expect("a file that loads whole loads without its payloads");
        assert_eq!(validate_catalog(&lean).problems, report.problems);
        // Each payload left out is found again, as it was, where the load
        // noted it.
        for span in lean.payload_spans.values().flat_map(|s| &s.spans) {
            let bundle = catalog
                .bundles
                .iter()
                .find(|b| b.origin.document == span.document)
                .expect("a span is of a bundle");
            let found = span.value_in(bytes).expect("a span is in the file");
            assert_eq!(found, bundle.properties[span.property].value.get());
        }
        let _ = render::to_string(&catalog, Format::Json);
        let _ = render::to_string(&catalog, Format::Yaml);
    }
});
