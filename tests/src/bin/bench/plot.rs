//! The scaling curves as SVG line charts (plotters' SVG backend: text stays SVG text, so no
//! font files are needed), logarithmic on the x axis because sizes grow by tens.

use std::path::Path;

use plotters::prelude::*;

/// One line of a chart: its legend and its points.
pub(crate) struct Series {
    /// The legend.
    pub(crate) name: String,
    /// (x, y) points, x ascending.
    pub(crate) points: Vec<(f64, f64)>,
}

/// Axis captions and the chart's title.
pub(crate) struct Labels<'a> {
    /// Above the chart.
    pub(crate) title: &'a str,
    /// Under the x axis.
    pub(crate) x: &'a str,
    /// Beside the y axis.
    pub(crate) y: &'a str,
}

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// Draws `series` into the SVG file `path`.
pub(crate) fn line_chart(
    path: &Path,
    labels: &Labels<'_>,
    series: &[Series],
) -> Result<(), Box<dyn std::error::Error>> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (x_min, x_max) = all().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    let y_max = all().fold(0.0f64, |hi, p| hi.max(p.1));
    if series.iter().all(|s| s.points.is_empty()) {
        return Err("nothing to plot".into());
    }
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(labels.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((x_min * 0.8..x_max * 1.25).log_scale(), 0.0..y_max * 1.15)?;
    chart
        .configure_mesh()
        .x_desc(labels.x)
        .y_desc(labels.y)
        .x_label_formatter(&|x| human(*x))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// 1000 → "1k", 1000000 → "1M".
fn human(x: f64) -> String {
    if x >= 1e6 {
        format!("{}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{}k", x / 1e3)
    } else {
        format!("{x}")
    }
}
