//! `cargo +nightly fuzz run decode_frame`: see `shoal_fuzz::decode_frame` for what it checks.
#![no_main]

// Measures what decoding allocates, so the target can hold it to the frame cap.
#[global_allocator]
static ALLOCATOR: shoal_fuzz::peak_alloc::PeakAlloc = shoal_fuzz::peak_alloc::PeakAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| shoal_fuzz::decode_frame::run(data));
