//! The figures, drawn with plotters' SVG backend into strings. Plotters escapes the text it
//! writes and needs no font files for SVG (text size is estimated, the browser draws it).
//! Callers bin and thin their data first: no chart here draws more points than it is given.

use crate::fmt::tick;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// What a failed drawing says.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Width and height of a figure, px (the page scales it down to fit).
pub const SIZE: (u32, u32) = (760, 420);

const FONT: &str = "sans-serif";

/// Distinct colours for series, in order.
pub fn color(i: usize) -> RGBColor {
    const P: [RGBColor; 8] = [
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0xe3, 0x77, 0xc2),
        RGBColor(0x7f, 0x7f, 0x7f),
    ];
    P[i % P.len()]
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A line.
    Line,
    /// A dashed line (fits, references).
    Dashed,
    /// Dots.
    Points,
    /// A line with dots.
    LinePoints,
}

/// One series of an x–y chart, in data units.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
    /// How to draw them.
    pub mark: Mark,
    /// Colour.
    pub color: RGBColor,
}

impl Series {
    /// A series of colour number `i`.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>, mark: Mark, i: usize) -> Series {
        Series { label: label.into(), points, mark, color: color(i) }
    }
}

/// The frame of an x–y chart.
#[derive(Debug, Clone)]
pub struct Axes {
    /// Title above the plot.
    pub title: String,
    /// x axis label, with unit.
    pub x_desc: String,
    /// y axis label, with unit.
    pub y_desc: String,
    /// Logarithmic x.
    pub x_log: bool,
    /// Ticks on x (data units); nice numbers when none.
    pub x_ticks: Option<Vec<f64>>,
    /// Start y at zero.
    pub y_zero: bool,
}

impl Axes {
    /// A linear frame.
    pub fn new(title: impl Into<String>, x_desc: impl Into<String>, y_desc: impl Into<String>) -> Axes {
        Axes {
            title: title.into(),
            x_desc: x_desc.into(),
            y_desc: y_desc.into(),
            x_log: false,
            x_ticks: None,
            y_zero: false,
        }
    }
}

/// About `n` round ticks (1, 2, 5 × 10^k steps) over `[lo, hi]`.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = hi - lo;
    if !span.is_finite() || span <= 0.0 {
        return vec![lo];
    }
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let step = mag
        * if norm < 1.5 {
            1.0
        } else if norm < 3.0 {
            2.0
        } else if norm < 7.0 {
            5.0
        } else {
            10.0
        };
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() < 100 {
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    out
}

/// 1, 2, 5 × 10^k within `[lo, hi]` (positive), for logarithmic axes.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    if lo <= 0.0 || hi < lo || !hi.is_finite() {
        return out;
    }
    let mut mag = 10f64.powf(lo.log10().floor());
    while mag <= hi && out.len() < 60 {
        for m in [1.0, 2.0, 5.0] {
            let v = m * mag;
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                out.push(v);
            }
        }
        mag *= 10.0;
    }
    out
}

fn range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |r, v| Some(r.map_or((v, v), |(a, b): (f64, f64)| (a.min(v), b.max(v)))))
}

fn padded(lo: f64, hi: f64, frac: f64) -> (f64, f64) {
    if hi > lo {
        let p = (hi - lo) * frac;
        (lo - p, hi + p)
    } else {
        let p = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        (lo - p, hi + p)
    }
}

/// An x–y chart as an SVG document.
pub fn xy(axes: &Axes, series: &[Series]) -> Res<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        draw_xy(&root, axes, series, 22)?;
        root.present()?;
    }
    Ok(svg)
}

/// Two x–y charts one above the other under one title (throughput over RTT).
pub fn two_panel(title: &str, top: (&Axes, &[Series]), bottom: (&Axes, &[Series])) -> Res<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, 640)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, (FONT, 22))?;
        let (a, b) = root.split_vertically(305);
        draw_xy(&a, top.0, top.1, 17)?;
        draw_xy(&b, bottom.0, bottom.1, 17)?;
        root.present()?;
    }
    Ok(svg)
}

