//! Any text as a file's `contents.source`, plain and gzip-compressed: nothing may panic, and a
//! decoded file is never larger than the inflation limit allows.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mco_ignition::dataurl::{MAX_INFLATED_BYTES, decode_contents};
use mco_ignition::v3::Resource;

fuzz_target!(|source: &str| {
    for compression in [None, Some("gzip")] {
        let resource = Resource {
            source: Some(source.to_string()),
            compression: compression.map(str::to_string),
            ..Default::default()
        };
        if let Ok(contents) = decode_contents(&resource)
            && compression.is_some()
        {
            assert!(contents.len() as u64 <= MAX_INFLATED_BYTES);
        }
    }
});
