//! Batch blocks placed into GPU x time around reserved real-time capacity: the Python
//! `packing` module, step for step (the same choices in the same order).

use std::cell::RefCell;
use std::rc::Rc;

use crate::bits::Bits;
use crate::model::{fully_within, Job, Problem, Reservation};
use crate::trade;

const MAX_RUNS: usize = 12;
const BOUNDARY_TRIES: usize = 16;

/// (job position, start step, GPU set) in the order placed.
pub type Placed<const W: usize> = (usize, usize, Bits<W>);

/// A partial packing; `placed` is a log shared with the snapshots taken from it, of which
/// this state owns the first `count` entries.
#[derive(Clone)]
pub struct PackState<const W: usize> {
    pub busy: Vec<Bits<W>>,
    pub blocked: Vec<Bits<W>>,
    pub slack: Vec<i64>,
    pub tslack: Vec<i64>,
    pub placed: Rc<RefCell<Vec<Placed<W>>>>,
    pub count: usize,
    pub value: f64,
    pub curves: Option<Vec<Rc<Vec<i64>>>>,
    pub traded: f64,
    pub room: Option<Vec<i64>>,
}

impl<const W: usize> PackState<W> {
    /// Only the running jobs placed.
    pub fn empty(problem: &Problem<W>, res: &Reservation<W>) -> Self {
        let (t_len, g) = (problem.horizon, problem.gpus as i64);
        let busy = problem.running_busy.clone();
        let blocked: Vec<Bits<W>> = (0..t_len).map(|t| busy[t] | res.zone[t]).collect();
        let slack = (0..t_len).map(|t| g - blocked[t].count() - res.reserve[t]).collect();
        let tslack = match &res.keep {
            None => vec![2 * g * (t_len as i64 + 1); t_len],
            Some(keep) => {
                let mut out = vec![0; t_len];
                for t in 1..t_len {
                    out[t] = problem.full.andnot(&(busy[t - 1] | busy[t])).count() - keep[t];
                }
                out
            }
        };
        let (curves, room) = match &res.trade {
            Some(deal) => {
                let curves: Vec<Rc<Vec<i64>>> = deal.curves.iter().map(|c| Rc::new(c.clone())).collect();
                let room = (0..t_len).map(|t| trade::room_at(deal, &curves, t)).collect();
                (Some(curves), Some(room))
            }
            None => (None, None),
        };
        let mut state = PackState {
            busy,
            blocked,
            slack,
            tslack,
            placed: Rc::new(RefCell::new(Vec::new())),
            count: 0,
            value: 0.0,
            curves,
            traded: 0.0,
            room,
        };
        for (pos, job) in problem.jobs.iter().enumerate() {
            if let Some((mask, first, remaining)) = job.running {
                state.record(pos, first, mask);
                state.value += problem.held_value(pos, first, remaining);
            }
        }
        state
    }

    pub fn record(&mut self, pos: usize, start: usize, mask: Bits<W>) {
        if self.placed.borrow().len() != self.count {
            let owned = self.placed.borrow()[..self.count].to_vec();
            self.placed = Rc::new(RefCell::new(owned));
        }
        self.placed.borrow_mut().push((pos, start, mask));
        self.count += 1;
    }

    /// Hold `block` for job `pos` from step `s` on (its value counted); no checks.
    pub fn occupy(&mut self, problem: &Problem<W>, pos: usize, s: usize, block: Bits<W>) {
        let job = &problem.jobs[pos];
        let t_len = problem.horizon;
        let e = (s + job.duration).min(t_len);
        let n = job.gpus as i64;
        if s > 0 {
            self.tslack[s] -= block.andnot(&self.busy[s - 1]).count();
        }
        if e < t_len {
            self.tslack[e] -= block.andnot(&self.busy[e]).count();
        }
        for t in s..e {
            self.busy[t] |= block;
            self.blocked[t] |= block;
            self.slack[t] -= n;
        }
        for t in (s + 1)..e {
            self.tslack[t] -= n;
        }
        self.record(pos, s, block);
        self.value += problem.start_value(pos, s);
    }

    pub fn placed(&self) -> Vec<Placed<W>> {
        self.placed.borrow()[..self.count].to_vec()
    }
}

