//! The planning problem and a layout's reservation, compiled for the packer (the Python
//! `Problem` and `Reservation`, with GPU sets as `Bits`).

use crate::bits::Bits;

pub struct Job<const W: usize> {
    pub priority: f64,
    pub gpus: usize,
    pub duration: usize,
    pub arrival: usize,
    /// (GPUs, first step, end step) for a job inherited running (a blocker may start later).
    pub running: Option<(Bits<W>, usize, usize)>,
}

/// A real-time app; `current` is None when the app has no `current` (step 0 is free).
pub struct App<const W: usize> {
    pub priority: f64,
    pub min_gpus: i64,
    pub max_gpus: i64,
    pub swap_cap: i64,
    pub current: Option<Bits<W>>,
    /// GPUs wanted at each step.
    pub demand: Vec<i64>,
}

pub struct Problem<const W: usize> {
    pub gpus: usize,
    pub node_size: usize,
    pub horizon: usize,
    /// cum[k] = w_0 + ... + w_{k-1}, exactly as the Python side summed it.
    pub cum: Vec<f64>,
    /// w_t, as the Python side computed them.
    pub weights: Vec<f64>,
    /// The price of a real-time GPU-step short, per unit of the app's priority.
    pub penalty: f64,
    pub jobs: Vec<Job<W>>,
    pub apps: Vec<App<W>>,
    pub running_busy: Vec<Bits<W>>,
    /// The `completion` value model's (time_decay, latest completion); None: `gpu_steps`.
    pub completion: Option<(f64, usize)>,
    pub full: Bits<W>,
    pub node_starts: Bits<W>,
    /// Per aligned block size 2, 4, ... up to the node: (lower halves, upper halves, half).
    pub buddy_halves: Vec<(Bits<W>, Bits<W>, usize)>,
    /// Per block size a job has: (size, legal first GPUs, first GPUs flush with a node's end);
    /// a short list scanned, cheaper than hashing on every block search.
    sizes: Vec<(usize, Bits<W>, Bits<W>)>,
}

