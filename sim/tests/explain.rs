//! `Command::Explain` in the simulator: with half of the location queries asking for the
//! decisions behind an entity's placement and letters, every answer holds only decisions that
//! were taken (allocations, rebalance moves, gate waits, dead letters, by the member named)
//! and leaves out none its logs still hold; the negative control, dropping each answer's newest
//! decision, is caught.

use sim::{ExplainQueries, Options, Outcome, Property, run};

/// The options of `seed` in the default batch, asking `explain` questions (some queries in
/// every run).
fn explaining(seed: u64, explain: ExplainQueries) -> Options {
    let mut options = Options::for_seed(seed);
    options.workload.explain = explain;
    if options.workload.queries == 0.0 {
        options.workload.queries = 0.05;
    }
    options
}

#[test]
fn explanations_hold_what_happened_and_nothing_else() {
    let (mut held, mut empty) = (0, 0);
    for seed in 0..40 {
        let report = run(explaining(seed, ExplainQueries::On));
        assert_ne!(report.outcome, Outcome::Failed, "{report}");
        let count = |marker: &str| report.coverage.get(marker).copied().unwrap_or(0);
        held += count("an explanation's decisions were what happened");
        empty += count("an explanation held no decision");
    }
    assert!(held > 200, "explanations with decisions: {held}");
    assert!(
        empty > 0,
        "explanations of entities nothing was decided about: {empty}"
    );
}

/// An answer missing its newest decision (an allocation or a dead letter) is caught.
#[test]
fn an_explanation_missing_a_decision_is_caught() {
    let caught = (0..40).find(|&seed| {
        let report = run(explaining(seed, ExplainQueries::DropNewest));
        report
            .violations
            .iter()
            .any(|v| v.property == Property::CommandReply)
    });
    assert!(caught.is_some(), "no seed of 40 caught a dropped decision");
}
