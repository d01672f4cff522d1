//! `wanperf keygen`, and reading key files for `serve --authorized-keys` and clients' `--key`.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use wanperf_engine::keys::{self, default_key_path};

/// `wanperf keygen`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  wanperf keygen                          # ~/.config/wanperf/key and key.pub
  wanperf keygen -o lab.key -C alice@lab  # lab.key and lab.key.pub
  # on the server: one public key per line
  cat key.pub >> ~/.config/wanperf/authorized_keys
  wanperf serve --allow 10.0.0.0/8 --authorized-keys ~/.config/wanperf/authorized_keys
  # on the client (default: $WANPERF_KEY, else ~/.config/wanperf/key when it exists)
  wanperf tput server --key lab.key

The private key is written with mode 0600 and never leaves the client: the server sends a
fresh random challenge on every connection and the client signs it together with the test it
asks for (Ed25519), so a recorded handshake cannot be replayed and a test cannot be altered
in transit. See docs/protocol.md for the threat model.")]
pub struct KeygenArgs {
    /// Private key file to write (its public key goes to FILE.pub).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Comment stored with the key (who or what it is; shown in the server's log).
    #[arg(short = 'C', long, value_name = "TEXT")]
    comment: Option<String>,
    /// Replace existing key files.
    #[arg(long)]
    force: bool,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `wanperf keygen`.
pub fn keygen(a: KeygenArgs) -> Result<ExitCode> {
    let path = a.output.unwrap_or_else(default_key_path);
    let default_comment = || {
        let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{user}@{}", host.trim())
    };
    let (public, line) = keys::generate(&path, &a.comment.unwrap_or_else(default_comment), a.force)?;
    if a.json {
        outln!("{}", serde_json::json!({"private_key": path, "public_key": public, "key": line}));
    } else {
        outln!("private key: {} (mode 0600: keep it secret)", path.display());
        outln!("public key:  {}", public.display());
        outln!("{line}");
        outln!("add that line to the server's --authorized-keys file");
    }
    Ok(ExitCode::SUCCESS)
}
