//! The report's charts, drawn by plotters into SVG text (its SVG backend only: no fonts are
//! read, text is left to the viewer).
//!
//! Invariants: only measured values are drawn — a shape without a time, one that failed its
//! check, or one the suite no longer defines is left out and counted by the caller's notes,
//! never drawn at a made-up position. No string read from a file goes into an SVG: names and
//! legends are HTML beside the chart.

use super::data::{OpReport, ReportData, State};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

type DrawErr = DrawingAreaErrorKind<std::io::Error>;

/// Draws into an SVG of `size` pixels and returns its text.
fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), DrawErr>,
) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        draw(&root).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(buf)
}

/// A chart with logarithmic axes, drawn as SVG.
type LogLog<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, LogCoord<f64>>>;

/// A log-log chart on `root` over the given spans, its mesh drawn with the axes' descriptions
/// (both roofline charts share this frame).
fn loglog<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    x: (f64, f64),
    y: (f64, f64),
    x_desc: &str,
    y_desc: &str,
) -> Result<LogLog<'a, 'b>, DrawErr> {
    let mut chart = ChartBuilder::on(root)
        .margin(10)
        .margin_right(20)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d((x.0..x.1).log_scale(), (y.0..y.1).log_scale())?;
    chart
        .configure_mesh()
        .max_light_lines(1)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| log_label(*v))
        .y_label_formatter(&|v| log_label(*v))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .draw()?;
    Ok(chart)
}

/// A log axis label: `0.25`, `1`, `3e-4`, `2e3`.
fn log_label(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if (0.01..1000.0).contains(&v.abs()) {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.0e}")
    }
}

/// `[lo, hi]` of positive values, widened by `pad` (a factor) on both sides.
fn log_span(values: impl Iterator<Item = f64>, pad: f64) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    (hi > 0.0).then(|| (lo / pad, hi * pad))
}

const S_COLOUR: RGBColor = RGBColor(31, 119, 180);

/// A label's style, anchored at its left end and vertically at `v`.
fn label(colour: &RGBColor, v: VPos) -> TextStyle<'static> {
    ("sans-serif", 12)
        .into_font()
        .color(colour)
        .pos(Pos::new(HPos::Left, v))
}
const ROOF_COLOUR: RGBColor = RGBColor(90, 90, 90);

/// The colour of the `i`-th operator in the roofline charts, and as `#rrggbb` for the legend.
pub fn op_colour(i: usize) -> (RGBColor, String) {
    let (r, g, b) = Palette99::pick(i).to_backend_color().rgb;
    (RGBColor(r, g, b), format!("#{r:02x}{g:02x}{b:02x}"))
}

/// S per shape of an operator's record (log axis), with its S_op and S = 1 marked. None when
/// the operator has no record.
pub fn s_over_shapes(op: &OpReport) -> Option<Result<String, String>> {
    let r = op.record.as_ref()?;
    let points: Vec<(f64, f64)> = r
        .shapes
        .iter()
        .filter(|s| s.passed())
        .filter_map(|s| s.s.filter(|v| *v > 0.0).map(|v| (f64::from(s.shape), v)))
        .collect();
    let max_id = r
        .shapes
        .iter()
        .map(|s| s.shape)
        .chain(op.unmeasured.iter().copied())
        .max()
        .unwrap_or(0);
    let s_op = r.s_op;
    let (lo, hi) =
        log_span(points.iter().map(|p| p.1).chain([1.0, s_op]), 1.6).unwrap_or((1e-4, 1.6));
    let stale = !matches!(op.state, State::Measured);
    Some(svg((760, 250), |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(8)
            .margin_right(70)
            .x_label_area_size(34)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.5f64..(f64::from(max_id) + 0.5), (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .x_desc("shape id")
            .y_desc("S = T_SOL / T (log)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| log_label(*v))
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            .draw()?;
        let x1 = f64::from(max_id) + 0.5;
        let mark = |y: f64, text: String, colour: RGBColor| {
            (
                LineSeries::new([(-0.5, y), (x1, y)], colour.stroke_width(1)),
                Text::new(text, (x1, y), label(&colour, VPos::Center)),
            )
        };
        let (line, text) = mark(1.0, " S = 1".into(), ROOF_COLOUR);
        chart.draw_series(line)?;
        chart.draw_series(std::iter::once(text))?;
        if s_op > 0.0 {
            let colour = if stale { ROOF_COLOUR } else { S_COLOUR };
            let (line, text) = mark(s_op, format!(" S_op {s_op:.3}"), colour);
            chart.draw_series(line)?;
            chart.draw_series(std::iter::once(text))?;
        }
        let style = if stale {
            ROOF_COLOUR.stroke_width(1)
        } else {
            S_COLOUR.filled()
        };
        chart.draw_series(points.iter().map(|&(x, y)| Circle::new((x, y), 3, style)))?;
        Ok(())
    }))
}

/// One measured shape on the roofline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoofPoint {
    /// Index of its operator in `Roofline::ops`.
    pub op: usize,
    pub flops: f64,
    pub bytes: f64,
    pub t_s: f64,
    /// The compute roof of its dtype mix, FLOP/s.
    pub peak_flops: Option<f64>,
}

/// The roofline's points and what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RooflinePoints {
    /// The operators with plotted shapes, in weight order.
    pub ops: Vec<String>,
    pub points: Vec<RoofPoint>,
    /// Shapes of standing records not drawn: failed or not timed.
    pub untimed: usize,
    /// Shapes of standing records the suite gives no work for (not drawn).
    pub no_work: usize,
    /// Operators not drawn because their record is stale.
    pub stale_ops: Vec<String>,
}

