//! RFC 8972's TLVs: after the base packet, each is Flags (8 bits: U, M, I), Type (8),
//! Length (16, of the value) and the value. The ones that matter for delay are read and
//! written; any other is kept as it came (a reflector echoes it with U set, §4).

use serde::{Deserialize, Serialize};

/// Flag U: the reflector did not recognise the type.
pub const FLAG_U: u8 = 0x80;
/// Flag M: the TLV is malformed.
pub const FLAG_M: u8 = 0x40;
/// Flag I: the HMAC TLV's integrity check failed.
pub const FLAG_I: u8 = 0x20;

/// Type numbers (IANA's "STAMP TLV Types").
pub mod kind {
    /// Extra Padding.
    pub const EXTRA_PADDING: u8 = 1;
    /// Location.
    pub const LOCATION: u8 = 2;
    /// Timestamp Information.
    pub const TIMESTAMP_INFO: u8 = 3;
    /// Class of Service.
    pub const CLASS_OF_SERVICE: u8 = 4;
    /// Direct Measurement.
    pub const DIRECT_MEASUREMENT: u8 = 5;
    /// Access Report.
    pub const ACCESS_REPORT: u8 = 6;
    /// Follow-Up Telemetry.
    pub const FOLLOW_UP: u8 = 7;
    /// HMAC.
    pub const HMAC: u8 = 8;
}

/// Where a timestamp's clock is synchronized from (Timestamp Information, RFC 8972 §4.3).
pub mod sync {
    /// NTP.
    pub const NTP: u8 = 1;
    /// PTP.
    pub const PTP: u8 = 2;
    /// Free-running local clock.
    pub const LOCAL: u8 = 5;
}

/// How a timestamp was taken (Timestamp Information).
pub mod method {
    /// Hardware-assisted.
    pub const HARDWARE: u8 = 1;
    /// The local system's software (the kernel's socket timestamps).
    pub const SOFTWARE: u8 = 2;
    /// Control plane.
    pub const CONTROL_PLANE: u8 = 3;
}

/// A TLV's value, as far as it is understood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    /// Octets of padding (their content is not read).
    ExtraPadding(u16),
    /// How the reflector's clocks are synchronized and its stamps taken, on the way in and
    /// out.
    TimestampInfo {
        /// Sync source of the receive timestamp.
        sync_in: u8,
        /// Method of the receive timestamp.
        method_in: u8,
        /// Sync source of the transmit timestamp.
        sync_out: u8,
        /// Method of the transmit timestamp.
        method_out: u8,
    },
    /// DSCP and ECN asked for and seen.
    ClassOfService {
        /// DSCP the sender wants on the reflected packet.
        dscp1: u8,
        /// ECN the sender wants on the reflected packet.
        ecn1: u8,
        /// DSCP the reflector received.
        dscp2: u8,
        /// ECN the reflector received.
        ecn2: u8,
        /// Reverse path: 0 the reflector used DSCP1, else it did not.
        rp: u8,
    },
    /// Counters: what the sender sent, the reflector received and the reflector sent, in
    /// the session.
    DirectMeasurement {
        /// Session-Sender transmit counter.
        s_tx: u32,
        /// Session-Reflector receive counter.
        r_rx: u32,
        /// Session-Reflector transmit counter.
        r_tx: u32,
    },
    /// HMAC-SHA-256 truncated to 16 octets.
    Hmac([u8; 16]),
    /// Any other type, or a known one of the wrong length: its octets.
    Other(Vec<u8>),
}

/// One TLV.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tlv {
    /// Flags (U, M, I).
    pub flags: u8,
    /// Type.
    pub kind: u8,
    /// Value.
    pub value: Value,
}

impl Tlv {
    /// A TLV of a known kind with no flags.
    pub fn new(value: Value) -> Tlv {
        let kind = match &value {
            Value::ExtraPadding(_) => kind::EXTRA_PADDING,
            Value::TimestampInfo { .. } => kind::TIMESTAMP_INFO,
            Value::ClassOfService { .. } => kind::CLASS_OF_SERVICE,
            Value::DirectMeasurement { .. } => kind::DIRECT_MEASUREMENT,
            Value::Hmac(_) => kind::HMAC,
            Value::Other(_) => 0,
        };
        Tlv { flags: 0, kind, value }
    }

