//! The live view: on a terminal a progress bar with the traffic, the current fault and the
//! shards and entities per node, refreshed in place; otherwise (CI, a pipe) the same facts as
//! one plain line per second. Tour steps are printed above it as they happen.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::http::Http;
use crate::processes::Listening;
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
/// failures, and each node's shards and entities, read over HTTP from a node's management
/// endpoint (`/cluster/shards/counter`, the coordinator's statistics), the one that answered
/// last asked first.
pub(crate) async fn refresh(
    view: Arc<View>,
    progress: Arc<Progress>,
    http: Http,
    nodes: Arc<Mutex<Vec<Listening>>>,
) {
    let (mut last, mut last_at) = (0, Instant::now());
    let mut answered_last = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let acked = progress.acknowledged.load(Ordering::Relaxed);
        let rate = (acked - last) as f64 / last_at.elapsed().as_secs_f64();
        (last, last_at) = (acked, Instant::now());
        let failed = progress.failed.load(Ordering::Relaxed);
        let nodes = nodes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut layout = "shards unknown".to_string();
        for asked in (0..nodes.len()).map(|k| (answered_last + k) % nodes.len()) {
            let limit = Duration::from_millis(300);
            let answer = http.get(&nodes[asked].management, "/cluster/shards/counter", limit);
            if let Ok((200, shards)) = answer.await {
                answered_last = asked;
                layout = describe(&shards, &nodes);
                break;
            }
        }
        view.show(format!(
            "{acked} acked ({rate:.0}/s), {failed} failed | shards/entities {layout}"
        ));
    }
}

/// `n<index> <shards>/<entities>` per region of a `/cluster/shards` answer, by node index.
fn describe(shards: &serde_json::Value, nodes: &[Listening]) -> String {
    let regions = shards["regions"].as_array().cloned().unwrap_or_default();
    let mut layout: Vec<(u32, usize, u64)> = regions
        .iter()
        .filter_map(|r| {
            let address = r["address"].as_str()?;
            let index = nodes.iter().find(|n| n.address == address)?.index;
            let shards = r["shards"].as_array().map_or(0, Vec::len);
            Some((index, shards, r["entities"].as_u64().unwrap_or(0)))
        })
        .collect();
    layout.sort_unstable();
    layout
        .iter()
        .map(|(i, shards, entities)| format!("n{i} {shards}/{entities}"))
        .collect::<Vec<_>>()
        .join(" ")
}
