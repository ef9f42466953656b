//! Any bytes through the Ignition parser, validation, up-conversion and every down-conversion:
//! nothing may panic, our own output must parse, and converting is idempotent (a converted
//! config of the core user read back and converted again gives the same result).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mco_ignition::convert::{Target, convert};
use mco_ignition::{AnyConfig, parse, to_internal};

fuzz_target!(|data: &[u8]| {
    let Ok(parsed) = parse(data) else { return };
    let _ = mco_ignition::validate_and_convert(parsed.config.clone());
    let Ok(internal) = to_internal(parsed.config) else { return };
    // Conversion is only defined for valid configs (callers validate first); the original reads
    // spec 2 back only with the core user (`another_user_converts_down_but_is_refused_reading_spec_2_back`).
    if !mco_ignition::validate::validate(&internal).is_ok() || internal.passwd.users.iter().any(|u| u.name != "core") {
        return;
    }
    for target in Target::ALL {
        let Ok(converted) = convert(&internal, target) else { continue };
        let bytes = match &converted {
            AnyConfig::V3(c) => mco_goser::to_go_json(c, mco_goser::Escaping::Legacy),
            AnyConfig::V2(c) => mco_goser::to_go_json(c, mco_goser::Escaping::Modern),
        }
        .expect("configs always serialize");
        let reparsed = parse(&bytes).expect("our own output parses");
        let back = to_internal(reparsed.config).expect("our own output converts up");
        let again = convert(&back, target).expect("what converted once converts again");
        assert_eq!(again, converted, "conversion to {target} is idempotent");
    }
});
