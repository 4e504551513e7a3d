//! Property tests for the parsers fed from outside the process that have no
//! corpus of their own elsewhere: SMInfo requests from another "SM", traps,
//! the configuration file and `guid2lid`. (SMP answers:
//! `discovery_validation.rs`; SA requests: `sa_security.rs`,
//! `sa_service.rs`; topology files: `topology/tests/roundtrip.rs`;
//! `guid2mkey`: `sweep::mkey`'s unit tests.) Each runs a bounded number of
//! cases, so CI runs them every time.

use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use sm_core::config::Config;
use sm_core::daemon::traps::{TrapFilter, TrapLimits, TrapVerdict};
use sm_core::standby::{answer, SmInfoState};
use sm_core::sweep::{Guid2Lid, TrapMad};
use sm_mad::mad::{attr, class, method};

const SECRET: u64 = 0x5eed_c0de_1234_abcd;

/// A 256-byte MAD that looks like an SMP more often than random bytes do.
fn smp_like() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(any::<u8>(), 256),
        prop_oneof![Just(class::SUBN_LID), Just(class::SUBN_DIRECTED), any::<u8>()],
        prop_oneof![Just(method::GET), Just(method::SET), Just(method::TRAP), any::<u8>()],
        prop_oneof![Just(attr::SM_INFO), Just(attr::NOTICE), any::<u16>()],
        0u8..70,
    )
        .prop_map(|(mut mad, class, method, attribute, hops)| {
            mad[0] = 1;
            mad[1] = class;
            mad[2] = 1;
            mad[3] = method;
            mad[16..18].copy_from_slice(&attribute.to_be_bytes());
            mad[5] = hops;
            mad
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever another "SM" sends, the SMInfo responder answers with a
    /// whole MAD or not at all, and never shows the SM_Key to a request
    /// that did not carry it.
    #[test]
    fn sminfo_requests_never_panic_nor_leak_the_key(mad in prop_oneof![
        smp_like(),
        prop::collection::vec(any::<u8>(), 0..300),
    ]) {
        let state = SmInfoState::new(0x0002_c903_0000_0001, 5, SECRET);
        let carried = mad.windows(8).any(|w| w == SECRET.to_be_bytes());
        if let Some(reply) = answer(&state, &mad) {
            prop_assert_eq!(reply.len(), 256);
            if !carried {
                prop_assert!(!reply.windows(8).any(|w| w == SECRET.to_be_bytes()), "the key leaked");
            }
        }
    }

    /// Random bytes from any LID never make the SM sweep, and never panic
    /// the intake.
    #[test]
    fn random_traps_never_sweep(mad in prop_oneof![smp_like(), prop::collection::vec(any::<u8>(), 0..300)], slid in any::<u16>()) {
        let mut filter = TrapFilter::new(TrapLimits::default());
        filter.set_fabric([1, 2, 3]);
        let verdict = filter.judge(&TrapMad { slid, mad: mad.clone() }, Instant::now());
        if let TrapVerdict::Sweep { issuer, .. } = verdict {
            // Only a well-formed trap of a fabric LID gets here.
            prop_assert!([1, 2, 3].contains(&issuer));
            prop_assert_eq!(issuer, slid);
            prop_assert_eq!(mad[3], method::TRAP);
        }
        prop_assert!(filter.take_sweep(Instant::now() + Duration::from_secs(1)));
    }

    /// The configuration file: any text is a configuration or an error
    /// naming the file and a line within the text.
    #[test]
    fn config_text_never_panics(lines in prop::collection::vec(prop_oneof![
        "(lmc|sweep_interval|sm_key|sm_priority|m_key|m_key_protection_level|routing_engine|max_wire_smps) = [-0-9a-fx.e\"]{0,12}",
        "\\[(engines\\.)?[a-z]{0,6}\\]",
        "[ -~]{0,40}",
    ], 0..12)) {
        let text = lines.join("\n");
        if let Err(e) = Config::parse(&text, Path::new("fuzz.toml")) {
            let msg = e.to_string();
            prop_assert!(msg.starts_with("fuzz.toml"), "{}", msg);
        }
    }

    /// `guid2lid`, which anyone who can write the cache directory shapes:
    /// a map or an error, and a map's ranges are real LID ranges.
    #[test]
    fn guid2lid_text_never_panics(lines in prop::collection::vec(prop_oneof![
        "0x[0-9a-f]{1,16} 0x[0-9a-f]{1,5} 0x[0-9a-f]{1,5}",
        "[0-9a-fx ]{0,40}",
        "[ -~]{0,40}",
    ], 0..12)) {
        let text = lines.join("\n");
        if let Ok(map) = Guid2Lid::parse(&text, "fuzz") {
            for (_, &(lid, end)) in &map.entries {
                prop_assert!(lid >= 1 && lid <= end && end < 0xC000, "{:#x}..{:#x}", lid, end);
            }
        }
    }
}
