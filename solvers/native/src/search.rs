//! Packings of one layout under a deterministic work budget (counted in job placements): the
//! Python `search` module's `Search`, step for step, kicks drawn from the same generator.

use std::rc::Rc;

use crate::model::{Problem, Reservation};
use crate::mt::PyRandom;
use crate::packing::{place, PackState};

type Snaps<const W: usize> = Vec<Rc<PackState<W>>>;

pub struct Search<const W: usize> {
    pub problem: Rc<Problem<W>>,
    pub res: Reservation<W>,
    pub budget: i64,
    potential: Vec<f64>,
    /// The best order packed so far and the snapshots of its packing: the empty state and one
    /// per placed job, or (seeds are packed without them) the empty state and the last only,
    /// the rest replayed when the local search first needs them.
    incumbent: Option<(Vec<usize>, Snaps<W>)>,
}

impl<const W: usize> Search<W> {
    pub fn new(problem: Rc<Problem<W>>, res: Reservation<W>, budget: i64, potential: Vec<f64>) -> Self {
        Search { problem, res, budget, potential, incumbent: None }
    }

    pub fn order(&self) -> &[usize] {
        self.incumbent.as_ref().map_or(&[], |(order, _)| order)
    }

    pub fn state(&self) -> Rc<PackState<W>> {
        match &self.incumbent {
            Some((_, snaps)) => snaps[snaps.len() - 1].clone(),
            None => Rc::new(PackState::empty(&self.problem, &self.res)),
        }
    }

    /// Pack `order` from `prefix` (snapshots of its first len(prefix)-1 jobs); None when it
    /// cannot beat `floor` or (when `budgeted`) the budget runs out. Without `every`, only the
    /// last snapshot is kept (after the prefix).
    fn run(
        &mut self,
        order: &[usize],
        prefix: &[Rc<PackState<W>>],
        floor: f64,
        budgeted: bool,
        every: bool,
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
        let mut state = prefix[k].as_ref().clone();
        let mut snaps: Snaps<W> = prefix.to_vec();
        for idx in k..order.len() {
            if state.value + remaining <= floor + 1e-9 || (budgeted && self.budget <= 0) {
                return None;
            }
            self.budget -= budgeted as i64;
            place(&self.problem, &self.res, &mut state, order[idx]);
            remaining -= rest[idx - k];
            if every {
                snaps.push(Rc::new(state.clone()));
            }
        }
        if state.value <= floor + 1e-9 {
            return None;
        }
        if !every {
            snaps.push(Rc::new(state));
        }
        Some(snaps)
    }

    /// The incumbent with a snapshot after every job (replayed once when seeds left them out:
    /// placing is deterministic, so the replay gives the snapshots the packing passed through).
    fn materialized(&mut self) -> Option<(Vec<usize>, Snaps<W>)> {
        let (order, snaps) = self.incumbent.take()?;
        if snaps.len() == order.len() + 1 {
            return Some((order, snaps));
        }
        let mut state = snaps[0].as_ref().clone();
        let mut full = vec![snaps[0].clone()];
        for &pos in &order {
            place(&self.problem, &self.res, &mut state, pos);
            full.push(Rc::new(state.clone()));
        }
        Some((order, full))
    }

    /// Pack each seed order (each only while it can beat the best so far) from the empty
    /// state; true when the best changed.
    pub fn best_of(&mut self, seeds: &[Vec<usize>]) -> bool {
        let start: Snaps<W> = match &self.incumbent {
            Some((_, snaps)) => snaps[..1].to_vec(),
            None => vec![Rc::new(PackState::empty(&self.problem, &self.res))],
        };
        let mut changed = false;
        for cand in seeds {
            let floor = match &self.incumbent {
                Some((order, _)) if order == cand => continue,
                Some((order, snaps)) if !order.is_empty() => snaps[snaps.len() - 1].value,
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
        let Some((mut order, mut snaps)) = self.materialized() else { return false };
        let mut rng = PyRandom::new(order.len() as u64);
        let (mut best_order, mut best_snaps) = (order.clone(), snaps.clone());
        let mut changed = false;
        loop {
            (order, snaps) = self.descend(order, snaps);
            if snaps[snaps.len() - 1].value > best_snaps[best_snaps.len() - 1].value + 1e-9 {
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
                    let floor = snaps[snaps.len() - 1].value;
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
