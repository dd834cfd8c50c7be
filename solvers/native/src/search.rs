//! Packings of one layout under a deterministic work budget (counted in job placements): the
//! Python `search` module's `Search`, step for step, kicks drawn from the same generator.
//!
//! Snapshots are kept sparse: the empty state, every EVERY-th job's and the last; a trial that
//! resumes after job k replays the jobs since the snapshot before k. Placing is deterministic,
//! so a replay gives exactly the state a snapshot would have held, and replays are not counted
//! against the budget (the Python reference keeps every snapshot and replays nothing).

use std::rc::Rc;

use crate::model::{Problem, Reservation};
use crate::mt::PyRandom;
use crate::packing::{place, PackState};

const EVERY: usize = 8;

/// Entry i: the state after the first i jobs of an order, where kept.
type Snaps<const W: usize> = Vec<Option<Rc<PackState<W>>>>;

fn last<const W: usize>(snaps: &Snaps<W>) -> &PackState<W> {
    snaps[snaps.len() - 1].as_ref().expect("the last snapshot is always kept")
}

pub struct Search<const W: usize> {
    pub problem: Rc<Problem<W>>,
    pub res: Reservation<W>,
    pub budget: i64,
    potential: Vec<f64>,
    /// The best order packed so far and its snapshots (seeds keep the first and last only).
    incumbent: Option<(Vec<usize>, Snaps<W>)>,
}

impl<const W: usize> Search<W> {
    pub fn new(problem: Rc<Problem<W>>, res: Reservation<W>, budget: i64, potential: Vec<f64>) -> Self {
        Search { problem, res, budget, potential, incumbent: None }
    }

    pub fn order(&self) -> &[usize] {
        self.incumbent.as_ref().map_or(&[], |(order, _)| order)
    }

    pub fn state(&self) -> PackState<W> {
        match &self.incumbent {
            Some((_, snaps)) => last(snaps).clone(),
            None => PackState::empty(&self.problem, &self.res),
        }
    }

    /// The state after the first k jobs of `order`, from the nearest snapshot at or before k.
    fn state_at(&self, order: &[usize], snaps: &[Option<Rc<PackState<W>>>], k: usize) -> PackState<W> {
        let k0 = (0..=k).rev().find(|&i| snaps[i].is_some()).expect("the empty state is always kept");
        let mut state = snaps[k0].as_ref().expect("found above").as_ref().clone();
        for &pos in &order[k0..k] {
            place(&self.problem, &self.res, &mut state, pos);
        }
        state
    }

    /// Pack `order` from `prefix` (snapshots of its first len(prefix)-1 jobs); None when it
    /// cannot beat `floor` or (when `budgeted`) the budget runs out. With `sparse` false only
    /// the last state is kept after the prefix.
    fn run(
        &mut self,
        order: &[usize],
        prefix: &[Option<Rc<PackState<W>>>],
        floor: f64,
        budgeted: bool,
        sparse: bool,
    ) -> Option<Snaps<W>> {
        let k = prefix.len() - 1;
        if budgeted {
            if self.budget <= 0 {
                return None;
            }
            self.budget -= 1;
        }
        let rest: Vec<f64> = order[k..].iter().map(|&p| self.potential[p]).collect();
        let mut remaining = 0.0;
        for x in &rest {
            remaining += x;
        }
        let mut state = self.state_at(order, prefix, k);
        let mut snaps: Snaps<W> = prefix.to_vec();
        for idx in k..order.len() {
            if state.value + remaining <= floor + 1e-9 || (budgeted && self.budget <= 0) {
                return None;
            }
            self.budget -= budgeted as i64;
            place(&self.problem, &self.res, &mut state, order[idx]);
            remaining -= rest[idx - k];
            let keep = sparse && (idx + 1) % EVERY == 0 && idx + 1 < order.len();
            snaps.push(if keep { Some(Rc::new(state.clone())) } else { None });
        }
        if state.value <= floor + 1e-9 {
            return None;
        }
        let end = snaps.len() - 1;
        snaps[end] = Some(Rc::new(state));
        Some(snaps)
    }