    /// The value's length on the wire.
    pub fn value_len(&self) -> usize {
        match &self.value {
            Value::ExtraPadding(n) => usize::from(*n),
            Value::TimestampInfo { .. } | Value::ClassOfService { .. } => 4,
            Value::DirectMeasurement { .. } => 12,
            Value::Hmac(_) => 16,
            Value::Other(v) => v.len(),
        }
    }

    /// Appends the TLV.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.flags);
        out.push(self.kind);
        out.extend_from_slice(&(self.value_len().min(0xffff) as u16).to_be_bytes());
        match &self.value {
            Value::ExtraPadding(n) => out.resize(out.len() + usize::from(*n), 0),
            Value::TimestampInfo { sync_in, method_in, sync_out, method_out } => {
                out.extend_from_slice(&[*sync_in, *method_in, *sync_out, *method_out]);
            }
            Value::ClassOfService { dscp1, ecn1, dscp2, ecn2, rp } => {
                out.push(((dscp1 & 0x3f) << 2) | (ecn1 & 3));
                out.push(((dscp2 & 0x3f) << 2) | (ecn2 & 3));
                out.push((rp & 3) << 6);
                out.push(0);
            }
            Value::DirectMeasurement { s_tx, r_rx, r_tx } => {
                for c in [s_tx, r_rx, r_tx] {
                    out.extend_from_slice(&c.to_be_bytes());
                }
            }
            Value::Hmac(h) => out.extend_from_slice(h),
            Value::Other(v) => out.extend_from_slice(&v[..v.len().min(0xffff)]),
        }
    }

    /// The value of a TLV of `kind` from its octets (a known kind of the wrong length is kept
    /// as octets, and [`read_all`] marks it malformed).
    fn value_of(kind: u8, v: &[u8]) -> Value {
        match (kind, v.len()) {
            (kind::EXTRA_PADDING, n) => Value::ExtraPadding(n as u16),
            (kind::TIMESTAMP_INFO, 4) => {
                Value::TimestampInfo { sync_in: v[0], method_in: v[1], sync_out: v[2], method_out: v[3] }
            }
            (kind::CLASS_OF_SERVICE, 4) => Value::ClassOfService {
                dscp1: v[0] >> 2,
                ecn1: v[0] & 3,
                dscp2: v[1] >> 2,
                ecn2: v[1] & 3,
                rp: v[2] >> 6,
            },
            (kind::DIRECT_MEASUREMENT, 12) => Value::DirectMeasurement {
                s_tx: u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                r_rx: u32::from_be_bytes([v[4], v[5], v[6], v[7]]),
                r_tx: u32::from_be_bytes([v[8], v[9], v[10], v[11]]),
            },
            (kind::HMAC, 16) => {
                let mut h = [0u8; 16];
                h.copy_from_slice(v);
                Value::Hmac(h)
            }
            _ => Value::Other(v.to_vec()),
        }
    }

    /// Whether this is a kind this crate reads.
    pub fn known(kind: u8) -> bool {
        matches!(
            kind,
            kind::EXTRA_PADDING | kind::TIMESTAMP_INFO | kind::CLASS_OF_SERVICE | kind::DIRECT_MEASUREMENT | kind::HMAC
        )
    }
}

/// What the octets after a base packet hold: the TLVs read, and whether the last one ran past
/// the end (the remaining octets are then not TLVs: RFC 8972 §4 says a reflector sets M on
/// such a one; a sender that pads with zeros sends none, which reads as no TLVs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// The TLVs, in order.
    pub tlvs: Vec<Tlv>,
    /// Octets at the end that do not form a whole TLV.
    pub trailing: usize,
}

