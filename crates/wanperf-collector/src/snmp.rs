//! A remote device's interface counters over SNMP (IF-MIB), v2c or v3.
//!
//! Opening walks `ifName` (or `ifDescr` on devices without `ifXTable`) to learn the
//! interfaces; each reading is one GET (split by the library when the answer would be too big)
//! of [`wanperf_flows::ifmib::reading_oids`]. SNMP is synchronous here: a small current-thread
//! Tokio runtime drives `async-snmp` for each request.

use crate::{now_ms, select, PollError};
use async_snmp::{Auth, AuthProtocol, Client, Oid, PrivProtocol, Retry, UdpHandle, UsmConfig, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use wanperf_flows::ifmib::{self, Column};
use wanperf_flows::IfCounters;

/// How to authenticate.
#[derive(Debug, Clone, PartialEq)]
pub enum Credentials {
    /// SNMP v2c with a community.
    V2c(String),
    /// SNMP v3 with a user; authentication (protocol, passphrase) and privacy the same way.
    V3 {
        /// USM user name.
        user: String,
        /// `md5`, `sha`, `sha224`, `sha256`, `sha384`, `sha512` and the passphrase.
        auth: Option<(String, String)>,
        /// `des`, `aes` (AES-128), `aes192`, `aes256` and the passphrase.
        privacy: Option<(String, String)>,
    },
}

impl Credentials {
    /// The credentials `util poll`'s flags give: v2c with `community` when there is no `user`,
    /// else v3 with `auth` and `privacy` as PROTO:PASSPHRASE (`--auth`, `--priv`).
    pub fn from_flags(
        community: &str,
        user: Option<&str>,
        auth: Option<&str>,
        privacy: Option<&str>,
    ) -> Result<Credentials, PollError> {
        Ok(match user {
            None => Credentials::V2c(community.to_string()),
            Some(u) => Credentials::V3 {
                user: u.to_string(),
                auth: split_pass("auth", auth)?,
                privacy: split_pass("priv", privacy)?,
            },
        })
    }
}

/// The protocol and passphrase of flag `--what`, PROTO:PASSPHRASE; the passphrase at least 8
/// characters (RFC 3414).
fn split_pass(what: &str, v: Option<&str>) -> Result<Option<(String, String)>, PollError> {
    match v {
        None => Ok(None),
        Some(s) => match s.split_once(':') {
            Some((p, pass)) if !p.is_empty() && pass.len() >= 8 => Ok(Some((p.to_string(), pass.to_string()))),
            Some((p, _)) if !p.is_empty() => {
                Err(PollError::Option(format!("--{what}: the passphrase must be at least 8 characters (RFC 3414)")))
            }
            _ => Err(PollError::Option(format!("--{what} {s:?}: expected PROTO:PASSPHRASE, e.g. sha:secret123"))),
        },
    }
}

/// Reads one agent's interfaces.
pub struct SnmpReader {
    rt: tokio::runtime::Runtime,
    client: Client<UdpHandle>,
    agent: String,
    names: BTreeMap<u32, String>,
    indexes: Vec<u32>,
}

fn auth(c: &Credentials) -> Result<Auth, PollError> {
    Ok(match c {
        Credentials::V2c(community) => Auth::v2c(community.as_str()),
        Credentials::V3 { user, auth, privacy } => {
            let bad = |what: &str, v: &str| PollError::Option(format!("unknown SNMP {what} protocol {v:?}"));
            let cfg = UsmConfig::new(user.clone().into_bytes());
            let cfg = match (auth, privacy) {
                (None, None) => cfg,
                (Some((ap, apass)), None) => {
                    let ap: AuthProtocol = ap.parse().map_err(|_| bad("authentication", ap))?;
                    cfg.auth(ap, apass).map_err(|e| PollError::Option(format!("SNMP v3 authentication: {e}")))?
                }
                (Some((ap, apass)), Some((pp, ppass))) => {
                    let ap: AuthProtocol = ap.parse().map_err(|_| bad("authentication", ap))?;
                    let pp: PrivProtocol = pp.parse().map_err(|_| bad("privacy", pp))?;
                    cfg.auth_priv(ap, apass, pp, ppass)
                        .map_err(|e| PollError::Option(format!("SNMP v3 privacy: {e}")))?
                }
                (None, Some(_)) => return Err(PollError::Option("SNMP v3 privacy needs authentication too".into())),
            };
            cfg.into()
        }
    })
}

fn value(v: &Value) -> ifmib::Value {
    match v {
        Value::Counter64(n) => ifmib::Value::Counter64(*n),
        Value::Counter32(n) | Value::Gauge32(n) | Value::UInteger32(n) | Value::TimeTicks(n) => {
            ifmib::Value::Number(u64::from(*n))
        }
        Value::Integer(n) if *n >= 0 => ifmib::Value::Number(*n as u64),
        Value::OctetString(b) => ifmib::Value::Text(String::from_utf8_lossy(b).into_owned()),
        _ => ifmib::Value::Missing,
    }
}

impl SnmpReader {
    /// Connects to `agent` (`host:port`, port 161 when left out), learns its interfaces and
    /// keeps those named in `interfaces` (all when empty). `timeout` is per request, with
    /// two retries.
    pub fn open(
        agent: &str,
        creds: &Credentials,
        interfaces: &[String],
        timeout: Duration,
    ) -> Result<SnmpReader, PollError> {
        let err = |e: &dyn std::fmt::Display| PollError::Snmp { agent: agent.to_string(), msg: e.to_string() };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| err(&e))?;
        let a = auth(creds)?;
        let client = rt
            .block_on(
                Client::builder(agent, a)
                    .request_timeout(timeout)
                    .retry(Retry::fixed(2, Duration::ZERO).map_err(|e| err(&e))?)
                    .connect(),
            )
            .map_err(|e| err(&e))?;
        let mut reader = SnmpReader { rt, client, agent: agent.to_string(), names: BTreeMap::new(), indexes: vec![] };
        let mut answers = reader.walk(ifmib::column_oid(Column::Name))?;
        if answers.is_empty() {
            answers = reader.walk(ifmib::column_oid(Column::Descr))?;
        }
        reader.names = ifmib::names(&answers);
        if reader.names.is_empty() {
            return Err(err(&"the agent lists no interfaces (ifName and ifDescr are empty)"));
        }
        let all: Vec<String> = reader.names.values().cloned().collect();
        let chosen = select(agent, &all, interfaces)?;
        reader.indexes = reader.names.iter().filter(|(_, n)| chosen.contains(n)).map(|(i, _)| *i).collect();
        Ok(reader)
    }

    fn walk(&self, column: Vec<u32>) -> Result<Vec<(Vec<u32>, ifmib::Value)>, PollError> {
        let err = |e: &dyn std::fmt::Display| PollError::Snmp { agent: self.agent.clone(), msg: e.to_string() };
        let stream = self.client.walk(Oid::from(column)).map_err(|e| err(&e))?;
        let vbs = self.rt.block_on(stream.collect()).map_err(|e| err(&e))?;
        Ok(vbs.iter().map(|vb| (vb.oid.arcs().to_vec(), value(&vb.value))).collect())
    }

    /// The chosen interfaces' counters now.
    pub fn read(&mut self) -> Result<Vec<IfCounters>, PollError> {
        let err = |e: &dyn std::fmt::Display| PollError::Snmp { agent: self.agent.clone(), msg: e.to_string() };
        let mut answers = Vec::new();
        // Four interfaces (40 objects) per request keeps answers well inside one datagram.
        for chunk in self.indexes.chunks(4) {
            let oids: Vec<Oid> = ifmib::reading_oids(chunk).into_iter().map(Oid::from).collect();
            let r = self.rt.block_on(self.client.get_many(&oids)).map_err(|e| err(&e))?;
            answers.extend(r.varbinds.iter().map(|vb| (vb.oid.arcs().to_vec(), value(&vb.value))));
        }
        Ok(ifmib::readings(&self.agent, now_ms(), &answers, &self.names))
    }

    /// The interfaces this reader reads, by name.
    pub fn interfaces(&self) -> Vec<String> {
        self.indexes.iter().filter_map(|i| self.names.get(i).cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_checked_before_any_packet() {
        let v3 = |a: Option<(&str, &str)>, p: Option<(&str, &str)>| Credentials::V3 {
            user: "u".into(),
            auth: a.map(|(x, y)| (x.into(), y.into())),
            privacy: p.map(|(x, y)| (x.into(), y.into())),
        };
        assert!(auth(&Credentials::V2c("public".into())).is_ok());
        assert!(auth(&v3(Some(("sha", "authpass1")), Some(("aes", "privpass1")))).is_ok());
        let e = auth(&v3(Some(("sha9", "authpass1")), None)).err().unwrap().to_string();
        assert_eq!(e, "unknown SNMP authentication protocol \"sha9\"");
        let e = auth(&v3(None, Some(("aes", "privpass1")))).err().unwrap().to_string();
        assert_eq!(e, "SNMP v3 privacy needs authentication too");
    }

    #[test]
    fn flags_give_credentials() {
        assert_eq!(
            Credentials::from_flags("public", None, Some("sha:x"), None).unwrap(),
            Credentials::V2c("public".into())
        );
        let c = Credentials::from_flags("public", Some("mrtg"), Some("sha:SECRET12"), Some("aes:SECRET34")).unwrap();
        let pair = |p: &str, s: &str| Some((p.to_string(), s.to_string()));
        assert_eq!(
            c,
            Credentials::V3 { user: "mrtg".into(), auth: pair("sha", "SECRET12"), privacy: pair("aes", "SECRET34") }
        );
        let e = Credentials::from_flags("public", Some("u"), Some("sha:short"), None).unwrap_err().to_string();
        assert_eq!(e, "--auth: the passphrase must be at least 8 characters (RFC 3414)");
        let e = Credentials::from_flags("public", Some("u"), None, Some("secret123")).unwrap_err().to_string();
        assert_eq!(e, "--priv \"secret123\": expected PROTO:PASSPHRASE, e.g. sha:secret123");
    }

    #[test]
    fn values_map_to_if_mib_values() {
        assert_eq!(value(&Value::Counter64(1 << 40)), ifmib::Value::Counter64(1 << 40));
        assert_eq!(value(&Value::Counter32(7)), ifmib::Value::Number(7));
        assert_eq!(value(&Value::Integer(-1)), ifmib::Value::Missing);
        assert_eq!(value(&Value::NoSuchInstance), ifmib::Value::Missing);
    }
}
