//! Direct routes (the runtime's fast path, `shoal_core::direct`): with every client sending on
//! its member's routes where they are open, and every link's reader delivering its peer's
//! letters on theirs, runs keep every guarantee; each negative control, breaking one rule of
//! the route gate or of the links' numbers, is caught by the checks.

use sim::{Direct, DirectFault, Options, Outcome, Property, run};

/// The options of `seed` in the default batch, with direct routes on (`fault` broken).
fn with_routes(seed: u64, fault: Option<DirectFault>) -> Options {
    let mut options = Options::for_seed(seed);
    options.direct = Some(Direct { fault });
    options
}

#[test]
fn direct_routes_keep_every_guarantee() {
    let (mut direct, mut closed, mut refused, mut remote) = (0, 0, 0, 0);
    for seed in 0..60 {
        let report = run(with_routes(seed, None));
        assert_ne!(report.outcome, Outcome::Failed, "{report}");
        let count = |marker: &str| report.coverage.get(marker).copied().unwrap_or(0);
        direct += count("a letter went to its entity on a direct route");
        closed += count("a direct route closed");
        refused += count("a full mailbox sent a direct letter through the node");
        remote += count("a peer's letter went to its entity on a direct route");
    }
    assert!(direct > 1_000, "letters went direct: {direct}");
    assert!(remote > 1_000, "peers' letters went direct: {remote}");
    assert!(closed > 100, "routes closed: {closed}");
    assert!(
        refused > 0,
        "full mailboxes sent direct letters through the node"
    );
}

/// The first seed below `seeds` whose run with `fault` breaks `property`.
fn caught(fault: DirectFault, property: Property, seeds: u64) -> Option<u64> {
    (0..seeds).find(|&seed| {
        let report = run(with_routes(seed, Some(fault)));
        report.violations.iter().any(|v| v.property == property)
    })
}

/// A route opened while the host's own letter waits in a buffer (a stopping entity, a shard
/// handing off) lets the next letter overtake it.
#[test]
fn a_route_opened_before_the_hosts_letters_are_handed_over_breaks_order() {
    let seed = caught(DirectFault::OpenUndrained, Property::Order, 100);
    assert!(seed.is_some(), "no seed of 100 caught the undrained route");
}

/// A route left open when the node stops its entity hands letters to an incarnation told to
/// stop.
#[test]
fn a_route_left_open_after_a_stop_breaks_the_host_contract() {
    let seed = caught(DirectFault::KeepAfterStop, Property::HostContract, 100);
    assert!(
        seed.is_some(),
        "no seed of 100 caught the route kept after a stop"
    );
}

/// With duplicates on the network: the options of `seed` with routes (`fault` broken).
fn with_copies(seed: u64, fault: Option<DirectFault>) -> Options {
    let mut options = with_routes(seed, fault);
    options.network.duplicate = 0.05;
    options
}

/// Copies of letters that readers delivered themselves race the readers' reports: the node
/// refuses every one.
#[test]
fn copies_of_letters_a_reader_delivered_are_refused() {
    let mut remote = 0;
    for seed in 0..30 {
        let report = run(with_copies(seed, None));
        assert_ne!(report.outcome, Outcome::Failed, "{report}");
        remote += (report.coverage)
            .get("a peer's letter went to its entity on a direct route")
            .copied()
            .unwrap_or(0);
    }
    assert!(remote > 1_000, "peers' letters went direct: {remote}");
}

/// A reader that never reports the numbers it consumed lets the node accept a copy of a
/// letter the entity already had.
#[test]
fn a_reader_that_never_reports_what_it_consumed_breaks_exactly_once() {
    let seed = (0..100).find(|&seed| {
        let report = run(with_copies(seed, Some(DirectFault::SkipReport)));
        (report.violations.iter()).any(|v| v.property == Property::ExactlyOnce)
    });
    assert!(
        seed.is_some(),
        "no seed of 100 caught the unreported numbers"
    );
}
