//! Studies, pure: a study file (TOML) is parsed and validated into a [`spec::Study`] — where
//! (an emulated path or a real host), what (`tput`, `ping`, `load`, `copy`, `capacity`,
//! `trace` and its options), the sweep axes and how to run them — and planned into its cells,
//! each with the command line that measures it. Every option is checked by the command line's
//! own parsers, which the caller passes in ([`spec::Flags`]), so the file format never drifts
//! from the flags; every error names the line that caused it; [`quick`] merges a file's reduced
//! grid over it. [`headline`] turns a run's
//! archived cells into the table printed at its end. Those two are pure: no I/O, no clock.
//!
//! The shell: [`run`] runs the cells (each on a fresh emulated path, or against a real host)
//! into the archive, resumably; [`data`] makes the files a copy study copies.

#![forbid(unsafe_code)]

pub mod axis;
pub mod data;
pub mod expect;
pub mod headline;
pub mod net;
pub mod quick;
pub mod run;
pub mod spec;
