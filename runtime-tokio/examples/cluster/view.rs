//! The live view: on a terminal a progress bar with the traffic, the current fault and the
//! shards and entities per node, refreshed in place; otherwise (CI, a pipe) the same facts as
//! one plain line per second. Tour steps are printed above it as they happen.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use shoal::Region;

use crate::member::Counter;
use crate::watch::Watch;
use crate::workload::Progress;

/// The terminal output of a run.
pub(crate) struct View {
    started: Instant,
    bar: Option<ProgressBar>,
    fault: Mutex<String>,
}

impl View {
    /// A view for a run planned to last `planned`.
    pub(crate) fn new(planned: Duration) -> Arc<Self> {
        let bar = std::io::stdout().is_terminal().then(|| {
            let bar = ProgressBar::new(planned.as_secs());
            let style =
                ProgressStyle::with_template("{elapsed_precise:.dim} [{bar:24.cyan/blue}] {msg}")
                    .expect("a valid template")
                    .progress_chars("=> ");
            bar.set_style(style);
            bar
        });
        Arc::new(Self {
            started: Instant::now(),
            bar,
            fault: Mutex::new("none".into()),
        })
    }

    /// Seconds since the run started.
    pub(crate) fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Prints a line of the run's story above the live view.
    pub(crate) fn say(&self, line: &str) {
        let line = format!("[{:>6.1}s] {line}", self.elapsed());
        match &self.bar {
            Some(bar) => bar.println(line),
            None => println!("{line}"),
        }
    }

    /// Names the fault in progress (`none` between faults).
    pub(crate) fn set_fault(&self, fault: &str) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault.to_string();
    }

    /// Clears the live view before the summary.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn show(&self, status: String) {
        let fault = self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let status = format!("{status} | fault: {fault}");
        match &self.bar {
            Some(bar) => {
                bar.set_position(self.started.elapsed().as_secs());
                bar.set_message(status);
            }
            None => self.say(&status),
        }
    }
}

/// Refreshes `view` every second until aborted: acknowledged increments and their rate,
/// failures, and each node's shards and entities (from the coordinator's statistics).
pub(crate) async fn refresh(
    view: Arc<View>,
    progress: Arc<Progress>,
    region: Region<Counter>,
    watch: Watch,
    addresses: Arc<Mutex<Vec<(u32, String)>>>,
) {
    let (mut last, mut last_at) = (0, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let acked = progress.acknowledged.load(Ordering::Relaxed);
        let rate = (acked - last) as f64 / last_at.elapsed().as_secs_f64();
        (last, last_at) = (acked, Instant::now());
        let failed = progress.failed.load(Ordering::Relaxed);
        let stats = tokio::time::timeout(Duration::from_millis(800), region.stats()).await;
        let layout = match stats {
            Ok(Ok(stats)) => {
                let addresses = addresses.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let mut nodes: Vec<(u32, usize, u32)> = stats
                    .regions
                    .iter()
                    .filter_map(|r| {
                        let index = watch.index_of(r.region, &addresses)?;
                        let entities = r.shards.iter().map(|(_, n)| n).sum();
                        Some((index, r.shards.len(), entities))
                    })
                    .collect();
                nodes.sort_unstable();
                nodes
                    .iter()
                    .map(|(i, shards, entities)| format!("n{i} {shards}/{entities}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            _ => "shards unknown".into(),
        };
        view.show(format!(
            "{acked} acked ({rate:.0}/s), {failed} failed | shards/entities {layout}"
        ));
    }
}
