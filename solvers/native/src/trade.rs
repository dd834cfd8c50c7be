//! Real-time service traded against batch value, one block at a time: the Python `trade`
//! module, step for step.

use std::rc::Rc;

use crate::model::{Problem, Trade};
use crate::packing::{fit_at, PackState};

const TRIES: usize = 4;

fn reserved(level: i64, pinned: i64) -> i64 {
    level - pinned.min(level)
}

/// Reserved GPUs the apps could give up at step t (above their floors and pins).
pub fn room_at(deal: &Trade, curves: &[Rc<Vec<i64>>], t: usize) -> i64 {
    let mut free = 0;
    for (c, low) in curves.iter().zip(&deal.low) {
        if c[t] > low[t] {
            free += c[t] - low[t];
        }
    }
    free
}

/// Start job `pos` before `ordinary` (its start without trading, T for none) when a cut of the
/// real-time curves pays for it; true when it did (the job is then placed).
pub fn earlier_start<const W: usize>(
    deal: &Trade,
    problem: &Problem<W>,
    state: &mut PackState<W>,
    pos: usize,
    ordinary: usize,
) -> bool {
    let job = &problem.jobs[pos];
    let (t_len, n) = (problem.horizon, job.gpus);
    let end = ordinary.min(t_len);
    if end <= job.arrival {
        return false;
    }
    let base = if ordinary < t_len { problem.start_value(pos, ordinary) } else { 0.0 };
    if problem.start_value(pos, job.arrival) <= base + 1e-9 {
        return false;
    }
    let reach = (end + job.duration).min(t_len);
    let room = state.room.as_ref().expect("a trading state has its room");
    let hard: Vec<i64> = (job.arrival..reach).map(|t| state.slack[t] + room[t]).collect();
    let (mut tries, mut s) = (0, job.arrival);
    while s < end && tries < TRIES {
        let e = (s + job.duration).min(t_len);
        let gain = problem.start_value(pos, s) - base;
        if gain <= 1e-9 {
            return false;
        }
        if let Some(short) = (s..e).rev().find(|t| hard[t - job.arrival] < n as i64) {
            s = short + 1;
            continue;
        }
        tries += 1;
        if take(deal, problem, state, pos, s, e, gain) {
            return true;
        }
        s += 1;
    }
    false
}

/// Place job `pos` at s with the cuts it needs when they cost less than `gain`.
fn take<const W: usize>(
    deal: &Trade,
    problem: &Problem<W>,
    state: &mut PackState<W>,
    pos: usize,
    s: usize,
    e: usize,
    gain: f64,
) -> bool {
    let job = &problem.jobs[pos];
    let n = job.gpus;
    let Some(cut) = cut(deal, state, n as i64, s, e, gain) else { return false };
    let old = state.curves.as_ref().expect("a trading state has its curves");
    let slack: Vec<i64> = state.slack.iter().zip(&cut.freed).map(|(x, f)| x + f).collect();
    let tslack = step_slack(deal, state, &cut);
    let (first, _) = fit_at(problem, job, s, &state.blocked, &state.busy, &slack, &tslack);
    let Some(first) = first else { return false };
    let changed: Vec<usize> = (0..slack.len())
        .filter(|&u| (0..cut.curves.len()).any(|a| cut.copied[a] && cut.curves[a][u] != old[a][u]))
        .collect();
    state.slack = slack;
    state.tslack = tslack;
    state.curves = Some(cut.curves);
    let curves = state.curves.as_ref().expect("just set");
    let room: Vec<(usize, i64)> = changed.iter().map(|&u| (u, room_at(deal, curves, u))).collect();
    let state_room = state.room.as_mut().expect("a trading state has its room");
    for (u, free) in room {
        state_room[u] = free;
    }
    state.occupy(problem, pos, s, problem.block(first, n));
    state.value -= cut.cost;
    state.traded += cut.cost;
    true
}

struct Cut {
    curves: Vec<Rc<Vec<i64>>>,
    copied: Vec<bool>,
    cost: f64,
    freed: Vec<i64>,
}

/// The curves with the cheapest apps cut where an n-GPU block over [s, e) needs their
/// reserved GPUs; None when floors forbid it or the shortfall reaches `gain`.
fn cut<const W: usize>(deal: &Trade, state: &PackState<W>, n: i64, s: usize, e: usize, gain: f64) -> Option<Cut> {
    let mut curves = state.curves.clone().expect("a trading state has its curves");
    let mut copied = vec![false; curves.len()];
    let mut freed = vec![0i64; state.slack.len()];
    let mut cost = 0.0;
    for t in s..e {
        let mut need = n - state.slack[t] - freed[t];
        for &a in &deal.cheapest {
            if need <= 0 {
                break;
            }
            let room = curves[a][t] - deal.low[a][t];
            if room <= 0 {
                continue;
            }
            if !copied[a] {
                curves[a] = Rc::new(curves[a].as_ref().clone());
                copied[a] = true;
            }
            let row = Rc::get_mut(&mut curves[a]).expect("a copied row is this cut's alone");
            let level = row[t] - room.min(need);
            cost += lower(deal, a, row, t, level, &mut freed);
            if cost >= gain {
                return None;
            }
            need = n - state.slack[t] - freed[t];
        }
        if need > 0 {
            return None;
        }
    }
    Some(Cut { curves, copied, cost, freed })
}

/// Cut app a's curve to `level` at t, spread outward at the swap cap's slope; add the reserved
/// GPUs it frees to `freed`; return the shortfall it adds.
fn lower(deal: &Trade, a: usize, c: &mut [i64], t: usize, level: i64, freed: &mut [i64]) -> f64 {
    let (cap, floor, dem, pinned, worth) = (deal.caps[a], &deal.floors[a], &deal.demand[a], &deal.pinned[a], deal.worth[a]);
    let mut cost = 0.0;
    for step in [1i64, -1] {
        let mut u = if step == 1 { t as i64 } else { t as i64 - 1 };
        while 0 <= u && (u as usize) < c.len() {
            let x = u as usize;
            let lower = (level + (u - t as i64).abs() * cap).max(floor[x]);
            if lower >= c[x] {
                break;
            }
            freed[x] += reserved(c[x], pinned[x]) - reserved(lower, pinned[x]);
            cost += worth * deal.weights[x] * (c[x].min(dem[x]) - lower.min(dem[x])) as f64;
            c[x] = lower;
            u += step;
        }
    }
    cost
}

/// The state's step-to-step slack under the cut curves (what apps keep across a step).
fn step_slack<const W: usize>(deal: &Trade, state: &PackState<W>, cut: &Cut) -> Vec<i64> {
    let mut tslack = state.tslack.clone();
    let old = state.curves.as_ref().expect("a trading state has its curves");
    for &a in &deal.cheapest {
        if !cut.copied[a] {
            continue;
        }
        let (o, w) = (&old[a], &cut.curves[a]);
        for u in 1..o.len() {
            if w[u] != o[u] || w[u - 1] != o[u - 1] {
                tslack[u] += o[u - 1].min(o[u]) - w[u - 1].min(w[u]);
            }
        }
    }
    tslack
}
