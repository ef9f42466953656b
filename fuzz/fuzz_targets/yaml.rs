//! Any text through the manifest YAML reader (kubectl's reading: YAML 1.1 scalars, aliases,
//! merges): nothing may panic, and a nest of aliases is refused, never expanded without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = mco_goser::yaml_documents(text);
});
