//! Image references from arbitrary text: validation never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|reference: &str| {
    let _ = olm_catalog::image_reference::validate(reference);
});