fn draw_xy(area: &DrawingArea<SVGBackend<'_>, Shift>, axes: &Axes, series: &[Series], title_size: u32) -> Res<()> {
    let tx = |x: f64| if axes.x_log { x.log10() } else { x };
    let (x0, x1) = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(|x| !axes.x_log || *x > 0.0))
        .ok_or("no data to draw")?;
    let (y0, y1) = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1))).ok_or("no data to draw")?;
    let ticks =
        axes.x_ticks.clone().unwrap_or_else(|| if axes.x_log { log_ticks(x0, x1) } else { nice_ticks(x0, x1, 8) });
    let (lx0, lx1) = padded(tx(x0), tx(x1), 0.04);
    let (ly0, ly1) =
        if axes.y_zero && y0 >= 0.0 { (0.0, if y1 > 0.0 { y1 * 1.08 } else { 1.0 }) } else { padded(y0, y1, 0.06) };
    let entries = series.iter().filter(|s| !s.label.is_empty() && !s.points.is_empty()).count();
    let ly1 = legend_room(ly0, ly1, entries, area.dim_in_pixel().1);
    // Ticks closer than 5 % of the axis to the previous one are left unlabelled (50, 55, 60,
    // 64 KiB on a log axis).
    let mut x_keys: Vec<f64> = Vec::new();
    for t in ticks.iter().map(|t| tx(*t)).filter(|t| *t >= lx0 && *t <= lx1) {
        match x_keys.last() {
            Some(l) if t - l < 0.05 * (lx1 - lx0) => {}
            _ => x_keys.push(t),
        }
    }
    let mut chart = ChartBuilder::on(area)
        .caption(&axes.title, (FONT, title_size))
        .margin(12)
        .x_label_area_size(56)
        .y_label_area_size(84)
        .build_cartesian_2d(Ticked { lo: lx0, hi: lx1, ticks: x_keys }, lx_y(ly0, ly1))?;
    let log = axes.x_log;
    let x_fmt = move |v: &f64| tick(if log { 10f64.powf(*v) } else { *v });
    let y_fmt = |v: &f64| tick(*v);
    chart
        .configure_mesh()
        .x_desc(axes.x_desc.as_str())
        .y_desc(axes.y_desc.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .y_labels(8)
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 17))
        .light_line_style(RGBAColor(0, 0, 0, 0.04))
        .bold_line_style(RGBAColor(0, 0, 0, 0.12))
        .draw()?;
    let mut labelled = false;
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite() && (!log || p.0 > 0.0))
            .map(|p| (tx(p.0), p.1))
            .collect();
        let c = s.color;
        let line = c.stroke_width(2);
        let ann = match s.mark {
            Mark::Line | Mark::LinePoints => {
                if s.mark == Mark::LinePoints {
                    chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))?;
                }
                chart.draw_series(LineSeries::new(pts.iter().copied(), line))?
            }
            Mark::Dashed => chart.draw_series(DashedLineSeries::new(pts.iter().copied(), 6, 4, line))?,
            Mark::Points => chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))?,
        };
        if !s.label.is_empty() {
            labelled = true;
            let ann = ann.label(s.label.as_str());
            if s.mark == Mark::Points {
                ann.legend(move |(x, y)| Circle::new((x + 9, y), 3, c.filled()));
            } else {
                ann.legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], line));
            }
        }
    }
    if labelled {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    Ok(())
}

/// Raises the top of the y range so that a legend of `entries` lines in the upper corner sits
/// above the data of a plot `height_px` tall.
fn legend_room(lo: f64, hi: f64, entries: usize, height_px: u32) -> f64 {
    if entries == 0 {
        return hi;
    }
    let plot = f64::from(height_px).max(200.0) - 110.0;
    let frac = ((entries as f64 * 19.0 + 14.0) / plot).min(0.6);
    lo + (hi - lo) / (1.0 - frac)
}

/// A linear f64 axis with ticks exactly where asked (the swept windows, or round numbers).
struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = if self.hi > self.lo { self.hi - self.lo } else { 1.0 };
        let f = (v - self.lo) / span;
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        self.ticks.iter().copied().filter(|t| *t >= self.lo && *t <= self.hi).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

fn lx_y(lo: f64, hi: f64) -> RangedCoordf64 {
    (lo..hi).into()
}

