//! When a session's packets are sent (RFC 4656 §3.5 and §5).
//!
//! The schedule is a list of slots used round-robin: each gives the gap before the next
//! packet, fixed or drawn from an exponential distribution of the slot's mean. Both ends must
//! compute the same times (a receiver checks each packet's send time against its scheduled
//! one), so the exponential draws are RFC 4656's: Knuth's algorithm S (TAOCP vol. 2, 3.4.1)
//! in 32.32 fixed point, its uniform bits from AES-128 in counter mode keyed with the session
//! identifier. Packet `i` leaves at the start time plus the gaps 0..=i.

use crate::control::Slot;
use crate::num64_mul;
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes128;

/// Q[k] = Σ_{i=1..k} (ln 2)^i / i!, times 2^32 and rounded (Q[1] = ln 2); the last entries
/// reach 1 in 32 bits.
const Q: [u64; 12] = [
    0,
    0xB172_17F8,
    0xEEF1_93F7,
    0xFD27_1862,
    0xFF9D_6DD0,
    0xFFF4_CFD0,
    0xFFFE_E819,
    0xFFFF_E7FF,
    0xFFFF_FE2B,
    0xFFFF_FFE0,
    0xFFFF_FFFE,
    0xFFFF_FFFF,
];
const LN2: u64 = Q[1];

/// RFC 4656's exponential deviates of mean 1 (32.32), from the session identifier.
pub struct ExpGen {
    cipher: Aes128,
    counter: [u8; 16],
    out: [u8; 16],
}

impl ExpGen {
    /// The generator of session `sid` (AES key), its counter at zero.
    pub fn new(sid: &[u8; 16]) -> ExpGen {
        let cipher = Aes128::new_from_slice(sid).expect("a 16-octet key");
        ExpGen { cipher, counter: [0; 16], out: [0; 16] }
    }

    /// 32 uniform bits as a binary fraction (32.32): the counter's quarter of its encrypted
    /// block (a new block every fourth draw), then the counter steps as one 128-bit number.
    fn uniform(&mut self) -> u64 {
        let quarter = usize::from(self.counter[15] & 3);
        if quarter == 0 {
            let mut block = aes::Block::from(self.counter);
            self.cipher.encrypt_block(&mut block);
            self.out.copy_from_slice(&block);
        }
        for j in (0..16).rev() {
            self.counter[j] = self.counter[j].wrapping_add(1);
            if self.counter[j] != 0 {
                break;
            }
        }
        let o = &self.out[4 * quarter..4 * quarter + 4];
        u64::from(u32::from_be_bytes([o[0], o[1], o[2], o[3]]))
    }

    /// The next deviate (mean 1 s, 32.32).
    pub fn draw(&mut self) -> u64 {
        // S1: skip the leading ones and the first zero.
        let mut u = self.uniform();
        let mut j = 0u64;
        while u & 0x8000_0000 != 0 && j < 32 {
            u <<= 1;
            j += 1;
        }
        u = (u << 1) & 0xffff_ffff;
        // S2: immediate acceptance.
        if u < LN2 {
            return num64_mul(j << 32, LN2) + u;
        }
        // S3: the least k ≥ 2 with u < Q[k]; the least of k more draws.
        let k = (2..Q.len()).find(|&k| u < Q[k]).unwrap_or(Q.len());
        let mut v = self.uniform();
        for _ in 2..=k {
            v = v.min(self.uniform());
        }
        // S4.
        num64_mul((j << 32) + v, LN2)
    }
}

/// A session's send times, one after another.
pub struct Schedule {
    slots: Vec<Slot>,
    gen: ExpGen,
    next: usize,
    /// The last packet's offset from the start (32.32).
    at: u64,
}

impl Schedule {
    /// The schedule of a session with these slots and identifier.
    pub fn new(slots: &[Slot], sid: &[u8; 16]) -> Schedule {
        Schedule { slots: slots.to_vec(), gen: ExpGen::new(sid), next: 0, at: 0 }
    }

    /// The next packet's offset from the session's start (32.32 seconds).
    pub fn next_offset(&mut self) -> u64 {
        let s = self.slots[self.next % self.slots.len().max(1)];
        self.next += 1;
        let gap = if s.exponential { num64_mul(self.gen.draw(), s.param) } else { s.param };
        self.at = self.at.wrapping_add(gap);
        self.at
    }

    /// The first `n` packets' send times from `start` (NTP timestamps: 32.32 too).
    pub fn times(slots: &[Slot], sid: &[u8; 16], start: u64, n: u32) -> Vec<u64> {
        let mut s = Schedule::new(slots, sid);
        (0..n).map(|_| start.wrapping_add(s.next_offset())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{num64_to_secs, secs_to_num64};

    #[test]
    fn aes_is_fips_197s() {
        // FIPS-197 appendix C.1.
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let c = Aes128::new_from_slice(&key).unwrap();
        let mut b = aes::Block::from([
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
        ]);
        c.encrypt_block(&mut b);
        assert_eq!(
            b.as_slice(),
            &[0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a]
        );
    }

    #[test]
    fn the_q_table_is_the_series_of_ln2() {
        let ln2 = std::f64::consts::LN_2;
        let (mut term, mut sum) = (1.0, 0.0);
        for (k, q) in Q.iter().enumerate().skip(1) {
            term *= ln2 / k as f64;
            sum += term;
            let want = (sum * 4_294_967_296.0).round().min(4_294_967_295.0) as u64;
            assert!(want.abs_diff(*q) <= 1, "Q[{k}] = {q:#x}, the series gives {want:#x}");
        }
    }

    #[test]
    fn deviates_are_exponential_of_mean_one() {
        let mut g = ExpGen::new(&[7; 16]);
        let n = 200_000;
        let v: Vec<f64> = (0..n).map(|_| num64_to_secs(g.draw())).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        // Mean 1 and the tail of an exponential: P(X > 2) = e^-2.
        assert!((mean - 1.0).abs() < 0.01, "mean {mean}");
        let tail = v.iter().filter(|&&x| x > 2.0).count() as f64 / n as f64;
        assert!((tail - (-2f64).exp()).abs() < 0.005, "P(X > 2) = {tail}");
        // The same identifier gives the same draws; another, others.
        let a: Vec<u64> = (0..10).map(|_| ExpGen::new(&[1; 16]).draw()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(ExpGen::new(&[1; 16]).draw(), ExpGen::new(&[2; 16]).draw());
    }

    #[test]
    fn fixed_slots_and_round_robin() {
        let slots = [
            Slot { exponential: false, param: secs_to_num64(0.1) },
            Slot { exponential: false, param: secs_to_num64(0.3) },
        ];
        let t = Schedule::times(&slots, &[0; 16], 1000 << 32, 4);
        let secs: Vec<f64> = t.iter().map(|&x| num64_to_secs(x) - 1000.0).collect();
        for (got, want) in secs.iter().zip([0.1, 0.4, 0.5, 0.8]) {
            assert!((got - want).abs() < 1e-9, "{secs:?}");
        }
        // An exponential slot's gaps average its mean.
        let exp = [Slot { exponential: true, param: secs_to_num64(0.1) }];
        let t = Schedule::times(&exp, &[3; 16], 0, 10_000);
        let mean = num64_to_secs(*t.last().unwrap()) / 10_000.0;
        assert!((mean - 0.1).abs() < 0.003, "mean gap {mean}");
    }
}
