//! IF-MIB (RFC 2863) over SNMP, without the SNMP: which objects to ask a device for, and the
//! answers (object identifier and value pairs) turned into [`IfCounters`] per interface.
//!
//! The 64-bit `ifHCInOctets`/`ifHCOutOctets` of `ifXTable` are used where the device has them;
//! a device that answers only `ifTable`'s 32-bit `ifInOctets`/`ifOutOctets` gives 32-bit
//! readings (and [`crate::util::UtilSeries`] then takes their wraps). Speed is `ifHighSpeed` (Mbit/s)
//! when it is not zero, else `ifSpeed` (bit/s, which saturates at 4.29 Gbit/s).

use crate::record::IfCounters;
use std::collections::BTreeMap;

/// `ifTable.ifEntry` (1.3.6.1.2.1.2.2.1).
pub const IF_ENTRY: [u32; 9] = [1, 3, 6, 1, 2, 1, 2, 2, 1];
/// `ifXTable.ifXEntry` (1.3.6.1.2.1.31.1.1.1).
pub const IFX_ENTRY: [u32; 10] = [1, 3, 6, 1, 2, 1, 31, 1, 1, 1];

/// A column of `ifTable` or `ifXTable` that a reading needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Column {
    /// ifDescr (ifTable 2).
    Descr,
    /// ifSpeed, bit/s (ifTable 5).
    Speed,
    /// ifInOctets, 32 bits (ifTable 10).
    InOctets,
    /// ifInDiscards (ifTable 13).
    InDiscards,
    /// ifInErrors (ifTable 14).
    InErrors,
    /// ifOutOctets, 32 bits (ifTable 16).
    OutOctets,
    /// ifOutDiscards (ifTable 19).
    OutDiscards,
    /// ifOutErrors (ifTable 20).
    OutErrors,
    /// ifName (ifXTable 1).
    Name,
    /// ifHCInOctets, 64 bits (ifXTable 6).
    HcInOctets,
    /// ifHCOutOctets, 64 bits (ifXTable 10).
    HcOutOctets,
    /// ifHighSpeed, Mbit/s (ifXTable 15).
    HighSpeed,
}

/// Every column with its table and sub-identifier.
pub const COLUMNS: [(Column, bool, u32); 12] = [
    (Column::Descr, false, 2),
    (Column::Speed, false, 5),
    (Column::InOctets, false, 10),
    (Column::InDiscards, false, 13),
    (Column::InErrors, false, 14),
    (Column::OutOctets, false, 16),
    (Column::OutDiscards, false, 19),
    (Column::OutErrors, false, 20),
    (Column::Name, true, 1),
    (Column::HcInOctets, true, 6),
    (Column::HcOutOctets, true, 10),
    (Column::HighSpeed, true, 15),
];

/// The object identifier of `column` for interface `if_index`.
pub fn oid(column: Column, if_index: u32) -> Vec<u32> {
    let (_, x, sub) = COLUMNS.iter().find(|c| c.0 == column).copied().expect("every column is listed");
    let mut o = if x { IFX_ENTRY.to_vec() } else { IF_ENTRY.to_vec() };
    o.push(sub);
    o.push(if_index);
    o
}

/// The column prefix (without an index) to walk, e.g. to list interfaces by name.
pub fn column_oid(column: Column) -> Vec<u32> {
    let mut o = oid(column, 0);
    o.pop();
    o
}

/// Which column and interface an object identifier names, if it is one of ours.
pub fn parse_oid(o: &[u32]) -> Option<(Column, u32)> {
    let (x, rest) =
        if let Some(r) = o.strip_prefix(&IFX_ENTRY[..]) { (true, r) } else { (false, o.strip_prefix(&IF_ENTRY[..])?) };
    let [sub, index] = rest else { return None };
    COLUMNS.iter().find(|c| c.1 == x && c.2 == *sub).map(|c| (c.0, *index))
}

/// An SNMP value, as far as IF-MIB needs one.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Counter32, Gauge32, Integer, TimeTicks.
    Number(u64),
    /// Counter64.
    Counter64(u64),
    /// OCTET STRING (names).
    Text(String),
    /// noSuchObject, noSuchInstance, endOfMibView, or a type IF-MIB never uses here.
    Missing,
}

/// The objects to GET for one reading of the interfaces `if_indexes`: per interface both the
/// 64-bit and the 32-bit octet counters (the device answers the ones it has), errors, discards
/// and speeds.
pub fn reading_oids(if_indexes: &[u32]) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    for &i in if_indexes {
        for c in [
            Column::HcInOctets,
            Column::HcOutOctets,
            Column::InOctets,
            Column::OutOctets,
            Column::InErrors,
            Column::OutErrors,
            Column::InDiscards,
            Column::OutDiscards,
            Column::HighSpeed,
            Column::Speed,
        ] {
            out.push(oid(c, i));
        }
    }
    out
}

/// Interfaces by index from a walk of ifName (or ifDescr) answers: index → name.
pub fn names(answers: &[(Vec<u32>, Value)]) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for (o, v) in answers {
        if let (Some((Column::Name | Column::Descr, i)), Value::Text(t)) = (parse_oid(o), v) {
            // ifName wins over ifDescr when a device gives both.
            if parse_oid(o).map(|p| p.0) == Some(Column::Name) || !out.contains_key(&i) {
                out.insert(i, t.clone());
            }
        }
    }
    out
}

