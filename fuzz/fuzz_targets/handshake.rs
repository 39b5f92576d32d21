//! `cargo +nightly fuzz run handshake`: see `shoal_fuzz::handshake` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shoal_fuzz::handshake::run(data));
