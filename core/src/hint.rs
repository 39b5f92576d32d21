//! A cache hint for hosts' hot loops. A simulator of a thousand nodes reads, for each
//! envelope, a few records at random in tables far larger than the cache (the receiver's
//! record of the sender, the link's state, the event itself); a host that knows which input
//! comes next can start those loads one input ahead, so that they overlap with the work on
//! the input before instead of stalling one after another.

/// Starts loading the cache line holding `value` into every level of the cache, without
/// waiting for it. Only a hint: nothing observable changes (no fault, no value read), and it
/// does nothing on targets without a prefetch instruction.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse"
    ))]
    safe_arch::prefetch_t0(value);
    #[cfg(not(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse"
    )))]
    let _ = value;
}