    /// The incumbent with its sparse snapshots (replayed once when seeds left them out).
    fn resumable(&mut self) -> Option<(Vec<usize>, Snaps<W>)> {
        let (order, mut snaps) = self.incumbent.take()?;
        if (EVERY..order.len()).step_by(EVERY).any(|i| snaps[i].is_none()) {
            let mut state = snaps[0].as_ref().expect("the empty state is always kept").as_ref().clone();
            for (idx, &pos) in order.iter().enumerate().take(order.len().saturating_sub(1)) {
                place(&self.problem, &self.res, &mut state, pos);
                if (idx + 1) % EVERY == 0 {
                    snaps[idx + 1] = Some(Rc::new(state.clone()));
                }
            }
        }
        Some((order, snaps))
    }

    /// Pack each seed order (each only while it can beat the best so far) from the empty
    /// state; true when the best changed.
    pub fn best_of(&mut self, seeds: &[Vec<usize>]) -> bool {
        let start: Snaps<W> = match &self.incumbent {
            Some((_, snaps)) => snaps[..1].to_vec(),
            None => vec![Some(Rc::new(PackState::empty(&self.problem, &self.res)))],
        };
        let mut changed = false;
        for cand in seeds {
            let floor = match &self.incumbent {
                Some((order, _)) if order == cand => continue,
                Some((order, snaps)) if !order.is_empty() => last(snaps).value,
                _ => f64::NEG_INFINITY,
            };
            if let Some(snaps) = self.run(cand, &start, floor, false, false) {
                self.incumbent = Some((cand.clone(), snaps));
                changed = true;
            }
        }
        changed
    }

    /// Iterated local search from the best order: descend; while budget is left, kick the best
    /// order (one job moved earlier, positions drawn from a generator seeded by the queue's
    /// length) and descend again. True when a better order was found (it is then the best).
    pub fn improve(&mut self) -> bool {
        let Some((mut order, mut snaps)) = self.resumable() else { return false };
        let mut rng = PyRandom::new(order.len() as u64);
        let (mut best_order, mut best_snaps) = (order.clone(), snaps.clone());
        let mut changed = false;
        loop {
            (order, snaps) = self.descend(order, snaps);
            if last(&snaps).value > last(&best_snaps).value + 1e-9 {
                (best_order, best_snaps) = (order.clone(), snaps.clone());
                changed = true;
            }
            if self.budget <= 0 || best_order.len() < 3 {
                break;
            }
            let j = rng.randrange(1, best_order.len());
            let i = rng.randrange(0, j);
            let mut kicked = Vec::with_capacity(best_order.len());
            kicked.extend_from_slice(&best_order[..i]);
            kicked.push(best_order[j]);
            kicked.extend_from_slice(&best_order[i..j]);
            kicked.extend_from_slice(&best_order[j + 1..]);
            match self.run(&kicked, &best_snaps[..i + 1], f64::NEG_INFINITY, true, true) {
                Some(found) => (order, snaps) = (kicked, found),
                None => break,
            }
        }
        self.incumbent = Some((best_order, best_snaps));
        changed
    }

    /// First-improvement local search: adjacent swaps and moves to the front.
    fn descend(&mut self, mut order: Vec<usize>, mut snaps: Snaps<W>) -> (Vec<usize>, Snaps<W>) {
        let mut improved = true;
        while improved && self.budget > 0 {
            improved = false;
            for i in 1..order.len() {
                let mut swapped = order.clone();
                swapped.swap(i - 1, i);
                let mut front = Vec::with_capacity(order.len());
                front.push(order[i]);
                front.extend_from_slice(&order[..i]);
                front.extend_from_slice(&order[i + 1..]);
                for (cand, k) in [(swapped, i - 1), (front, 0)] {
                    let floor = last(&snaps).value;
                    if let Some(found) = self.run(&cand, &snaps[..k + 1], floor, true, true) {
                        (order, snaps, improved) = (cand, found, true);
                        break;
                    }
                }
                if improved || self.budget <= 0 {
                    break;
                }
            }
        }
        (order, snaps)
    }
}
