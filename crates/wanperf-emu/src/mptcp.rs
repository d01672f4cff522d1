//! The kernel's MPTCP path manager (generic netlink family `mptcp_pm`), as `ip mptcp` sets
//! it: the limits and the endpoints of the calling thread's network namespace. An emulated
//! host with several interfaces gets each further address as a `subflow` endpoint, so that an
//! MPTCP connection from it (`tput --mptcp`) opens a subflow on every interface.

use crate::netns::EnvError;
use netlink_packet_core::{DecodeError, Emitable, NetlinkMessage, NetlinkPayload, ParseableParametrized, NLM_F_ACK};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::protocols::NETLINK_GENERIC;
use std::io;
use std::net::IpAddr;

// linux/mptcp_pm.h
const CMD_ADD_ADDR: u8 = 1;
const CMD_SET_LIMITS: u8 = 5;
const ATTR_ADDR: u16 = 1;
const ATTR_RCV_ADD_ADDRS: u16 = 2;
const ATTR_SUBFLOWS: u16 = 3;
const ADDR_ATTR_FAMILY: u16 = 1;
const ADDR_ATTR_ID: u16 = 2;
const ADDR_ATTR_ADDR4: u16 = 3;
const ADDR_ATTR_ADDR6: u16 = 4;
const ADDR_ATTR_FLAGS: u16 = 6;
const ADDR_ATTR_IF_IDX: u16 = 7;
const FLAG_SUBFLOW: u32 = 1 << 1;
const NLA_F_NESTED: u16 = 1 << 15;

/// One request of the `mptcp_pm` family: a command and its attributes, already encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PmRequest {
    cmd: u8,
    attrs: Vec<u8>,
}

impl GenlFamily for PmRequest {
    fn family_name() -> &'static str {
        "mptcp_pm"
    }

    fn command(&self) -> u8 {
        self.cmd
    }

    fn version(&self) -> u8 {
        1
    }
}

impl Emitable for PmRequest {
    fn buffer_len(&self) -> usize {
        self.attrs.len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        buffer[..self.attrs.len()].copy_from_slice(&self.attrs);
    }
}

impl ParseableParametrized<[u8], GenlHeader> for PmRequest {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        Ok(PmRequest { cmd: header.cmd, attrs: buf.to_vec() })
    }
}

/// Appends one netlink attribute (type, value, padding to 4 bytes).
fn nla(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
}

/// The attributes of `ip mptcp endpoint add ADDR id ID dev IFINDEX subflow`.
fn endpoint_attrs(addr: IpAddr, id: u8, ifindex: u32) -> Vec<u8> {
    let mut inner = Vec::new();
    let family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 } as u16;
    nla(&mut inner, ADDR_ATTR_FAMILY, &family.to_ne_bytes());
    nla(&mut inner, ADDR_ATTR_ID, &[id]);
    match addr {
        IpAddr::V4(a) => nla(&mut inner, ADDR_ATTR_ADDR4, &a.octets()),
        IpAddr::V6(a) => nla(&mut inner, ADDR_ATTR_ADDR6, &a.octets()),
    }
    nla(&mut inner, ADDR_ATTR_FLAGS, &FLAG_SUBFLOW.to_ne_bytes());
    nla(&mut inner, ADDR_ATTR_IF_IDX, &(ifindex as i32).to_ne_bytes());
    let mut out = Vec::new();
    nla(&mut out, ATTR_ADDR | NLA_F_NESTED, &inner);
    out
}

/// Sends one generic netlink message and reads the kernel's answer: the first reply
/// message, or the error it acknowledged with.
fn request<F>(what: &'static str, mut msg: GenlMessage<F>, family: u16) -> Result<Option<GenlMessage<F>>, EnvError>
where
    F: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + std::fmt::Debug,
{
    let nl = |err: io::Error| EnvError::Netlink { what, err };
    msg.set_resolved_family_id(family);
    let sock = crate::netns::send_on(NETLINK_GENERIC, what, NetlinkPayload::from(msg), NLM_F_ACK)?;
    let mut rx = vec![0u8; 8192];
    let n = sock.recv(&mut &mut rx[..], 0).map_err(nl)?;
    let reply =
        NetlinkMessage::<GenlMessage<F>>::deserialize(&rx[..n]).map_err(|e| nl(io::Error::other(e.to_string())))?;
    match reply.payload {
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(None),
            Some(code) => Err(nl(io::Error::from_raw_os_error(-code.get()))),
        },
        NetlinkPayload::InnerMessage(m) => Ok(Some(m)),
        _ => Ok(None),
    }
}

/// The `mptcp_pm` family's id in this namespace; `None` where the kernel has no MPTCP.
fn family() -> Result<Option<u16>, EnvError> {
    let get = GenlMessage::from_payload(GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName(PmRequest::family_name().to_string())],
    });
    match request("resolving the mptcp_pm netlink family", get, libc::GENL_ID_CTRL as u16) {
        Ok(Some(m)) => Ok(m.payload.nlas.iter().find_map(|a| match a {
            GenlCtrlAttrs::FamilyId(id) => Some(*id),
            _ => None,
        })),
        Ok(None) => Ok(None),
        Err(EnvError::Netlink { err, .. }) if err.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Makes each of `endpoints` (address, interface index) a `subflow` endpoint of this
/// thread's namespace and lets a connection have a subflow on each (`ip mptcp limits set
/// subflows N add_addr_accepted N`). Returns false, doing nothing, where the kernel has no
/// MPTCP.
pub fn subflow_endpoints(endpoints: &[(IpAddr, u32)]) -> Result<bool, EnvError> {
    let Some(id) = family()? else { return Ok(false) };
    let n = (endpoints.len() as u32 + 1).min(8);
    let mut limits = Vec::new();
    nla(&mut limits, ATTR_SUBFLOWS, &n.to_ne_bytes());
    nla(&mut limits, ATTR_RCV_ADD_ADDRS, &n.to_ne_bytes());
    let set = GenlMessage::from_payload(PmRequest { cmd: CMD_SET_LIMITS, attrs: limits });
    request("setting the MPTCP limits", set, id)?;
    for (i, &(addr, ifindex)) in endpoints.iter().enumerate() {
        let add = PmRequest { cmd: CMD_ADD_ADDR, attrs: endpoint_attrs(addr, i as u8 + 1, ifindex) };
        request("adding an MPTCP endpoint", GenlMessage::from_payload(add), id)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_the_nested_address_ip_mptcp_sends() {
        let a = endpoint_attrs("198.18.1.1".parse().unwrap(), 1, 3);
        // The nested ADDR attribute: its length and type (with NLA_F_NESTED), then family,
        // id, address, flags and interface, each padded to 4 bytes.
        assert_eq!(u16::from_ne_bytes([a[0], a[1]]) as usize, a.len());
        assert_eq!(u16::from_ne_bytes([a[2], a[3]]), ATTR_ADDR | NLA_F_NESTED);
        let inner = &a[4..];
        assert_eq!(&inner[..8], &[6, 0, 1, 0, libc::AF_INET as u8, 0, 0, 0][..]);
        assert_eq!(&inner[8..16], &[5, 0, 2, 0, 1, 0, 0, 0][..], "id 1, padded");
        assert_eq!(&inner[16..24], &[8, 0, 3, 0, 198, 18, 1, 1][..]);
        assert_eq!(&inner[24..32], &[8, 0, 6, 0, 2, 0, 0, 0][..], "the subflow flag");
        assert_eq!(&inner[32..40], &[8, 0, 7, 0, 3, 0, 0, 0][..], "interface 3");
        assert_eq!(a.len(), 44);
    }
}
