//! The Markdown table the bench prints: each figure, its same-run baseline, the ratio and, where
//! the project set one, the target and whether it is met.

use std::fmt::Write as _;

/// A row's target.
pub(crate) enum Target {
    /// No target: the figure is reported for what it is.
    None,
    /// The ratio must be at most this.
    AtMost(f64),
    /// The ratio must be at least this.
    AtLeast(f64),
    /// A target on the value itself: its text, and whether this run met it.
    Value(&'static str, bool),
}

impl Target {
    /// The target's text and whether `ratio` meets it.
    fn judge(&self, ratio: Option<f64>) -> Option<(String, bool)> {
        match *self {
            Self::None => None,
            Self::AtMost(limit) => Some((format!("ratio ≤ {limit}"), ratio? <= limit)),
            Self::AtLeast(limit) => Some((format!("ratio ≥ {limit}"), ratio? >= limit)),
            Self::Value(text, met) => Some((text.to_owned(), met)),
        }
    }
}

/// One line of the table.
pub(crate) struct Row {
    figure: String,
    value: String,
    baseline: String,
    ratio: Option<f64>,
    target: Target,
}

impl Row {
    /// A figure against a baseline, judged by `target` on the ratio (value / baseline).
    pub(crate) fn ratio(
        figure: &str,
        value: String,
        baseline: String,
        ratio: f64,
        target: Target,
    ) -> Self {
        Self {
            figure: figure.to_owned(),
            value,
            baseline,
            ratio: Some(ratio),
            target,
        }
    }

    /// A figure without a ratio (its reference in the baseline column), judged by `target`.
    pub(crate) fn value(figure: &str, value: String, reference: String, target: Target) -> Self {
        Self {
            figure: figure.to_owned(),
            value,
            baseline: reference,
            ratio: None,
            target,
        }
    }

    /// Whether this row has a target it missed.
    pub(crate) fn missed(&self) -> bool {
        matches!(self.target.judge(self.ratio), Some((_, false)))
    }

    /// The row as one Markdown table line.
    pub(crate) fn markdown(&self) -> String {
        let ratio = self.ratio.map_or(String::new(), |r| format!("{r:.2}"));
        let target = match self.target.judge(self.ratio) {
            Some((text, true)) => format!("{text}: met"),
            Some((text, false)) => format!("{text}: **missed**"),
            None => String::new(),
        };
        format!(
            "| {} | {} | {} | {ratio} | {target} |",
            self.figure, self.value, self.baseline
        )
    }
}

/// The whole table, header included.
pub(crate) fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| figure | value | baseline (same run) | ratio | target |\n|---|---|---|---|---|\n",
    );
    for row in rows {
        let _ = writeln!(out, "{}", row.markdown());
    }
    out
}
