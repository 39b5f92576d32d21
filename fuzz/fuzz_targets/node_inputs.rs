//! `cargo +nightly fuzz run node_inputs`: see `shoal_fuzz::node_inputs` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: shoal_fuzz::node_inputs::Scenario| {
    shoal_fuzz::node_inputs::check(input)
});