/// Most TLVs read from one packet (a 64 KiB datagram could otherwise hold 16 383 empty ones).
pub const MAX_TLVS: usize = 64;

/// Reads the TLVs in `b`. All-zero octets are padding (TWAMP-Light senders pad with zeros;
/// type 0 is reserved), not TLVs.
pub fn read_all(b: &[u8]) -> Parsed {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < b.len() {
        if b[i..].iter().all(|&x| x == 0) {
            break;
        }
        if b.len() - i < 4 || out.tlvs.len() >= MAX_TLVS {
            out.trailing = b.len() - i;
            break;
        }
        let flags = b[i];
        let k = b[i + 1];
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        let Some(v) = b.get(i + 4..i + 4 + len) else {
            out.trailing = b.len() - i;
            break;
        };
        let value = Tlv::value_of(k, v);
        let malformed = Tlv::known(k) && matches!(value, Value::Other(_));
        out.tlvs.push(Tlv { flags: if malformed { flags | FLAG_M } else { flags }, kind: k, value });
        i += 4 + len;
    }
    out
}

/// The octets of `tlvs` on the wire.
pub fn wire_len(tlvs: &[Tlv]) -> usize {
    tlvs.iter().map(|t| 4 + t.value_len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_tlv_round_trips() {
        let tlvs = vec![
            Tlv::new(Value::ExtraPadding(20)),
            Tlv::new(Value::TimestampInfo {
                sync_in: sync::NTP,
                method_in: method::SOFTWARE,
                sync_out: sync::NTP,
                method_out: method::SOFTWARE,
            }),
            Tlv::new(Value::ClassOfService { dscp1: 46, ecn1: 1, dscp2: 10, ecn2: 2, rp: 1 }),
            Tlv::new(Value::DirectMeasurement { s_tx: 1, r_rx: 2, r_tx: 0xffff_fffe }),
            Tlv { flags: FLAG_U, kind: 200, value: Value::Other(vec![1, 2, 3]) },
            Tlv::new(Value::Hmac([7; 16])),
        ];
        let mut b = Vec::new();
        for t in &tlvs {
            t.write(&mut b);
        }
        assert_eq!(b.len(), wire_len(&tlvs));
        let p = read_all(&b);
        assert_eq!(p.tlvs, tlvs);
        assert_eq!(p.trailing, 0);
    }

    #[test]
    fn class_of_service_bits_are_where_the_rfc_puts_them() {
        let mut b = Vec::new();
        Tlv::new(Value::ClassOfService { dscp1: 46, ecn1: 0, dscp2: 0, ecn2: 0, rp: 0 }).write(&mut b);
        // Flags 0, type 4, length 4, then DSCP1 = 46 in the top six bits of the first octet.
        assert_eq!(b, [0, 4, 0, 4, 46 << 2, 0, 0, 0]);
    }

    #[test]
    fn zero_padding_is_not_a_tlv_and_a_cut_tlv_is_trailing() {
        assert_eq!(read_all(&[0; 30]), Parsed::default());
        let mut b = Vec::new();
        Tlv::new(Value::DirectMeasurement { s_tx: 1, r_rx: 1, r_tx: 1 }).write(&mut b);
        b.truncate(10);
        let p = read_all(&b);
        assert!(p.tlvs.is_empty());
        assert_eq!(p.trailing, 10);
        // A known type of the wrong length is kept, marked malformed.
        let p = read_all(&[0, kind::CLASS_OF_SERVICE, 0, 2, 1, 2]);
        assert_eq!(p.tlvs[0].flags, FLAG_M);
        assert_eq!(p.tlvs[0].value, Value::Other(vec![1, 2]));
    }

    #[test]
    fn a_flood_of_empty_tlvs_is_bounded() {
        let b: Vec<u8> = std::iter::repeat_n([0u8, 200, 0, 0], 1000).flatten().collect();
        let p = read_all(&b);
        assert_eq!(p.tlvs.len(), MAX_TLVS);
        assert_eq!(p.trailing, b.len() - 4 * MAX_TLVS);
    }
}
