//! `wanperf keygen`, and reading key files for `serve --authorized-keys` and clients' `--key`.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use wanperf_proto::auth::{AuthorizedKeys, PrivateKey};

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

/// `~/.config/wanperf` (or `$XDG_CONFIG_HOME/wanperf`).
fn config_dir() -> PathBuf {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty()).map(PathBuf::from);
    match var("XDG_CONFIG_HOME").filter(|p| p.is_absolute()) {
        Some(p) => p.join("wanperf"),
        None => var("HOME").unwrap_or_default().join(".config/wanperf"),
    }
}

/// Where `keygen` writes by default and clients look when given no `--key`.
pub fn default_key_path() -> PathBuf {
    config_dir().join("key")
}

fn pub_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

/// `wanperf keygen`.
pub fn keygen(a: KeygenArgs) -> Result<ExitCode> {
    let path = a.output.unwrap_or_else(default_key_path);
    let public = pub_path(&path);
    if !a.force {
        for p in [&path, &public] {
            if p.exists() {
                bail!("{} exists; give --force to replace it (or -o another file)", p.display());
            }
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("no randomness from the OS: {e}"))?;
    let default_comment = || {
        let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{user}@{}", host.trim())
    };
    let key = PrivateKey::from_seed(seed, &a.comment.unwrap_or_else(default_comment));
    let _ = std::fs::remove_file(&path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    std::io::Write::write_all(&mut f, key.to_text().as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    let line = key.public().to_line();
    std::fs::write(&public, format!("{line}\n")).with_context(|| format!("cannot write {}", public.display()))?;
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

/// Reads a private key file, refusing one that others can read (as ssh does).
pub fn load_private_key(path: &Path) -> Result<Arc<PrivateKey>> {
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read the key {}", path.display()))?;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        bail!("the key {} is readable by others (mode {:o}); chmod 600 it", path.display(), mode & 0o777);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the key {}", path.display()))?;
    let key = PrivateKey::parse(&text).with_context(|| format!("{} is not a wanperf private key", path.display()))?;
    Ok(Arc::new(key))
}

/// The client's key: `--key` (or `$WANPERF_KEY`), else the default key when it exists.
pub fn client_key(given: Option<&Path>) -> Result<Option<Arc<PrivateKey>>> {
    match given {
        Some(p) => load_private_key(p).map(Some),
        None => {
            let p = default_key_path();
            if p.exists() {
                load_private_key(&p).map(Some)
            } else {
                Ok(None)
            }
        }
    }
}

/// Reads `--authorized-keys`: a missing, unreadable, empty or malformed file stops the
/// server from starting (it never falls back to admitting everyone).
pub fn load_authorized_keys(path: &Path) -> Result<Arc<AuthorizedKeys>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read --authorized-keys {}", path.display()))?;
    let keys = AuthorizedKeys::parse(&text).with_context(|| format!("--authorized-keys {}", path.display()))?;
    Ok(Arc::new(keys))
}
