//! SVG charts (plotters' SVG backend: no fonts or system libraries needed).

use plotters::prelude::*;
use std::path::Path;

pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub log_y: bool,
    /// X on a log scale (e.g. clients 1 … 4,096); x must then be > 0.
    pub log_x: bool,
}

fn err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Line charts side by side in one SVG file.
pub fn line_panels(path: &Path, panels: &[Panel]) -> std::io::Result<()> {
    let width = 640 * panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        let pts = panel.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x0 > x1 {
            continue;
        }
        if x0 == x1 {
            x1 = x0 + 1.0;
        }
        let mut chart = ChartBuilder::on(area);
        chart
            .caption(&panel.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
        if panel.log_x {
            let (x0, x1) = (x0.max(1e-9), x1.max(x0.max(1e-9) * 2.0));
            let lo = (y0.max(1e-9) / 2.0).max(1e-9);
            let mut ctx = chart
                .build_cartesian_2d((x0..x1).log_scale(), (lo..y1 * 2.0).log_scale())
                .map_err(err)?;
            ctx.configure_mesh()
                .x_desc(&panel.x_label)
                .y_desc(&panel.y_label)
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.0e}"))
                .draw()
                .map_err(err)?;
            draw_series(&mut ctx, panel)?;
        } else if panel.log_y {
            let lo = (y0.max(1e-9) / 2.0).max(1e-9);
            let mut ctx = chart
                .build_cartesian_2d(x0..x1, (lo..y1 * 2.0).log_scale())
                .map_err(err)?;
            ctx.configure_mesh()
                .x_desc(&panel.x_label)
                .y_desc(&panel.y_label)
                .y_label_formatter(&|v| format!("{v:.0e}"))
                .draw()
                .map_err(err)?;
            draw_series(&mut ctx, panel)?;
        } else {
            let mut ctx = chart
                .build_cartesian_2d(x0..x1, 0.0..y1 * 1.1)
                .map_err(err)?;
            ctx.configure_mesh()
                .x_desc(&panel.x_label)
                .y_desc(&panel.y_label)
                .draw()
                .map_err(err)?;
            draw_series(&mut ctx, panel)?;
        }
    }
    root.present().map_err(err)
}

fn draw_series<'a, X, Y>(
    ctx: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    panel: &Panel,
) -> std::io::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, s) in panel.series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        ctx.draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(err)?;
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .label_font(("sans-serif", 11))
        .draw()
        .map_err(err)
}

/// One bar of a bar chart.
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// Drawn in red (e.g. failed verification), else in blue; `none` bars grey.
    pub bad: bool,
    pub muted: bool,
}

/// A horizontal bar chart (one bar per strategy), values printed at the bar ends.
pub fn bars(path: &Path, title: &str, x_label: &str, bars: &[Bar]) -> std::io::Result<()> {
    let height = 120 + 36 * bars.len() as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    draw_bars(&root, title, x_label, bars)?;
    root.present().map_err(err)
}

/// Bar charts side by side under one title (e.g. one panel per workload).
pub fn bar_panels(
    path: &Path,
    title: &str,
    x_label: &str,
    panels: &[(String, Vec<Bar>)],
) -> std::io::Result<()> {
    let most = panels.iter().map(|(_, b)| b.len()).max().unwrap_or(1) as u32;
    let width = 700 * panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 160 + 36 * most)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (area, (name, b)) in areas.iter().zip(panels) {
        draw_bars(area, name, x_label, b)?;
    }
    root.present().map_err(err)
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    bars: &[Bar],
) -> std::io::Result<()>
where
    DB::ErrorType: 'static,
{
    let max = bars.iter().map(|b| b.value).fold(0.0, f64::max).max(1e-9);
    let n = bars.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(10)
        .build_cartesian_2d(0.0..max * 1.35, 0.0..n.max(1.0))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc(x_label)
        .draw()
        .map_err(err)?;
    for (i, b) in bars.iter().enumerate() {
        // Top to bottom in the given order.
        let y = n - 1.0 - i as f64;
        let color = if b.bad {
            RGBColor(214, 39, 40)
        } else if b.muted {
            RGBColor(160, 160, 160)
        } else {
            RGBColor(31, 119, 180)
        };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, y + 0.15), (b.value, y + 0.85)],
                color.filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{}  {:.0}", b.label, b.value),
                (b.value + max * 0.01, y + 0.65),
                ("sans-serif", 14),
            )))
            .map_err(err)?;
    }
    Ok(())
}
