//! The report's SVG charts, drawn with plotters (its SVG backend writes text as SVG `<text>`,
//! so no font is embedded).
//!
//! `capacity.svg`: answers per second per runtime and workload with the server's CPU kept busy,
//! the bar at the median round and a whisker from the lowest to the highest. Per workload:
//! `latency-NAME.svg` (p50 and p99 against rate, per runtime), `cdf-NAME.svg` (the latency
//! distribution at the lowest rate) and `cpu-NAME.svg` (server CPU per request against rate).

use std::path::Path;

use plotters::prelude::*;

use crate::catalogue::Runtime;
use crate::results::{Results, RuntimeResult};
use crate::workload::Workload;

const SIZE: (u32, u32) = (720, 420);

fn colour(runtime: Runtime) -> RGBColor {
    match runtime {
        Runtime::Edgegate => RGBColor(0xD9, 0x48, 0x1C),
        Runtime::EdgegateInfo => RGBColor(0xA8, 0x6A, 0x4E),
        Runtime::EdgegateWasm => RGBColor(0x8E, 0x2A, 0x6B),
        Runtime::EdgegateComponent => RGBColor(0x1C, 0x8C, 0x8C),
        Runtime::EdgegateComponentInfo => RGBColor(0x5E, 0xA8, 0xA8),
        Runtime::EdgegateRateLocal => RGBColor(0xC0, 0x39, 0x2B),
        Runtime::EdgegateRateShared => RGBColor(0x7F, 0x1D, 0x14),
        Runtime::Node => RGBColor(0x3C, 0x87, 0x3A),
        Runtime::Workerd => RGBColor(0xF3, 0x8A, 0x20),
        Runtime::Native => RGBColor(0x4A, 0x5C, 0xC8),
        Runtime::WasmtimeServe => RGBColor(0x65, 0x4F, 0x9E),
    }
}

/// Writes every chart into `dir`; returns their file names.
pub fn write_all(results: &Results, dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    if capacity(results, &dir.join("capacity.svg"))? {
        names.push("capacity.svg".to_string());
    }
    for workload in results.workloads() {
        for (kind, draw) in [
            ("latency", latency as fn(&Results, Workload, &Path) -> anyhow::Result<bool>),
            ("cdf", cdf),
            ("cpu", cpu),
        ] {
            let name = format!("{kind}-{}.svg", workload.name());
            if draw(results, workload, &dir.join(&name))? {
                names.push(name);
            }
        }
    }
    Ok(names)
}

type Series = Vec<(Runtime, &'static str, Vec<(f64, f64)>)>;

/// Lines of `(x, y)` on a linear x and a logarithmic y axis.
fn draw(
    path: &Path,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    series: &Series,
    log_x: bool,
) -> anyhow::Result<bool> {
    let points = series.iter().flat_map(|s| s.2.iter());
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    if x_lo > x_hi || y_hi <= 0.0 {
        return Ok(false);
    }
    if x_lo == x_hi {
        x_lo *= 0.5;
        x_hi *= 1.5;
    }
    let y_range = (y_lo.max(0.1) * 0.8)..(y_hi * 1.25);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64);
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart.configure_mesh().x_desc(x_desc).y_desc(y_desc).draw().map_err(plot_error)?;
            for (runtime, style, line) in series {
                let c = colour(*runtime);
                let stroke = if *style == "p50" { c.stroke_width(1) } else { c.stroke_width(2) };
                let label = if style.is_empty() {
                    runtime.name().to_string()
                } else {
                    format!("{} {style}", runtime.name())
                };
                chart
                    .draw_series(LineSeries::new(line.iter().copied(), stroke).point_size(3))
                    .map_err(plot_error)?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(plot_error)?;
        }};
    }
    if log_x {
        finish!(
            builder
                .build_cartesian_2d((x_lo.max(0.1)..x_hi).log_scale(), y_range.log_scale())
                .map_err(plot_error)?
        );
    } else {
        finish!(builder.build_cartesian_2d(x_lo..x_hi, y_range.log_scale()).map_err(plot_error)?);
    }
    root.present().map_err(plot_error)?;
    Ok(true)
}

fn plot_error<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {e}")
}

