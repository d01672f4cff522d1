//! Studies, pure: a study file (TOML) is parsed and validated into a [`spec::Study`] — where
//! (an emulated path or a real host), what (`tput`, `ping`, `load`, `copy`, `capacity`,
//! `trace` and its options), the sweep axes and how to run them — and planned into its cells,
//! each with the command line that measures it. Every option is checked by the command line's
//! own parsers, which the caller passes in ([`spec::Flags`]), so the file format never drifts
//! from the flags; every error names the line that caused it. No I/O, no clock: the runner
//! (`wanperf study run`) is the shell.

#![forbid(unsafe_code)]

pub mod spec;
