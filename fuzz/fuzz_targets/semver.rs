//! blang-style versions and ranges from arbitrary text: parsing never
//! panics, and a parsed range answers `contains` for parsed versions.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_catalog::semver::{Range, Version};

fuzz_target!(|input: (&str, &str)| {
    let (range, version) = input;
    let strict = Version::parse(version);
    let tolerant = Version::parse_tolerant(version);
    if let Ok(v) = &strict {
        // A strict parse is also a tolerant parse of the same version.
        assert_eq!(tolerant.as_ref().ok(), Some(v));
        assert_eq!(v.cmp_precedence(v), std::cmp::Ordering::Equal);
    }
    if let Ok(range) = Range::parse(range) {
        if let Ok(v) = &tolerant {
            let _ = range.contains(v);
        }
    }
});
