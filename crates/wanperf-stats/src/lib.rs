//! Pure statistics for wanperf: sample summaries and percentiles ([`summary`]), delay
//! variation (RFC 3393 IPDV, RFC 3550 jitter), least-squares fits with R² ([`fit`]), the
//! IEPM-BW plateau event detector ([`events`]), path arithmetic ([`calc`]) and the findings a
//! report states ([`analysis`]). Plot code only draws what these compute.
//!
//! ```
//! let s = wanperf_stats::summary::Summary::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
//! assert_eq!(s.median, 2.5);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod analysis;
pub mod calc;
pub mod events;
pub mod fit;
pub mod summary;
