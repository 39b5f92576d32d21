//! `docs/metrics.md` lists every metric the runtime records, made from the constants of
//! `runtime-tokio/src/metric_names.rs` (name, labels, doc): it fails when the two disagree.
//! `UPDATE_METRICS_DOC=1 cargo test -p shoal-tests --test metrics_doc` writes the list again.

use std::path::Path;

const HEADER: &str = "# Metrics

Every metric Shoal records goes through the `metrics` facade, so an application chooses its
exporter; the management endpoint (cargo feature `management`) serves them in Prometheus' text
format at `/metrics` with `shoal::management::install_prometheus`. The names are constants in
`runtime-tokio/src/metric_names.rs`; this list is made from that file (`tests/tests/metrics_doc.rs`
checks it). Latency histograms (`*_seconds`) have buckets from 100 µs to 10 s with that
recorder.

| name | kind | labels | what it counts |
|---|---|---|---|
";

/// One row per constant: name, kind, labels, description.
fn rows(source: &str) -> Vec<[String; 4]> {
    let mut rows = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    for line in source.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("/// ") {
            doc.push(text);
            continue;
        }
        if line.starts_with("pub(crate) const") && !doc.is_empty() {
            let text = doc.join(" ");
            let head = text.split('`').nth(1).unwrap_or_default();
            let (name, labels) = match head.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (head, ""),
            };
            let rest = text.splitn(3, '`').nth(2).unwrap_or_default();
            let what = rest.trim_start_matches(':').trim_start_matches('.').trim();
            let kind = if name.ends_with("_seconds") || name.ends_with("_size") {
                "histogram"
            } else if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let what = if what.is_empty() { "—" } else { what };
            rows.push([name, kind, labels, what].map(String::from));
        }
        doc.clear();
    }
    rows.sort();
    rows
}

#[test]
fn the_metrics_list_matches_the_constants() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = std::fs::read_to_string(root.join("runtime-tokio/src/metric_names.rs")).unwrap();
    let rows = rows(&source);
    assert!(
        rows.len() > 40,
        "every constant is documented: {}",
        rows.len()
    );
    let mut expected = HEADER.to_string();
    for [name, kind, labels, what] in &rows {
        expected.push_str(&format!("| `{name}` | {kind} | {labels} | {what} |\n"));
    }
    let path = root.join("docs/metrics.md");
    if std::env::var_os("UPDATE_METRICS_DOC").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        found == expected,
        "docs/metrics.md is out of date: UPDATE_METRICS_DOC=1 cargo test -p shoal-tests --test metrics_doc"
    );
}