/// Best fit in space among the candidate first GPUs (see the Python `_choose_block`).
fn choose_block<const W: usize>(problem: &Problem<W>, cands: Bits<W>, union: Bits<W>, n: usize) -> usize {
    let (g, nn) = (problem.gpus, problem.node_size);
    let free = problem.full.andnot(&union);
    let busy = problem.full & union;
    // Outside the pool counts as busy: a block ending at the pool's end touches its edge.
    let above = if n <= g { Bits::range(g - n, 64 * W) } else { Bits::ZERO };
    let exact = cands & (busy.shl(1) | problem.node_starts) & (busy.shr(n) | above | problem.node_end_starts(n));
    if let Some(p) = exact.lowest() {
        return p;
    }
    let mut best_len: Option<usize> = None;
    let mut best_pos = usize::MAX;
    let mut left = cands;
    for _ in 0..MAX_RUNS {
        let Some(p) = left.lowest() else { break };
        let below = busy & Bits::range(0, p);
        let (node_lo, node_hi) = if n <= nn { ((p / nn) * nn, ((p / nn + 1) * nn).min(g)) } else { (0, g) };
        let a = below.bit_length().max(node_lo);
        let b = (p + free.ones_from(p)).min(node_hi);
        let in_run = cands & Bits::range(a, b);
        left = left.andnot(&in_run);
        let length = b - a;
        if best_len.is_some_and(|l| length >= l) {
            continue;
        }
        best_len = Some(length);
        let hi = b - n;
        best_pos = if in_run.test(a) && (a - node_lo) % n == 0 {
            a
        } else if in_run.test(hi) && (hi - node_lo) % n == 0 {
            hi
        } else {
            in_run.lowest().expect("a run holds its candidate")
        };
        if length == n {
            break;
        }
    }
    best_pos
}

/// Candidates whose block leaves enough GPUs free across the steps s-1 -> s and e-1 -> e.
#[allow(clippy::too_many_arguments)]
fn boundary_ok<const W: usize>(
    problem: &Problem<W>,
    cands: Bits<W>,
    n: usize,
    s: usize,
    e: usize,
    busy: &[Bits<W>],
    tslack: &[i64],
) -> Bits<W> {
    let need_s = s > 0 && tslack[s] < n as i64;
    let need_e = e < problem.horizon && tslack[e] < n as i64;
    if !(need_s || need_e) {
        return cands;
    }
    let mut ok = cands;
    if need_s {
        ok &= fully_within(busy[s - 1], n);
    }
    if need_e {
        ok &= fully_within(busy[e], n);
    }
    let mut rest = cands.andnot(&ok);
    for _ in 0..BOUNDARY_TRIES {
        let Some(low) = rest.lowest() else { break };
        rest = rest.andnot(&Bits::bit(low));
        let block = problem.block(low, n);
        if need_s && block.andnot(&busy[s - 1]).count() > tslack[s] {
            continue;
        }
        if need_e && block.andnot(&busy[e]).count() > tslack[e] {
            continue;
        }
        ok |= Bits::bit(low);
    }
    ok
}

/// (first GPU of the block `job` takes from step s, None when none fits there; the next start
/// worth trying), against these per-step lists.
pub fn fit_at<const W: usize>(
    problem: &Problem<W>,
    job: &Job<W>,
    s: usize,
    blocked: &[Bits<W>],
    busy: &[Bits<W>],
    slack: &[i64],
    tslack: &[i64],
) -> (Option<usize>, usize) {
    let (t_len, n) = (problem.horizon, job.gpus);
    let e = (s + job.duration).min(t_len);
    for t in (s..e).rev() {
        if slack[t] < n as i64 {
            return (None, t + 1);
        }
        if t > s && tslack[t] < n as i64 {
            return (None, t);
        }
    }
    let mut union = Bits::ZERO;
    for mask in &blocked[s..e] {
        union |= *mask;
    }
    let mut cands = problem.free_block_starts(union, n);
    if cands.any() {
        cands = boundary_ok(problem, cands, n, s, e, busy, tslack);
    }
    if cands.is_zero() {
        return (None, s + 1);
    }
    (Some(choose_block(problem, cands, union, n)), s + 1)
}

/// Give job `pos` its earliest start at which a block is free and `res` stays intact, or an
/// earlier one paid for by cutting real-time curves where the trade says so; or none.
pub fn place<const W: usize>(problem: &Problem<W>, res: &Reservation<W>, state: &mut PackState<W>, pos: usize) {
    let job = &problem.jobs[pos];
    let t_len = problem.horizon;
    let n = job.gpus as i64;
    let mut s = job.arrival;
    let mut found = None;
    if s < t_len && state.slack[s..].iter().any(|x| *x >= n) {
        while s < t_len {
            let (first, next) = fit_at(problem, job, s, &state.blocked, &state.busy, &state.slack, &state.tslack);
            if let Some(first) = first {
                found = Some((s, first));
                break;
            }
            s = next;
        }
    }
    if let Some(deal) = &res.trade {
        let ordinary = found.map_or(t_len, |f| f.0);
        if trade::earlier_start(deal, problem, state, pos, ordinary) {
            return;
        }
    }
    if let Some((start, first)) = found {
        state.occupy(problem, pos, start, problem.block(first, job.gpus));
    }
}

/// Place `order` greedily, each job at its earliest start that leaves `res` intact.
pub fn pack<const W: usize>(problem: &Problem<W>, res: &Reservation<W>, order: &[usize]) -> PackState<W> {
    let mut state = PackState::empty(problem, res);
    for &pos in order {
        place(problem, res, &mut state, pos);
    }
    state
}
