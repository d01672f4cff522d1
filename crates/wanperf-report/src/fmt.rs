//! Text: HTML escaping and numbers with their units. Sizes of queues and BDPs are in kB
//! (1000 bytes), windows in KiB (1024 bytes, as `-w 64k` means), rates in Mbit/s.

use serde_json::Value;

/// Escapes text for HTML element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A number with three significant digits (fewer decimals as it grows), no exponent.
pub fn sig(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let a = x.abs();
    if a < 0.0005 {
        "0".into()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// An axis tick: round numbers with no more decimals than they need ("16", "165.5").
pub fn tick(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    // The fewest decimals (up to 4) that still say the value: ticks are round numbers.
    for d in 0..4 {
        let t = format!("{x:.d$}");
        if (t.parse::<f64>().unwrap_or(f64::NAN) - x).abs() <= 1e-9 * x.abs().max(1.0) {
            return if t.starts_with('-') && t[1..].chars().all(|c| c == '0' || c == '.') { t[1..].into() } else { t };
        }
    }
    format!("{x:.4}")
}

/// Milliseconds: "93 ms".
pub fn ms(x: f64) -> String {
    format!("{} ms", sig(x))
}

/// A signed difference in milliseconds: "+93 ms".
pub fn dms(x: f64) -> String {
    format!("{}{} ms", if x > 0.0 { "+" } else { "" }, sig(x))
}

/// Bit/s as Mbit/s: "23.4 Mbit/s".
pub fn mbps(bps: f64) -> String {
    format!("{} Mbit/s", sig(bps / 1e6))
}

/// Bytes as kB or MB (powers of 1000): "291 kB".
pub fn bytes(b: f64) -> String {
    if b.abs() >= 1e6 {
        format!("{} MB", sig(b / 1e6))
    } else {
        format!("{} kB", sig(b / 1e3))
    }
}

/// A window per stream: "64 KiB", "1.5 MiB", or "auto" when not set.
pub fn window(w: Option<u64>) -> String {
    match w {
        None => "auto".into(),
        Some(w) if w >= 1 << 20 && w % (1 << 20) == 0 => format!("{} MiB", w >> 20),
        Some(w) if w >= 1 << 20 => format!("{} MiB", sig(w as f64 / 1048576.0)),
        Some(w) if w % 1024 == 0 => format!("{} KiB", w >> 10),
        Some(w) => format!("{} KiB", sig(w as f64 / 1024.0)),
    }
}

/// A percentage: "12.5 %".
pub fn pct(x: f64) -> String {
    format!("{} %", sig(x))
}

/// One swept value with its unit, as params store them (bytes, bit/s, seconds).
pub fn param(key: &str, v: &Value) -> String {
    let n = v.as_f64();
    // A network's setting (`link.slac-esnet.rate_ab`) has its option's unit.
    let unit =
        key.rsplit_once('.').map_or(key, |(_, o)| o.strip_suffix("_ab").or_else(|| o.strip_suffix("_ba")).unwrap_or(o));
    match (unit, n) {
        ("window" | "bytes" | "queue" | "queue_up" | "queue_down", Some(n)) => {
            format!("{key} {}", window(Some(n as u64)))
        }
        ("window", None) => "window auto".into(),
        ("rate" | "rate_bps", Some(n)) => format!("{key} {}", mbps(n)),
        ("rtt" | "delay" | "duration" | "jitter", Some(n)) => format!("{key} {}", ms(n * 1000.0)),
        ("loss", Some(n)) => format!("loss {}", pct(n * 100.0)),
        (_, Some(_)) if v.is_i64() || v.is_u64() => format!("{key} {v}"),
        (_, Some(n)) => format!("{key} {}", sig(n)),
        (_, None) => match v {
            Value::String(s) => format!("{key} {s}"),
            v => format!("{key} {v}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_units() {
        assert_eq!(esc("<script>a&'\"</script>"), "&lt;script&gt;a&amp;&#39;&quot;&lt;/script&gt;");
        assert_eq!(sig(93.04), "93.0");
        assert_eq!(sig(258.7), "259");
        assert_eq!(sig(0.9), "0.900");
        assert_eq!(sig(-1e-14), "0");
        assert_eq!(
            (tick(16.0), tick(50.0), tick(2.5), tick(0.0)),
            ("16".into(), "50".into(), "2.5".into(), "0".into())
        );
        assert_eq!((tick(165.5), tick(0.25), tick(-0.0)), ("165.5".into(), "0.25".into(), "0".into()));
        assert_eq!(mbps(23_456_000.0), "23.5 Mbit/s");
        assert_eq!(bytes(290_625.0), "291 kB");
        assert_eq!(window(Some(65536)), "64 KiB");
        assert_eq!(window(Some(56_320)), "55 KiB");
        assert_eq!(window(Some(50_000)), "48.8 KiB");
        assert_eq!(window(None), "auto");
        assert_eq!(dms(93.0), "+93.0 ms");
        assert_eq!(param("rate", &Value::from(25_000_000)), "rate 25.0 Mbit/s");
        assert_eq!(param("rtt", &Value::from(0.166)), "rtt 166 ms");
        assert_eq!(param("link.a-b.rate_ab", &Value::from(25_000_000)), "link.a-b.rate_ab 25.0 Mbit/s");
        assert_eq!(param("streams", &Value::from(10)), "streams 10");
    }
}