/// Histograms of several samples over the same bins: `(label, percent of the sample per bin)`.
pub fn histogram(axes: &Axes, lo: f64, hi: f64, samples: &[(String, Vec<f64>)]) -> Res<String> {
    let bins = samples.iter().map(|s| s.1.len()).max().filter(|n| *n > 0).ok_or("no data to draw")?;
    let ymax = samples.iter().flat_map(|s| s.1.iter().copied()).fold(0.0, f64::max).max(1e-9) * 1.08;
    let ymax = legend_room(0.0, ymax, samples.len(), SIZE.1);
    let width = (hi - lo) / bins as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let (lx0, lx1) = padded(lo, hi, 0.02);
        let mut chart = ChartBuilder::on(&root)
            .caption(&axes.title, (FONT, 22))
            .margin(12)
            .x_label_area_size(56)
            .y_label_area_size(84)
            .build_cartesian_2d(Ticked { lo: lx0, hi: lx1, ticks: nice_ticks(lo, hi, 8) }, 0.0..ymax)?;
        let fmt = |v: &f64| tick(*v);
        chart
            .configure_mesh()
            .x_desc(axes.x_desc.as_str())
            .y_desc(axes.y_desc.as_str())
            .x_label_formatter(&fmt)
            .y_label_formatter(&fmt)
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 17))
            .light_line_style(RGBAColor(0, 0, 0, 0.04))
            .bold_line_style(RGBAColor(0, 0, 0, 0.12))
            .draw()?;
        for (i, (label, pcts)) in samples.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(pcts.iter().enumerate().filter(|(_, p)| **p > 0.0).map(|(b, p)| {
                    let x = lo + b as f64 * width;
                    Rectangle::new([(x, 0.0), (x + width, *p)], c.mix(0.45).filled())
                }))?
                .label(label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.mix(0.45).filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// A grid of cells coloured by value (light to dark blue), each with its value written in it.
/// `values[row][col]`: rows are the y labels from the bottom, columns the x labels.
pub fn heatmap(
    axes: &Axes,
    x_labels: &[String],
    y_labels: &[String],
    values: &[Vec<Option<f64>>],
    cell_text: &dyn Fn(f64) -> String,
) -> Res<String> {
    let (nx, ny) = (x_labels.len() as i32, y_labels.len() as i32);
    let (vmin, vmax) = range(values.iter().flatten().flatten().copied()).ok_or("no data to draw")?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&axes.title, (FONT, 22))
            .margin(12)
            .x_label_area_size(56)
            .y_label_area_size(84)
            .build_cartesian_2d((0..nx - 1).into_segmented(), (0..ny - 1).into_segmented())?;
        let label = |labels: &[String], v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        let xf = |v: &SegmentValue<i32>| label(x_labels, v);
        let yf = |v: &SegmentValue<i32>| label(y_labels, v);
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(axes.x_desc.as_str())
            .y_desc(axes.y_desc.as_str())
            .x_labels(x_labels.len() + 1)
            .y_labels(y_labels.len() + 1)
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 17))
            .draw()?;
        let mut cells = Vec::new();
        let mut texts = Vec::new();
        for (j, row) in values.iter().enumerate() {
            for (i, v) in row.iter().enumerate() {
                let (i, j) = (i as i32, j as i32);
                let corners = [
                    (SegmentValue::Exact(i), SegmentValue::Exact(j)),
                    (SegmentValue::Exact(i + 1), SegmentValue::Exact(j + 1)),
                ];
                let Some(v) = v else {
                    cells.push(Rectangle::new(corners, RGBColor(0xee, 0xee, 0xee).filled()));
                    continue;
                };
                let t = if vmax > vmin { (v - vmin) / (vmax - vmin) } else { 1.0 };
                let fill = RGBColor(lerp(0xe8, 0x08, t), lerp(0xf1, 0x30, t), lerp(0xfa, 0x6b, t));
                cells.push(Rectangle::new(corners, fill.filled()));
                let ink: &RGBColor = if t > 0.5 { &WHITE } else { &BLACK };
                let style =
                    TextStyle::from((FONT, 18).into_font()).color(ink).pos(Pos::new(HPos::Center, VPos::Center));
                texts.push(Text::new(cell_text(*v), (SegmentValue::CenterOf(i), SegmentValue::CenterOf(j)), style));
            }
        }
        chart.draw_series(cells)?;
        chart.draw_series(texts)?;
        root.present()?;
    }
    Ok(svg)
}

fn lerp(a: u8, b: u8, t: f64) -> u8 {
    (f64::from(a) + (f64::from(b) - f64::from(a)) * t.clamp(0.0, 1.0)).round() as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks() {
        assert_eq!(nice_ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(163.0, 171.0, 4), vec![164.0, 166.0, 168.0, 170.0]);
        assert_eq!(log_ticks(8.0, 500.0), vec![10.0, 20.0, 50.0, 100.0, 200.0, 500.0]);
        assert_eq!(nice_ticks(3.0, 3.0, 5), vec![3.0]);
    }

    #[test]
    fn draws_labelled_svg() {
        let mut a = Axes::new("t <x>", "window (KiB)", "RTT (ms)");
        a.x_log = true;
        let s = [Series::new("median", vec![(8.0, 170.0), (64.0, 230.0), (500.0, 260.0)], Mark::LinePoints, 0)];
        let svg = xy(&a, &s).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("window (KiB)") && svg.contains("RTT (ms)"));
        assert!(svg.contains("t &lt;x&gt;") && !svg.contains("<x>"));
        assert!(xy(&a, &[]).is_err());
    }
}
