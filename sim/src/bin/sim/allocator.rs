//! The `sim` binary's allocator and how it is set up.
//!
//! Sweeps and the bench allocate per message and per gossip state: mimalloc keeps that cheaper
//! than the system allocator at scale (see sim/Cargo.toml). By default mimalloc returns memory
//! that stayed free for a second to the OS; a simulated cluster frees and allocates gossip
//! states and tables all run long, so it faults that memory back, and as mimalloc asks for
//! transparent huge pages each fault has the kernel zero 2 MiB: at 1,000 nodes that zeroing was
//! 9-11 % of the cycles (BENCHMARKS.md, eighteenth pass). The simulator is a batch process
//! that wants its peak until it exits, so purging is turned off.

/// The allocator of every `sim` command.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's variable for how long freed memory waits before it is returned to the OS, in
/// milliseconds; `-1` never returns it.
const PURGE_DELAY: &str = "MIMALLOC_PURGE_DELAY";

/// Runs this binary again, with the same arguments, with mimalloc's purging off, unless
/// [`PURGE_DELAY`] is set already (to anything: set it to keep mimalloc's default and run in
/// place, e.g. under valgrind, which does not follow an exec unless told to).
///
/// mimalloc reads its options from the environment once, before `main`, and the `mimalloc`
/// crate offers no safe way to set them afterwards, hence the exec. Returns only if the
/// variable was set or the exec failed; then the command runs in this process as it is.
#[cfg(unix)]
pub(crate) fn run_without_purging() {
    use std::ffi::OsString;
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    if std::env::var_os(PURGE_DELAY).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let error = Command::new(exe).args(args).env(PURGE_DELAY, "-1").exec();
    // Running with purging on is slower, not wrong: say so and go on.
    eprintln!("sim: could not restart with {PURGE_DELAY}=-1 ({error}); running as is");
}

/// Elsewhere the command runs with mimalloc's defaults.
#[cfg(not(unix))]
pub(crate) fn run_without_purging() {}
