//! A picture of a run (`sim replay <seed> --html run.html`): one self-contained HTML page (inline
//! SVG and CSS, no script, nothing fetched) drawn from the typed trace. A row per node shows its
//! process and membership status over time, the faults that hit it as bands, how many shards
//! its region hosts, shard allocations and handoffs; below, deliveries per second; a red line
//! marks each violation where it happened.

use std::collections::BTreeMap;
use std::fmt::Write as _;

mod rows;

use crate::report::Report;
use crate::trace::TraceLine;
use rows::{Row, deliveries_per_second, rows_of};

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const ROW: f64 = 44.0;
const TOP: f64 = 24.0;
const CHART: f64 = 110.0;

/// Colours of membership statuses (anything else: `OTHER`).
const STATUS_COLOURS: [(&str, &str); 7] = [
    ("Joining", "#cfe3ff"),
    ("WeaklyUp", "#d9f2d0"),
    ("Up", "#a9dfa0"),
    ("Leaving", "#ffe2a6"),
    ("Exiting", "#ffc36e"),
    ("Down", "#f2a3a3"),
    ("Removed", "#d0d0d0"),
];
const OTHER: &str = "#e8e8e8";

/// Renders the page for `report`'s run and its `trace`.
pub fn render_html(report: &Report, trace: &[TraceLine]) -> String {
    let end = trace
        .iter()
        .map(|l| l.t_ns)
        .chain([u64::try_from(report.simulated.as_nanos()).unwrap_or(u64::MAX)])
        .max()
        .unwrap_or(1)
        .max(1);
    let rows = rows_of(trace, end);
    let deliveries = deliveries_per_second(trace, end);
    let mut page = String::new();
    let title = format!("seed {} {:?}", report.options.seed, report.outcome);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font:13px sans-serif;margin:16px}}h1{{font-size:18px}}\
         .violation{{color:#c00;font-weight:bold}}code{{background:#f4f4f4;padding:1px 4px}}\
         svg text{{font:11px sans-serif}}pre{{white-space:pre-wrap}}</style></head><body>\n<h1>Shoal simulator: {}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let first_line = report.to_string();
    let summary = first_line.lines().take(2).collect::<Vec<_>>().join("\n");
    let _ = writeln!(page, "<pre>{}</pre>", escape(&summary));
    let _ = writeln!(
        page,
        "<p>reproduce: <code>{}</code></p>",
        escape(&report.reproduce())
    );
    let describe = |v: &crate::Violation| {
        format!(
            "violation at {:.3} s: {:?} {}: {}",
            v.at.as_nanos() as f64 / 1e9,
            v.property,
            escape(&v.subject),
            escape(&v.detail)
        )
    };
    if let Some(first) = report.violations.first() {
        let _ = writeln!(page, "<p class=\"violation\">first {}</p>", describe(first));
    }
    legend(&mut page);
    timeline(&mut page, &rows, &deliveries, report, end);
    if !report.violations.is_empty() {
        let _ = writeln!(
            page,
            "<details><summary>all {} violations</summary>",
            report.violations.len()
        );
        for v in &report.violations {
            let _ = writeln!(page, "<div class=\"violation\">{}</div>", describe(v));
        }
        page.push_str("</details>\n");
    }
    page.push_str("</body></html>\n");
    page
}

fn legend(page: &mut String) {
    page.push_str("<p>");
    for (status, colour) in STATUS_COLOURS {
        let _ = write!(
            page,
            "<span style=\"background:{colour};padding:1px 6px;margin-right:4px\">{status}</span>"
        );
    }
    page.push_str(
        "<span style=\"background:#fff;border:1px solid #bbb;padding:0 6px;margin-right:4px\">\
         no process</span><span style=\"background:rgba(200,0,0,.35);padding:1px 6px;\
         margin-right:12px\">fault (partition, pause, clog)</span>\
         ▶ started ✕ crashed ⏏ downed or left ⚡ connection broken ▾ shard allocated \
         ▴ handoff begun; the dark line is the number of shards the node's region hosts; under \
         a row, <span style=\"color:#f90\">orange</span>: unreachable in another member's view, \
         <span style=\"color:#c00\">red</span>: down or removed in another member's view; \
         the red vertical line is the first violation, red ticks along the top later ones. \
         Hover for details.</p>\n",
    );
}

fn timeline(
    page: &mut String,
    rows: &BTreeMap<(u64, String), Row>,
    deliveries: &[u64],
    report: &Report,
    end: u64,
) {
    let x = |t: u64| LEFT + (WIDTH - LEFT - RIGHT) * t as f64 / end as f64;
    let rows_height = ROW * rows.len() as f64;
    let height = TOP + rows_height + 30.0 + CHART + 30.0;
    let _ = writeln!(
        page,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\">"
    );
    let max_shards = rows
        .values()
        .flat_map(|r| r.hosting.iter().map(|h| h.1))
        .max()
        .unwrap_or(0)
        .max(1);
    for (i, ((_, node), row)) in rows.iter().enumerate() {
        let top = TOP + ROW * i as f64;
        let band = ROW - 8.0;
        let _ = writeln!(
            page,
            "<text x=\"4\" y=\"{:.1}\">{}</text>",
            top + band / 2.0 + 4.0,
            escape(node)
        );
        for (from, to, status) in &row.statuses {
            let colour = STATUS_COLOURS.iter().find(|(s, _)| s == status).map_or(
                if status == "no process" {
                    "#ffffff"
                } else {
                    OTHER
                },
                |c| c.1,
            );
            let attrs = format!("fill=\"{colour}\" stroke=\"#bbb\" stroke-width=\"0.3\"");
            let title = format!("{} {status}", escape(node));
            let span = (*from, to.unwrap_or(end));
            draw_span(page, &x, span, (top, band, 0.5), &attrs, &title);
        }
        for (from, to, what) in &row.faults {
            let attrs = "class=\"fault\" fill=\"rgba(200,0,0,0.35)\"";
            let place = (top + band * 0.55, band * 0.45, 1.0);
            let span = (*from, to.unwrap_or(end));
            draw_span(page, &x, span, place, attrs, &escape(what));
        }
        for (from, to, opinion) in &row.seen {
            let colour = match opinion.as_str() {
                "Down" => "#c00",
                "unreachable" => "#f90",
                _ => continue,
            };
            let title = format!("{} {opinion} in other members' views", escape(&row.current));
            let span = (*from, to.unwrap_or(end));
            let attrs = format!("fill=\"{colour}\"");
            draw_span(page, &x, span, (top + band, 4.0, 1.0), &attrs, &title);
        }
        if !row.hosting.is_empty() {
            let points: Vec<String> = row
                .hosting
                .iter()
                .map(|&(t, n)| {
                    let y = top + band - 2.0 - (band - 6.0) * n as f64 / max_shards as f64;
                    format!("{:.1},{y:.1}", x(t))
                })
                .collect();
            let _ = writeln!(
                page,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"#234\" stroke-width=\"1.2\">\
                 <title>{} shards hosted (most: {max_shards})</title></polyline>",
                points.join(" "),
                escape(node)
            );
        }
        for (t, glyph, colour, what) in &row.marks {
            let _ = writeln!(
                page,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\" text-anchor=\"middle\">{glyph}\
                 <title>{} at {:.3} s</title></text>",
                x(*t),
                top + 10.0,
                escape(what),
                *t as f64 / 1e9
            );
        }
    }
    axis(page, &x, end, TOP + rows_height + 14.0);
    chart(page, &x, deliveries, TOP + rows_height + 30.0);
    // The first violation is the line; later ones (a broken guarantee often breaks for many
    // subjects, and again) are ticks along the top.
    let mut ticks = std::collections::BTreeSet::new();
    for v in report.violations.iter().skip(1) {
        let at = x(v.at.as_nanos());
        if ticks.insert(at.round() as i64) {
            let _ = writeln!(
                page,
                "<line x1=\"{at:.1}\" y1=\"{:.1}\" x2=\"{at:.1}\" y2=\"{TOP}\" stroke=\"#e00\">\
                 <title>{:?} {}: {}</title></line>",
                TOP - 6.0,
                v.property,
                escape(&v.subject),
                escape(&v.detail)
            );
        }
    }
    if let Some(first) = report.violations.first() {
        let at = x(first.at.as_nanos());
        let _ = writeln!(
            page,
            "<g id=\"violation\"><line x1=\"{at:.1}\" y1=\"4\" x2=\"{at:.1}\" \
             y2=\"{height:.1}\" stroke=\"#e00\" stroke-width=\"2\"/><text x=\"{:.1}\" y=\"12\" \
             fill=\"#e00\" font-weight=\"bold\">{:?} {}</text><title>{}</title></g>",
            at + 4.0,
            first.property,
            escape(&first.subject),
            escape(&first.detail)
        );
    }
    page.push_str("</svg>\n");
}

/// A band over `span` (from, to in nanoseconds) at `(y, height, min_width)`, with `attrs` and
/// a hover title naming its times.
fn draw_span(
    page: &mut String,
    x: &impl Fn(u64) -> f64,
    (from, to): (u64, u64),
    (y, height, min_width): (f64, f64, f64),
    attrs: &str,
    title: &str,
) {
    let (a, b) = (x(from), x(to));
    let _ = writeln!(
        page,
        "<rect {attrs} x=\"{a:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{height:.1}\">\
         <title>{title} {:.3}–{:.3} s</title></rect>",
        (b - a).max(min_width),
        from as f64 / 1e9,
        to as f64 / 1e9
    );
}

/// The time axis, with ticks at a round step.
fn axis(page: &mut String, x: &impl Fn(u64) -> f64, end: u64, y: f64) {
    let seconds = end as f64 / 1e9;
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0]
        .into_iter()
        .find(|s| seconds / s <= 16.0)
        .unwrap_or(1200.0);
    let mut t = 0.0;
    while t <= seconds {
        let at = x((t * 1e9) as u64);
        let _ = writeln!(
            page,
            "<line x1=\"{at:.1}\" y1=\"{TOP}\" x2=\"{at:.1}\" y2=\"{:.1}\" stroke=\"#ccc\" \
             stroke-dasharray=\"2,3\"/><text x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"middle\">\
             {t} s</text>",
            y - 10.0,
            y + 2.0
        );
        t += step;
    }
}

/// Deliveries per second as bars.
fn chart(page: &mut String, x: &impl Fn(u64) -> f64, per_second: &[u64], top: f64) {
    let most = per_second.iter().copied().max().unwrap_or(0).max(1);
    let _ = writeln!(
        page,
        "<text x=\"4\" y=\"{:.1}\">deliveries/s</text><text x=\"4\" y=\"{:.1}\">(most {most})</text>",
        top + 14.0,
        top + 28.0
    );
    for (second, &n) in per_second.iter().enumerate() {
        let a = x(second as u64 * 1_000_000_000);
        let b = x((second as u64 + 1) * 1_000_000_000);
        let h = CHART * n as f64 / most as f64;
        let _ = writeln!(
            page,
            "<rect x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{h:.1}\" fill=\"#6a8fc7\">\
             <title>{second}–{} s: {n} deliveries</title></rect>",
            top + CHART - h,
            (b - a - 0.3).max(0.3),
            second + 1
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
