//! CPython's `random.Random(n)` for the calls the search makes: MT19937 seeded by
//! `init_by_array` with the seed's 32-bit words, and `randrange` by rejection on
//! `getrandbits`, so kicks are drawn exactly as the Python reference draws them.

const N: usize = 624;
const M: usize = 397;

pub struct PyRandom {
    mt: [u32; N],
    index: usize,
}

impl PyRandom {
    pub fn new(seed: u64) -> Self {
        let mut key: Vec<u32> = Vec::new();
        let mut n = seed;
        while n > 0 {
            key.push(n as u32);
            n >>= 32;
        }
        if key.is_empty() {
            key.push(0);
        }
        let mut r = PyRandom { mt: [0; N], index: N };
        r.init_genrand(19_650_218);
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = r.mt[i - 1] ^ (r.mt[i - 1] >> 30);
            r.mt[i] = (r.mt[i] ^ prev.wrapping_mul(1_664_525)).wrapping_add(key[j]).wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                r.mt[0] = r.mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = r.mt[i - 1] ^ (r.mt[i - 1] >> 30);
            r.mt[i] = (r.mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                r.mt[0] = r.mt[N - 1];
                i = 1;
            }
        }
        r.mt[0] = 0x8000_0000;
        r
    }

    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..N {
            let prev = self.mt[i - 1] ^ (self.mt[i - 1] >> 30);
            self.mt[i] = 1_812_433_253u32.wrapping_mul(prev).wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            for k in 0..N {
                let y = (self.mt[k] & 0x8000_0000) | (self.mt[(k + 1) % N] & 0x7fff_ffff);
                let mut v = self.mt[(k + M) % N] ^ (y >> 1);
                if y & 1 == 1 {
                    v ^= 0x9908_b0df;
                }
                self.mt[k] = v;
            }
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `randrange(start, stop)` for stop - start < 2**32.
    pub fn randrange(&mut self, start: usize, stop: usize) -> usize {
        let n = (stop - start) as u64;
        assert!(n >= 1 && n <= u32::MAX as u64, "randrange width out of range");
        let k = 64 - n.leading_zeros();
        loop {
            let r = (self.next_u32() >> (32 - k)) as u64;
            if r < n {
                return start + r as usize;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PyRandom;

    #[test]
    fn draws_as_cpython_does() {
        // python3 -c "import random; r = random.Random(10); print([r.randrange(1, 10) for _ in range(8)])"
        let mut r = PyRandom::new(10);
        let got: Vec<usize> = (0..8).map(|_| r.randrange(1, 10)).collect();
        assert_eq!(got, EXPECTED_10);
        // a seed of two 32-bit words: python3 -c "import random; r = random.Random(2**40 + 7); ..."
        let mut r = PyRandom::new((1 << 40) + 7);
        let got: Vec<usize> = (0..5).map(|_| r.randrange(0, 1000)).collect();
        assert_eq!(got, [628, 765, 834, 960, 967]);
    }

    const EXPECTED_10: [usize; 8] = [1, 7, 8, 1, 4, 8, 8, 5];
}