/// Every passing, timed shape of every record that stands.
pub fn roofline_points(d: &ReportData) -> RooflinePoints {
    let mut out = RooflinePoints::default();
    for op in &d.operators {
        let Some(r) = &op.record else { continue };
        if !matches!(op.state, State::Measured) {
            out.stale_ops.push(op.name.clone());
            continue;
        }
        let mut any = false;
        for s in &r.shapes {
            let t = s.t_ms.filter(|t| *t > 0.0 && s.passed());
            match (t, s.work) {
                (None, _) => out.untimed += 1,
                (Some(_), None) => out.no_work += 1,
                (Some(t), Some(w)) if w.bytes > 0.0 => {
                    any = true;
                    out.points.push(RoofPoint {
                        op: out.ops.len(),
                        flops: w.flops,
                        bytes: w.bytes,
                        t_s: t * 1e-3,
                        peak_flops: w.peak_flops,
                    });
                }
                (Some(_), Some(_)) => out.no_work += 1,
            }
        }
        if any {
            out.ops.push(op.name.clone());
        }
    }
    out
}

/// The classic roofline of the shapes that compute (W > 0): arithmetic intensity W / Q against
/// achieved FLOP/s W / T, under the memory roof B·I and each compute roof met. None without
/// such a shape.
pub fn roofline_flops(
    pts: &RooflinePoints,
    hbm_bytes_per_s: f64,
) -> Option<Result<String, String>> {
    let compute: Vec<&RoofPoint> = pts.points.iter().filter(|p| p.flops > 0.0).collect();
    if compute.is_empty() {
        return None;
    }
    const T: f64 = 1e12;
    let mut peaks: Vec<f64> = compute.iter().filter_map(|p| p.peak_flops).collect();
    peaks.sort_by(|a, b| a.total_cmp(b));
    peaks.dedup_by(|a, b| (*a / *b - 1.0).abs() < 0.02);
    let ridges = peaks.iter().map(|p| p / hbm_bytes_per_s);
    let (x0, x1) = log_span(compute.iter().map(|p| p.flops / p.bytes).chain(ridges), 3.0)?;
    let (y0, y1) = log_span(
        compute
            .iter()
            .map(|p| p.flops / p.t_s / T)
            .chain(peaks.iter().map(|p| p / T)),
        3.0,
    )?;
    Some(svg((900, 540), |root| {
        let mut chart = loglog(
            root,
            (x0, x1),
            (y0, y1),
            "arithmetic intensity W / Q (FLOP per byte, log)",
            "achieved W / T (TFLOP/s, log)",
        )?;
        let top = peaks.last().copied().unwrap_or(0.0);
        // The memory roof up to the highest ridge, then each compute roof from its ridge.
        chart.draw_series(LineSeries::new(
            [
                (x0, x0 * hbm_bytes_per_s / T),
                (top / hbm_bytes_per_s, top / T),
            ],
            ROOF_COLOUR.stroke_width(2),
        ))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("HBM {:.2} TB/s", hbm_bytes_per_s / T),
            (x0 * 2.0, x0 * 2.0 * hbm_bytes_per_s / T / 1.6),
            label(&ROOF_COLOUR, VPos::Top),
        )))?;
        for p in &peaks {
            let ridge = p / hbm_bytes_per_s;
            chart.draw_series(LineSeries::new(
                [(ridge, p / T), (x1, p / T)],
                ROOF_COLOUR.stroke_width(2),
            ))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("{:.0} TFLOP/s", p / T),
                (ridge * 1.1, p / T * 1.05),
                label(&ROOF_COLOUR, VPos::Bottom),
            )))?;
        }
        chart.draw_series(compute.iter().map(|p| {
            Circle::new(
                (p.flops / p.bytes, p.flops / p.t_s / T),
                3,
                op_colour(p.op).0.filled(),
            )
        }))?;
        Ok(())
    }))
}

/// Every measured shape's memory traffic: bytes moved Q against achieved bandwidth Q / T,
/// under the HBM roof (the shapes that do no arithmetic have their only roof here). None
/// without a point.
pub fn roofline_bytes(
    pts: &RooflinePoints,
    hbm_bytes_per_s: f64,
) -> Option<Result<String, String>> {
    if pts.points.is_empty() {
        return None;
    }
    const G: f64 = 1e9;
    let (x0, x1) = log_span(pts.points.iter().map(|p| p.bytes), 3.0)?;
    let (y0, y1) = log_span(
        pts.points
            .iter()
            .map(|p| p.bytes / p.t_s / G)
            .chain([hbm_bytes_per_s / G]),
        3.0,
    )?;
    Some(svg((900, 480), |root| {
        let mut chart = loglog(
            root,
            (x0, x1),
            (y0, y1),
            "bytes moved Q = Q_read + Q_write (log)",
            "achieved Q / T (GB/s, log)",
        )?;
        let b = hbm_bytes_per_s / G;
        chart.draw_series(LineSeries::new(
            [(x0, b), (x1, b)],
            ROOF_COLOUR.stroke_width(2),
        ))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("HBM {:.0} GB/s", b),
            (x0 * 1.3, b * 1.05),
            label(&ROOF_COLOUR, VPos::Bottom),
        )))?;
        chart.draw_series(pts.points.iter().map(|p| {
            Circle::new(
                (p.bytes, p.bytes / p.t_s / G),
                3,
                op_colour(p.op).0.filled(),
            )
        }))?;
        Ok(())
    }))
}
