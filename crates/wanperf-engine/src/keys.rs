//! Key files: where `keygen` writes and clients look, writing a new pair (the private key
//! mode 0600), and reading keys back — a private key others can read is refused, as ssh does;
//! a bad `--authorized-keys` file stops the server (it never falls back to admitting everyone).

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wanperf_proto::auth::{AuthorizedKeys, PrivateKey};

/// Why a key file could not be made or read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(String);

fn err(what: String, e: impl std::fmt::Display) -> KeyError {
    KeyError(format!("{what}: {e}"))
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

/// The public key's file beside the private key `p` (`p.pub`).
pub fn pub_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

/// Writes a new key pair at `path` (mode 0600) and `path.pub`, replacing them only if `force`;
/// returns the public key's file and its line (for `--authorized-keys`).
pub fn generate(path: &Path, comment: &str, force: bool) -> Result<(PathBuf, String), KeyError> {
    let public = pub_path(path);
    if !force {
        for p in [path, public.as_path()] {
            if p.exists() {
                return Err(KeyError(format!(
                    "{} exists; give --force to replace it (or -o another file)",
                    p.display()
                )));
            }
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| err(format!("cannot create {}", dir.display()), e))?;
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| KeyError(format!("no randomness from the OS: {e}")))?;
    let key = PrivateKey::from_seed(seed, comment);
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| err(format!("cannot create {}", path.display()), e))?;
    std::io::Write::write_all(&mut f, key.to_text().as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| err(format!("cannot write {}", path.display()), e))?;
    let line = key.public().to_line();
    std::fs::write(&public, format!("{line}\n")).map_err(|e| err(format!("cannot write {}", public.display()), e))?;
    Ok((public, line))
}

/// Reads a private key file, refusing one that others can read (as ssh does).
pub fn load_private_key(path: &Path) -> Result<Arc<PrivateKey>, KeyError> {
    let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read the key {}", path.display()), e))?;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(KeyError(format!(
            "the key {} is readable by others (mode {:o}); chmod 600 it",
            path.display(),
            mode & 0o777
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read the key {}", path.display()), e))?;
    let key =
        PrivateKey::parse(&text).map_err(|e| err(format!("{} is not a wanperf private key", path.display()), e))?;
    Ok(Arc::new(key))
}

/// The client's key: `given` (`--key`, `$WANPERF_KEY`), else the default key when it exists.
pub fn client_key(given: Option<&Path>) -> Result<Option<Arc<PrivateKey>>, KeyError> {
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

/// Reads `--authorized-keys`: a missing, unreadable, empty or malformed file is an error.
pub fn load_authorized_keys(path: &Path) -> Result<Arc<AuthorizedKeys>, KeyError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(format!("cannot read --authorized-keys {}", path.display()), e))?;
    let keys = AuthorizedKeys::parse(&text).map_err(|e| err(format!("--authorized-keys {}", path.display()), e))?;
    Ok(Arc::new(keys))
}
