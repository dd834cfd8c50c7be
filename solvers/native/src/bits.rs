//! GPU sets as fixed arrays of machine words: `W` words hold 64·W GPUs, so no pool size is
//! special and every operation is a handful of word operations without allocation.

use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, Not};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Bits<const W: usize>(pub [u64; W]);

impl<const W: usize> Bits<W> {
    pub const ZERO: Self = Bits([0; W]);

    /// Bits [lo, hi) set (empty when hi <= lo).
    pub fn range(lo: usize, hi: usize) -> Self {
        let mut out = Self::ZERO;
        let hi = hi.min(64 * W);
        let mut g = lo;
        while g < hi {
            let word = g / 64;
            let from = g % 64;
            let to = (hi - word * 64).min(64);
            let span = to - from;
            out.0[word] |= if span == 64 { u64::MAX } else { ((1u64 << span) - 1) << from };
            g = word * 64 + to;
        }
        out
    }

    pub fn bit(g: usize) -> Self {
        let mut out = Self::ZERO;
        out.0[g / 64] = 1u64 << (g % 64);
        out
    }

    pub fn from_le_bytes(bytes: &[u8]) -> Self {
        let mut out = Self::ZERO;
        for (i, b) in bytes.iter().enumerate() {
            if *b != 0 {
                out.0[i / 8] |= (*b as u64) << (8 * (i % 8));
            }
        }
        out
    }

    pub fn to_le_bytes(self) -> Vec<u8> {
        self.0.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    pub fn any(&self) -> bool {
        !self.is_zero()
    }

    pub fn count(&self) -> i64 {
        self.0.iter().map(|w| w.count_ones() as i64).sum()
    }

    pub fn test(&self, g: usize) -> bool {
        g < 64 * W && (self.0[g / 64] >> (g % 64)) & 1 == 1
    }

    /// Index of the lowest set bit (None when empty).
    pub fn lowest(&self) -> Option<usize> {
        self.0.iter().position(|w| *w != 0).map(|i| 64 * i + self.0[i].trailing_zeros() as usize)
    }

    /// Python's `int.bit_length()`: one past the highest set bit, 0 when empty.
    pub fn bit_length(&self) -> usize {
        for i in (0..W).rev() {
            if self.0[i] != 0 {
                return 64 * i + 64 - self.0[i].leading_zeros() as usize;
            }
        }
        0
    }

    /// Consecutive set bits from bit p upward.
    pub fn ones_from(&self, p: usize) -> usize {
        let mut run = 0;
        let mut g = p;
        while g < 64 * W {
            let w = self.0[g / 64] >> (g % 64);
            let ones = (!w).trailing_zeros() as usize;
            let avail = 64 - g % 64;
            if ones < avail {
                return run + ones;
            }
            run += avail;
            g += avail;
        }
        run
    }

    pub fn shl(&self, k: usize) -> Self {
        let mut out = Self::ZERO;
        let (words, bits) = (k / 64, k % 64);
        for i in (words..W).rev() {
            let src = i - words;
            let mut v = self.0[src] << bits;
            if bits > 0 && src > 0 {
                v |= self.0[src - 1] >> (64 - bits);
            }
            out.0[i] = v;
        }
        out
    }

    pub fn shr(&self, k: usize) -> Self {
        let mut out = Self::ZERO;
        let (words, bits) = (k / 64, k % 64);
        for i in 0..W.saturating_sub(words) {
            let src = i + words;
            let mut v = self.0[src] >> bits;
            if bits > 0 && src + 1 < W {
                v |= self.0[src + 1] << (64 - bits);
            }
            out.0[i] = v;
        }
        out
    }

    /// The set bits, lowest first, without allocating.
    pub fn ones(self) -> Ones<W> {
        Ones { mask: self, word: 0 }
    }

    pub fn andnot(&self, other: &Self) -> Self {
        let mut out = *self;
        for i in 0..W {
            out.0[i] &= !other.0[i];
        }
        out
    }
}

/// Iterator over a `Bits`' set bits, lowest first (`Bits::ones`).
pub struct Ones<const W: usize> {
    mask: Bits<W>,
    word: usize,
}

impl<const W: usize> Iterator for Ones<W> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        while self.word < W {
            let w = self.mask.0[self.word];
            if w != 0 {
                self.mask.0[self.word] = w & (w - 1);
                return Some(64 * self.word + w.trailing_zeros() as usize);
            }
            self.word += 1;
        }
        None
    }
}

impl<const W: usize> BitAnd for Bits<W> {
    type Output = Self;
    fn bitand(mut self, o: Self) -> Self {
        for i in 0..W {
            self.0[i] &= o.0[i];
        }
        self
    }
}

impl<const W: usize> BitOr for Bits<W> {
    type Output = Self;
    fn bitor(mut self, o: Self) -> Self {
        for i in 0..W {
            self.0[i] |= o.0[i];
        }
        self
    }
}

impl<const W: usize> BitXor for Bits<W> {
    type Output = Self;
    fn bitxor(mut self, o: Self) -> Self {
        for i in 0..W {
            self.0[i] ^= o.0[i];
        }
        self
    }
}

impl<const W: usize> BitAndAssign for Bits<W> {
    fn bitand_assign(&mut self, o: Self) {
        for i in 0..W {
            self.0[i] &= o.0[i];
        }
    }
}

impl<const W: usize> BitOrAssign for Bits<W> {
    fn bitor_assign(&mut self, o: Self) {
        for i in 0..W {
            self.0[i] |= o.0[i];
        }
    }
}

/// The complement within all W words (callers mask it to the pool where that matters).
impl<const W: usize> Not for Bits<W> {
    type Output = Self;
    fn not(mut self) -> Self {
        for i in 0..W {
            self.0[i] = !self.0[i];
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_cross_words() {
        let b = Bits::<2>::bit(63);
        assert_eq!(b.shl(1), Bits::<2>::bit(64));
        assert_eq!(Bits::<2>::bit(64).shr(1), b);
        assert_eq!(Bits::<2>::bit(127).shr(127), Bits::<2>::bit(0));
        assert_eq!(b.shl(64), Bits::<2>::bit(127));
        assert!(b.shl(65).is_zero());
    }

    #[test]
    fn ranges_runs_and_lengths() {
        let r = Bits::<2>::range(60, 70);
        assert_eq!(r.count(), 10);
        assert_eq!(r.lowest(), Some(60));
        assert_eq!(r.bit_length(), 70);
        assert_eq!(r.ones_from(62), 8);
        assert_eq!(Bits::<1>::range(0, 64).ones_from(0), 64);
        assert_eq!(Bits::<2>::from_le_bytes(&r.to_le_bytes()), r);
        let set = Bits::<2>::bit(3) | Bits::<2>::bit(64) | Bits::<2>::bit(127);
        assert_eq!(set.ones().collect::<Vec<_>>(), vec![3, 64, 127]);
        assert_eq!(Bits::<2>::ZERO.ones().next(), None);
    }
}
