//! Any text as a request's `Accept` header: nothing may panic, the version chosen is one the
//! server can produce (2.2.0 or 3.0.0-3.5.0), and a refusal names the header it refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mco_ignition::accept::negotiate;

fuzz_target!(|header: &str| {
    match negotiate(header) {
        Ok(version) => {
            let servable = (version.major, version.minor) == (2, 2) || (version.major == 3 && version.minor <= 5);
            assert!(servable && version.patch == 0 && version.pre.is_empty(), "{header:?} -> {version}");
        }
        Err(refused) => assert_eq!(refused.0, header),
    }
});
