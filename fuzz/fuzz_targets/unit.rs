//! Any text as a unit's contents: its `[Install]` section read as systemd reads it, and every
//! name Ignition validation lets through is a unit name (no `/`, so no link path).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mco_ignition::unit::{Install, is_unit_name};

fuzz_target!(|contents: &str| {
    let install = Install::parse(contents);
    if install.bad_name().is_none() {
        for name in install.wanted_by.iter().chain(&install.required_by).chain(&install.alias) {
            assert!(is_unit_name(name) && !name.contains('/'), "{name:?}");
        }
    }
});
