//! A bundle made of arbitrary files (paths and contents): loading must
//! return a bundle or an error, never panic; a loaded bundle must convert to
//! an FBC bundle.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_catalog::bundle::{LoadBundleOptions, Payload, RegistryBundle};

fuzz_target!(|files: Vec<(String, Vec<u8>)>| {
    if let Ok(bundle) = RegistryBundle::load_files(files, &LoadBundleOptions::new()) {
        let _ = bundle.to_fbc_bundle("quay.io/fuzz/bundle:v0", Payload::default());
        let _ = bundle.csv_metadata();
        let _ = bundle.channel_entry();
    }
});
