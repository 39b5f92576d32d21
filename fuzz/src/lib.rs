//! The harnesses behind Shoal's fuzz targets. Each module has a `run(data)` that panics when a
//! property breaks; the binaries in `fuzz_targets/` hand libFuzzer's input to it, and
//! `tests/regressions.rs` replays every committed corpus entry and regression input through the
//! same functions on stable Rust.

pub mod allocation;
pub mod cluster_schedule;
pub mod decode_frame;
pub mod handshake;
pub mod node_inputs;
pub mod peak_alloc;

/// The fuzz targets, by name (each is also a module of this crate and a binary).
pub const TARGETS: [&str; 5] = [
    "decode_frame",
    "node_inputs",
    "cluster_schedule",
    "allocation",
    "handshake",
];

/// Runs target `name` on `data`. Panics on a broken property or an unknown name.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "decode_frame" => decode_frame::run(data),
        "node_inputs" => node_inputs::run(data),
        "cluster_schedule" => cluster_schedule::run(data),
        "allocation" => allocation::run(data),
        "handshake" => handshake::run(data),
        other => panic!("unknown fuzz target {other:?}; targets: {TARGETS:?}"),
    }
}
