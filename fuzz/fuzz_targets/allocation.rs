//! `cargo +nightly fuzz run allocation`: see `shoal_fuzz::allocation` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(
    |input: shoal_fuzz::allocation::Layout| shoal_fuzz::allocation::check(input)
);