/// One reading per interface from the answers to [`reading_oids`], taken at `at_ms` from
/// `device`; `names` labels the interfaces (else the index is the label). An interface without
/// any octet counter in the answers gives no reading.
pub fn readings(
    device: &str,
    at_ms: u64,
    answers: &[(Vec<u32>, Value)],
    names: &BTreeMap<u32, String>,
) -> Vec<IfCounters> {
    let mut cols: BTreeMap<u32, BTreeMap<Column, &Value>> = BTreeMap::new();
    for (o, v) in answers {
        if let Some((c, i)) = parse_oid(o) {
            if *v != Value::Missing {
                cols.entry(i).or_default().insert(c, v);
            }
        }
    }
    let num = |m: &BTreeMap<Column, &Value>, c: Column| match m.get(&c) {
        Some(Value::Number(n) | Value::Counter64(n)) => Some(*n),
        _ => None,
    };
    let mut out = Vec::new();
    for (i, m) in &cols {
        let hc = (num(m, Column::HcInOctets), num(m, Column::HcOutOctets));
        let lc = (num(m, Column::InOctets), num(m, Column::OutOctets));
        let (in_octets, out_octets, width) = match (hc, lc) {
            ((Some(a), Some(b)), _) => (a, b, 64),
            (_, (Some(a), Some(b))) => (a, b, 32),
            _ => continue,
        };
        let speed = match num(m, Column::HighSpeed) {
            Some(mbit) if mbit > 0 => Some(mbit * 1_000_000),
            _ => num(m, Column::Speed).filter(|&s| s > 0),
        };
        out.push(IfCounters {
            device: device.to_string(),
            interface: names.get(i).cloned().unwrap_or_else(|| i.to_string()),
            at_ms,
            speed_bps: speed,
            in_octets,
            out_octets,
            in_errors: num(m, Column::InErrors).unwrap_or(0),
            out_errors: num(m, Column::OutErrors).unwrap_or(0),
            in_drops: num(m, Column::InDiscards).unwrap_or(0),
            out_drops: num(m, Column::OutDiscards).unwrap_or(0),
            width,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_identifiers_round_trip() {
        assert_eq!(oid(Column::HcInOctets, 3), vec![1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 3]);
        assert_eq!(oid(Column::InOctets, 3), vec![1, 3, 6, 1, 2, 1, 2, 2, 1, 10, 3]);
        for (c, _, _) in COLUMNS {
            assert_eq!(parse_oid(&oid(c, 42)), Some((c, 42)));
        }
        assert_eq!(parse_oid(&[1, 3, 6, 1, 2, 1, 1, 1, 0]), None);
        assert_eq!(parse_oid(&[1, 3, 6, 1, 2, 1, 2, 2, 1, 99, 1]), None);
        assert_eq!(parse_oid(&[1, 3, 6, 1, 2, 1, 2, 2, 1, 10]), None);
        assert_eq!(column_oid(Column::Name), vec![1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1]);
    }

    #[test]
    fn hc_counters_win_and_32_bit_devices_still_read() {
        let mut names = BTreeMap::new();
        names.insert(2, "eth0".to_string());
        let a = vec![
            (oid(Column::HcInOctets, 2), Value::Counter64(5_000_000_000)),
            (oid(Column::HcOutOctets, 2), Value::Counter64(7)),
            (oid(Column::InOctets, 2), Value::Number(705_032_704)),
            (oid(Column::OutOctets, 2), Value::Number(7)),
            (oid(Column::InErrors, 2), Value::Number(3)),
            (oid(Column::OutDiscards, 2), Value::Number(4)),
            (oid(Column::HighSpeed, 2), Value::Number(10_000)),
            (oid(Column::Speed, 2), Value::Number(4_294_967_295)),
            // An old device: no ifXTable, and noSuchInstance for it.
            (oid(Column::HcInOctets, 5), Value::Missing),
            (oid(Column::InOctets, 5), Value::Number(10)),
            (oid(Column::OutOctets, 5), Value::Number(20)),
            (oid(Column::HighSpeed, 5), Value::Number(0)),
            (oid(Column::Speed, 5), Value::Number(100_000_000)),
            // No octets at all: no reading.
            (oid(Column::InErrors, 9), Value::Number(1)),
        ];
        let r = readings("sw1", 1000, &a, &names);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].interface.as_str(), r[0].in_octets, r[0].width), ("eth0", 5_000_000_000, 64));
        assert_eq!(r[0].speed_bps, Some(10_000_000_000));
        assert_eq!((r[0].in_errors, r[0].out_drops), (3, 4));
        assert_eq!((r[1].interface.as_str(), r[1].in_octets, r[1].out_octets, r[1].width), ("5", 10, 20, 32));
        assert_eq!(r[1].speed_bps, Some(100_000_000));
    }

    #[test]
    fn names_prefer_if_name_over_descr() {
        let a = vec![
            (oid(Column::Descr, 1), Value::Text("Intel Corporation 82599".into())),
            (oid(Column::Name, 1), Value::Text("eth0".into())),
            (oid(Column::Descr, 2), Value::Text("lo".into())),
            (oid(Column::Descr, 3), Value::Number(1)),
        ];
        let n = names(&a);
        assert_eq!(n.get(&1).map(String::as_str), Some("eth0"));
        assert_eq!(n.get(&2).map(String::as_str), Some("lo"));
        assert_eq!(n.len(), 2);
    }
}
