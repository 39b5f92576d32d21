//! `cargo +nightly fuzz run cluster_schedule`: see `shoal_fuzz::cluster_schedule` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: shoal_fuzz::cluster_schedule::FuzzRun| {
    shoal_fuzz::cluster_schedule::check(input)
});