impl<const W: usize> Problem<W> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpus: usize,
        node_size: usize,
        horizon: usize,
        cum: Vec<f64>,
        weights: Vec<f64>,
        penalty: f64,
        jobs: Vec<Job<W>>,
        apps: Vec<App<W>>,
        running_busy: Vec<Bits<W>>,
        completion: Option<(f64, usize)>,
    ) -> Self {
        let full = Bits::range(0, gpus);
        let mut buddy_halves = Vec::new();
        let mut size = 2;
        while size <= node_size {
            let half = size / 2;
            let mut low = Bits::ZERO;
            for base in (0..gpus).step_by(size) {
                low |= Bits::range(base, base + half);
            }
            buddy_halves.push((low & full, low.shl(half) & full, half));
            size *= 2;
        }
        let mut node_starts = Bits::ZERO;
        let mut ends = Vec::new(); // GPU indices where a node ends
        for g in (0..gpus).step_by(node_size) {
            node_starts |= Bits::bit(g);
            if g > 0 {
                ends.push(g);
            }
        }
        ends.push(gpus);
        let mut sizes: Vec<(usize, Bits<W>, Bits<W>)> = Vec::new();
        for job in &jobs {
            let n = job.gpus;
            if n == 0 || n > gpus || sizes.iter().any(|x| x.0 == n) {
                continue;
            }
            let mut m = Bits::ZERO;
            for p in 0..=(gpus - n) {
                let ok = if n <= node_size {
                    p % node_size + n <= node_size
                } else {
                    p % node_size == 0 && n % node_size == 0
                };
                if ok {
                    m |= Bits::bit(p);
                }
            }
            let mut e = Bits::ZERO;
            for &end in &ends {
                if end >= n {
                    e |= Bits::bit(end - n);
                }
            }
            sizes.push((n, m, e));
        }
        Problem {
            gpus,
            node_size,
            horizon,
            cum,
            weights,
            penalty,
            jobs,
            apps,
            running_busy,
            completion,
            full,
            node_starts,
            buddy_halves,
            sizes,
        }
    }

    pub fn interval_weight(&self, start: usize, end: usize) -> f64 {
        self.cum[end] - self.cum[start]
    }

    /// What queued job `pos` started at `start` adds under the value model (the Python
    /// `Problem.start_value`, the same float).
    pub fn start_value(&self, pos: usize, start: usize) -> f64 {
        let j = &self.jobs[pos];
        match self.completion {
            Some((decay, latest)) => completion_value(j.priority, start + j.duration, decay, latest),
            None => j.priority * j.gpus as f64 * self.interval_weight(start, self.end_of(pos, start)),
        }
    }

    /// What an inherited job holding its GPUs over steps [first, remaining) adds (the Python
    /// `Problem.held_value`): the same in every plan.
    pub fn held_value(&self, pos: usize, first: usize, remaining: usize) -> f64 {
        let j = &self.jobs[pos];
        match self.completion {
            Some((decay, latest)) => completion_value(j.priority, remaining, decay, latest),
            None => j.priority * j.gpus as f64 * self.interval_weight(first, remaining.min(self.horizon)),
        }
    }

    /// The step after a queued job `pos`'s last when it starts at `start` (the horizon at most).
    pub fn end_of(&self, pos: usize, start: usize) -> usize {
        (start + self.jobs[pos].duration).min(self.horizon)
    }

    pub fn block(&self, first: usize, n: usize) -> Bits<W> {
        Bits::range(first, first + n)
    }

    /// First GPUs at which an n-block obeys the node rule (none for a size no job has).
    pub fn valid_starts(&self, n: usize) -> Bits<W> {
        self.sizes.iter().find(|x| x.0 == n).map_or(Bits::ZERO, |x| x.1)
    }

    /// First GPUs p at which an n-block ends flush with a node's end.
    pub fn node_end_starts(&self, n: usize) -> Bits<W> {
        self.sizes.iter().find(|x| x.0 == n).map_or(Bits::ZERO, |x| x.2)
    }

    /// First GPUs p such that [p, p+n) avoids `union` and obeys the node rule.
    pub fn free_block_starts(&self, union: Bits<W>, n: usize) -> Bits<W> {
        fully_within(self.full.andnot(&union), n) & self.valid_starts(n)
    }
}

/// The Python `value_models.completion_value`: priority x decay^completion / (1 - decay), or
/// with no discount priority x the steps from `completion` to `latest`.
fn completion_value(priority: f64, completion: usize, decay: f64, latest: usize) -> f64 {
    if decay < 1.0 {
        priority * decay.powf(completion as f64) / (1.0 - decay)
    } else {
        priority * latest.saturating_sub(completion) as f64
    }
}

/// Bits p such that [p, p+n) lies inside `mask`.
pub fn fully_within<const W: usize>(mut mask: Bits<W>, n: usize) -> Bits<W> {
    let mut k = 1;
    while k < n && mask.any() {
        let step = k.min(n - k);
        mask &= mask.shr(step);
        k += step;
    }
    mask
}

/// Real-time service blocks may buy back (the reserving layout's `Trade`).
#[derive(Clone, PartialEq)]
pub struct Trade {
    pub curves: Vec<Vec<i64>>,
    pub floors: Vec<Vec<i64>>,
    pub pinned: Vec<Vec<i64>>,
    pub low: Vec<Vec<i64>>,
    pub worth: Vec<f64>,
    pub caps: Vec<i64>,
    pub demand: Vec<Vec<i64>>,
    /// w_t, as the Python side computed them.
    pub weights: Vec<f64>,
    pub cheapest: Vec<usize>,
}

/// What batch blocks must leave to the real-time apps (see the Python `Reservation`).
#[derive(Clone)]
pub struct Reservation<const W: usize> {
    pub reserve: Vec<i64>,
    pub keep: Option<Vec<i64>>,
    pub zone: Vec<Bits<W>>,
    pub trade: Option<Trade>,
}