fn by_rate(
    r: &RuntimeResult,
    workload: Workload,
    f: impl Fn(&crate::results::Run) -> Option<f64>,
) -> Vec<(f64, f64)> {
    r.runs
        .iter()
        .filter(|run| run.workload == workload)
        .filter_map(|run| Some((run.rate, f(run)?)))
        .collect()
}

fn latency(results: &Results, workload: Workload, path: &Path) -> anyhow::Result<bool> {
    let mut series: Series = Vec::new();
    for r in results.measured() {
        series.push((r.runtime, "p99", by_rate(r, workload, |run| Some(run.latency.p99))));
        series.push((r.runtime, "p50", by_rate(r, workload, |run| Some(run.latency.p50))));
    }
    let caption = format!("{}: latency against rate (corrected)", workload.name());
    draw(path, &caption, "requests per second", "latency (µs, log)", &series, false)
}

fn cdf(results: &Results, workload: Workload, path: &Path) -> anyhow::Result<bool> {
    let Some(&rate) = results.rates(workload).first() else { return Ok(false) };
    let mut series: Series = Vec::new();
    for r in results.measured() {
        if let Some(run) = r.runs.iter().find(|run| run.workload == workload && run.rate == rate) {
            // x: latency, y: the share of requests slower than it ("1 − quantile"), on a log
            // axis so the tail is visible.
            let points = run
                .latency
                .cdf
                .iter()
                .filter(|(q, _)| *q < 1.0)
                .map(|&(q, us)| (us, (1.0 - q) * 100.0))
                .collect();
            series.push((r.runtime, "", points));
        }
    }
    let caption = format!("{}: latency distribution at {rate:.0} rps", workload.name());
    draw(path, &caption, "latency (µs, log)", "% of requests slower (log)", &series, true)
}

fn cpu(results: &Results, workload: Workload, path: &Path) -> anyhow::Result<bool> {
    let series: Series = results
        .measured()
        .map(|r| (r.runtime, "", by_rate(r, workload, |run| run.cpu_us_per_request)))
        .collect();
    let caption = format!("{}: server CPU per request", workload.name());
    draw(path, &caption, "requests per second", "CPU µs per request (log)", &series, false)
}

/// Grouped bars: one group per workload, one bar per runtime at its median round, a whisker
/// from its lowest round to its highest.
fn capacity(results: &Results, path: &Path) -> anyhow::Result<bool> {
    let workloads = results.capacity_workloads();
    let runtimes: Vec<&RuntimeResult> =
        results.measured().filter(|r| !r.capacity.is_empty()).collect();
    let top = runtimes
        .iter()
        .flat_map(|r| r.capacity.iter().filter_map(|c| c.rps()))
        .map(|s| s.max)
        .fold(0.0, f64::max);
    if workloads.is_empty() || top <= 0.0 {
        return Ok(false);
    }
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let groups = workloads.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption("capacity: answers per second, server CPU kept busy", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..groups, 0.0..top * 1.15)
        .map_err(plot_error)?;
    let names: Vec<&str> = workloads.iter().map(|w| w.name()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(workloads.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 {
                names.get(i).map_or("", |n| n).to_string()
            } else {
                String::new()
            }
        })
        .y_desc("requests per second")
        .y_label_formatter(&|v| format!("{:.0}k", v / 1000.0))
        .draw()
        .map_err(plot_error)?;
    let width = 0.8 / runtimes.len().max(1) as f64;
    for (k, r) in runtimes.iter().enumerate() {
        let c = colour(r.runtime);
        let mut bars = Vec::new();
        let mut whiskers = Vec::new();
        for (g, &workload) in workloads.iter().enumerate() {
            let Some(s) = r.capacity_of(workload).and_then(|c| c.rps()) else { continue };
            let x = g as f64 + 0.1 + k as f64 * width;
            bars.push(Rectangle::new([(x, 0.0), (x + width * 0.9, s.median)], c.filled()));
            let mid = x + width * 0.45;
            whiskers
                .push(PathElement::new(vec![(mid, s.min), (mid, s.max)], BLACK.stroke_width(1)));
        }
        chart
            .draw_series(bars)
            .map_err(plot_error)?
            .label(r.runtime.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        chart.draw_series(whiskers).map_err(plot_error)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(true)
}
