//! The greedy plan (the Python `greedy_plan.greedy_reference`): real-time floors first, queued
//! jobs in the given order each at its earliest legal block, then real-time demand with the
//! GPUs left. One call, so the floors' sets and the occupancy never cross to Python.

use crate::bits::Bits;
use crate::model::Problem;
use crate::realtime::{assign_realtime, grow_to_demand};

/// (job position, start step, first GPU) of each job placed.
pub type Placed = Vec<(usize, usize, usize)>;

/// (start, first GPU) of the first legal block free of `busy` for the job's whole run, from its
/// arrival on, lowest GPUs first (the Python `earliest_block`).
fn earliest_block<const W: usize>(p: &Problem<W>, pos: usize, busy: &[Bits<W>]) -> Option<(usize, usize)> {
    let job = &p.jobs[pos];
    for start in job.arrival..p.horizon {
        let mut union = Bits::ZERO;
        for m in &busy[start..p.end_of(pos, start)] {
            union |= *m;
        }
        if let Some(first) = p.free_block_starts(union, job.gpus).lowest() {
            return Some((start, first));
        }
    }
    None
}

/// Each job of `order` at its earliest block free of `busy`, which then holds it (the Python
/// `insert_in_order`, with its skip of jobs no smaller, shorter or earlier than a misfit).
pub fn insert_in_order<const W: usize>(p: &Problem<W>, order: &[usize], busy: &mut [Bits<W>]) -> Placed {
    let mut placed = Vec::new();
    let mut misfits: Vec<(usize, usize, usize)> = Vec::new();
    for &pos in order {
        let job = &p.jobs[pos];
        if misfits.iter().any(|&(n, d, a)| n <= job.gpus && d <= job.duration && a <= job.arrival) {
            continue;
        }
        match earliest_block(p, pos, busy) {
            None => misfits.push((job.gpus, job.duration, job.arrival)),
            Some((start, first)) => {
                let block = p.block(first, job.gpus);
                for m in &mut busy[start..p.end_of(pos, start)] {
                    *m |= block;
                }
                placed.push((pos, start, first));
            }
        }
    }
    placed
}

/// The greedy plan: the jobs placed and every app's GPU set per step.
pub fn greedy<const W: usize>(
    p: &Problem<W>,
    order: &[usize],
    floors: &[Vec<i64>],
    targets: &[Vec<i64>],
) -> (Placed, Vec<Vec<Bits<W>>>) {
    let (floor_sets, _) = assign_realtime(p, floors, &p.running_busy, false, &[]);
    let mut busy = p.running_busy.clone();
    for masks in &floor_sets {
        for (t, m) in masks.iter().enumerate() {
            busy[t] |= *m;
        }
    }
    let placed = insert_in_order(p, order, &mut busy);
    let mut batch_busy = p.running_busy.clone();
    for &(pos, start, first) in &placed {
        let block = p.block(first, p.jobs[pos].gpus);
        for m in &mut batch_busy[start..p.end_of(pos, start)] {
            *m |= block;
        }
    }
    let sets = grow_to_demand(p, &floor_sets, &batch_busy, targets);
    (placed, sets)
}
