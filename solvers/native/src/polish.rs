//! The polish of a finished plan (the Python `polish` module, move for move): batch jobs moved
//! earlier or given a start (`earlier`, else `eject`), the real-time apps on their blocks
//! migrating within their swap caps. Floats are summed in the Python order, so the plans match.

use std::rc::Rc;

use crate::bits::Bits;
use crate::model::{App, Job, Problem};

const BLOCKS_EXAMINED: usize = 64;
const MIGRATING_BLOCKS: usize = 4;
const EJECTED: usize = 2;
const EJECT_TRIES: usize = 2;

/// A block an ejection could take: the value taken out, its first GPU, and the (job, start)
/// pairs taken out (the first `count` of `out`).
#[derive(Clone, Copy)]
struct Ejection {
    lost: f64,
    first: usize,
    out: [(usize, usize); EJECTED],
    count: usize,
}

/// Per job position: (start, first GPU of its block) for a placed queued job.
pub type Starts = Vec<Option<(usize, usize)>>;

#[derive(Default)]
struct Saved<const W: usize> {
    starts: Starts,
    sets: Vec<Rc<Vec<Bits<W>>>>,
    batch: Vec<Bits<W>>,
    apps: Vec<Bits<W>>,
}

/// Buffers the moves fill and empty again, kept so a move allocates nothing it can reuse.
#[derive(Default)]
struct Scratch<const W: usize> {
    saved: Saved<W>,
    apps: Vec<Bits<W>>,
    active: Vec<(usize, usize, usize, usize)>,
    options: Vec<Ejection>,
}

pub struct Plan<'a, const W: usize> {
    p: &'a Problem<W>,
    budget: i64,
    queued: Vec<usize>,
    pub starts: Starts,
    pub sets: Vec<Rc<Vec<Bits<W>>>>,
    batch: Vec<Bits<W>>,
    apps: Vec<Bits<W>>,
    scratch: Scratch<W>,
}

/// The n lowest set bits of `mask` (all of them when it has fewer).
fn lowest_bits<const W: usize>(mask: Bits<W>, n: i64) -> Bits<W> {
    mask.ones().take(n.max(0) as usize).fold(Bits::ZERO, |out, g| out | Bits::bit(g))
}

impl<'a, const W: usize> Plan<'a, W> {
    pub fn new(p: &'a Problem<W>, starts: Starts, sets: Vec<Vec<Bits<W>>>, budget: i64) -> Self {
        let queued: Vec<usize> = (0..p.jobs.len()).filter(|&i| p.jobs[i].running.is_none()).collect();
        let mut plan = Plan {
            p,
            budget,
            queued,
            starts,
            sets: sets.into_iter().map(Rc::new).collect(),
            batch: p.running_busy.clone(),
            apps: vec![Bits::ZERO; p.horizon],
            scratch: Scratch::default(),
        };
        for k in 0..plan.queued.len() {
            let i = plan.queued[k];
            if let Some((s, first)) = plan.starts[i] {
                plan.mark(i, s, first, true);
            }
        }
        for row in &plan.sets {
            for (t, m) in row.iter().enumerate() {
                plan.apps[t] |= *m;
            }
        }
        plan
    }

    fn job(&self, i: usize) -> &Job<W> {
        &self.p.jobs[i]
    }

    fn end_of(&self, i: usize, start: usize) -> usize {
        self.p.end_of(i, start)
    }

    fn value(&self, i: usize, start: Option<usize>) -> f64 {
        match start {
            None => 0.0,
            Some(s) => self.p.start_value(i, s),
        }
    }

    fn block(&self, i: usize, first: usize) -> Bits<W> {
        self.p.block(first, self.job(i).gpus)
    }

    fn mark(&mut self, i: usize, start: usize, first: usize, on: bool) {
        let mask = self.block(i, first);
        for t in start..self.end_of(i, start) {
            self.batch[t] = if on { self.batch[t] | mask } else { self.batch[t].andnot(&mask) };
        }
    }

    fn unplace(&mut self, i: usize) {
        if let Some((s, first)) = self.starts[i].take() {
            self.mark(i, s, first, false);
        }
    }

    pub fn earlier(&mut self, i: usize) -> bool {
        let current = self.starts[i];
        let last = current.map_or(self.p.horizon, |c| c.0);
        let before = self.value(i, current.map(|c| c.0));
        if let Some((s, first)) = current {
            self.mark(i, s, first, false);
        }
        for s in self.job(i).arrival..last {
            if self.budget <= 0 {
                break;
            }
            self.budget -= 1;
            if self.value(i, Some(s)) <= before + 1e-9 {
                break;
            }
            let e = self.end_of(i, s);
            let mut union = Bits::ZERO;
            for t in s..e {
                union |= self.batch[t];
            }
            let cands = self.p.free_block_starts(union, self.job(i).gpus);
            if cands.any() && self.take(i, s, e, cands) {
                return true;
            }
        }
        if let Some((s, first)) = current {
            self.mark(i, s, first, true);
        }
        false
    }

    fn take(&mut self, i: usize, s: usize, e: usize, cands: Bits<W>) -> bool {
        let mut scored = [(0i64, 0usize); BLOCKS_EXAMINED];
        let mut len = 0;
        for p in cands.ones().take(BLOCKS_EXAMINED) {
            self.budget -= 1;
            let block = self.block(i, p);
            let mut cells = 0;
            for t in s..e {
                cells += (self.apps[t] & block).count();
            }
            scored[len] = (cells, p);
            len += 1;
            if cells == 0 {
                break;
            }
        }
        let scored = &mut scored[..len];
        scored.sort_unstable();
        let n = if scored[0].0 == 0 { 1 } else { MIGRATING_BLOCKS };
        for &(cells, p) in scored.iter().take(n) {
            if self.place(i, s, e, p, cells > 0) {
                return true;
            }
        }
        false
    }

    pub fn eject(&mut self, i: usize) -> bool {
        let current = self.starts[i];
        let last = current.map_or(self.p.horizon, |c| c.0);
        let before = self.value(i, current.map(|c| c.0));
        let n = self.job(i).gpus;
        for s in self.job(i).arrival..last {
            if self.budget <= 0 || self.value(i, Some(s)) <= before + 1e-9 {
                break;
            }
            self.budget -= 1;
            let e = self.end_of(i, s);
            let mut fixed = Bits::ZERO;
            for t in s..e {
                fixed |= self.p.running_busy[t];
            }
            let mut active = std::mem::take(&mut self.scratch.active); // (job, start, GPUs [lo, hi))
            active.clear();
            for &k in &self.queued {
                if let Some((start, first)) = self.starts[k] {
                    if k != i && start < e && s < self.end_of(k, start) {
                        active.push((k, start, first, first + self.job(k).gpus));
                    }
                }
            }
            let mut options = std::mem::take(&mut self.scratch.options);
            options.clear();
            for p in self.p.free_block_starts(fixed, n).ones().take(BLOCKS_EXAMINED) {
                self.budget -= 1;
                let mut option = Ejection { lost: 0.0, first: p, out: [(0, 0); EJECTED], count: 0 };
                for a in active.iter().filter(|a| a.2 < p + n && p < a.3) {
                    if option.count == EJECTED {
                        option.count += 1;
                        break;
                    }
                    option.out[option.count] = (a.0, a.1);
                    option.count += 1;
                }
                if option.count > 0 && option.count <= EJECTED {
                    for &(k, st) in &option.out[..option.count] {
                        option.lost += self.value(k, Some(st));
                    }
                    options.push(option);
                }
            }
            self.scratch.active = active;
            options.sort_by(|a, b| a.lost.partial_cmp(&b.lost).unwrap().then(a.first.cmp(&b.first)));
            let mut done = false;
            for option in options.iter().take(EJECT_TRIES) {
                self.budget -= 1;
                let gained = self.value(i, Some(s)) - before;
                if self.eject_onto(i, s, e, option.first, &option.out[..option.count], gained, option.lost) {
                    done = true;
                    break;
                }
            }
            self.scratch.options = options;
            if done {
                return true;
            }
        }
        false
    }

    #[allow(clippy::too_many_arguments)]
    fn eject_onto(&mut self, i: usize, s: usize, e: usize, p: usize, out: &[(usize, usize)], mut gained: f64, lost: f64) -> bool {
        let mut saved = std::mem::take(&mut self.scratch.saved);
        saved.starts.clone_from(&self.starts);
        saved.sets.clone_from(&self.sets);
        saved.batch.clone_from(&self.batch);
        saved.apps.clone_from(&self.apps);
        self.unplace(i);
        for &(k, _) in out {
            self.unplace(k);
        }
        let block = self.block(i, p);
        let cells = (s..e).any(|t| (self.apps[t] & block).any());
        if self.place(i, s, e, p, cells) {
            let mut order: Vec<usize> = out.iter().map(|o| o.0).collect();
            order.sort_by(|&a, &b| {
                let (va, vb) = (self.value(a, Some(self.job(a).arrival)), self.value(b, Some(self.job(b).arrival)));
                (-va).partial_cmp(&-vb).unwrap().then(a.cmp(&b))
            });
            for k in order {
                self.earlier(k);
                gained += self.value(k, self.starts[k].map(|c| c.0));
            }
            if gained - lost > 1e-9 {
                self.scratch.saved = saved;
                return true;
            }
        }
        std::mem::swap(&mut self.starts, &mut saved.starts);
        std::mem::swap(&mut self.sets, &mut saved.sets);
        std::mem::swap(&mut self.batch, &mut saved.batch);
        std::mem::swap(&mut self.apps, &mut saved.apps);
        self.scratch.saved = saved;
        false
    }

    fn place(&mut self, i: usize, s: usize, e: usize, p: usize, migrating: bool) -> bool {
        let block = self.block(i, p);
        if migrating && !self.room_to_migrate(block, s, e) {
            return false;
        }
        let moved = if migrating {
            let mut apps = std::mem::take(&mut self.scratch.apps);
            apps.clone_from(&self.apps);
            let moved = self.migrate_all(&mut apps, block, s, e);
            self.scratch.apps = apps;
            match moved {
                Some(m) => m,
                None => return false,
            }
        } else {
            Vec::new()
        };
        for (a, masks) in moved {
            let old = self.sets[a].clone();
            for (t, m) in masks.iter().enumerate() {
                if *m != old[t] {
                    self.apps[t] = self.apps[t].andnot(&old[t]) | *m;
                }
            }
            self.sets[a] = Rc::new(masks);
        }
        self.starts[i] = Some((s, p));
        self.mark(i, s, p, true);
        true
    }

    /// Whether every step of [s, e) has as many idle GPUs outside `block` as the apps hold
    /// inside it: each GPU an app leaves needs an idle one of its own (apps never share a GPU
    /// in a legal plan), so without them `migrate_all` fails; checked first because it is cheap.
    fn room_to_migrate(&self, block: Bits<W>, s: usize, e: usize) -> bool {
        (s..e).all(|t| (self.apps[t] & block).count() <= self.idle(&self.apps, block, s, e, t).count())
    }

    /// New sets for the apps holding GPUs of `block` in [s, e) (`apps`: the apps' union per
    /// step, updated as they move), or None when one cannot leave within its swap cap.
    fn migrate_all(&self, apps: &mut [Bits<W>], block: Bits<W>, s: usize, e: usize) -> Option<Vec<(usize, Vec<Bits<W>>)>> {
        let mut out = Vec::new();
        for (a, app) in self.p.apps.iter().enumerate() {
            let sets = &self.sets[a];
            if !(s..e).any(|t| (sets[t] & block).any()) {
                continue;
            }
            let moved = self.migrate(app, sets, apps, block, s, e)?;
            for t in s.saturating_sub(1)..self.p.horizon {
                apps[t] = apps[t].andnot(&sets[t]) | moved[t];
            }
            out.push((a, moved));
        }
        Some(out)
    }

    fn migrate(&self, app: &App<W>, sets: &[Bits<W>], apps: &[Bits<W>], block: Bits<W>, s: usize, e: usize) -> Option<Vec<Bits<W>>> {
        let t_end = self.p.horizon;
        let mut out = sets.to_vec();
        let mut subs: Vec<(usize, usize)> = Vec::new();
        let mut last = s;
        for t in s..t_end {
            let held = sets[t];
            let idle = self.idle(apps, block, s, e, t);
            subs.retain(|&(g, h)| held.test(g) && (t < e || idle.test(h)));
            if t < e {
                for g in (held & block).ones() {
                    let pos = subs.iter().position(|&(x, _)| x == g);
                    if let Some(k) = pos {
                        if idle.test(subs[k].1) {
                            continue;
                        }
                    }
                    let mut taken = Bits::ZERO;
                    for &(_, h) in &subs {
                        taken |= Bits::bit(h);
                    }
                    let pick = self.lasting(apps, idle.andnot(&taken), t)?;
                    match pos {
                        Some(k) => subs[k].1 = pick,
                        None => subs.push((g, pick)),
                    }
                }
            }
            if t >= e && subs.is_empty() {
                break;
            }
            for &(g, h) in &subs {
                out[t] = out[t].andnot(&Bits::bit(g)) | Bits::bit(h);
            }
            last = t + 1;
        }
        if self.within_cap(app, &mut out, apps, block, s, e, (last + 1).min(t_end)) {
            Some(out)
        } else {
            None
        }
    }

    fn idle(&self, apps: &[Bits<W>], block: Bits<W>, s: usize, e: usize, t: usize) -> Bits<W> {
        let mut free = self.p.full.andnot(&self.batch[t]).andnot(&apps[t]);
        if s <= t && t < e {
            free = free.andnot(&block);
        }
        free
    }

    fn lasting(&self, apps: &[Bits<W>], mut idle: Bits<W>, t: usize) -> Option<usize> {
        if idle.is_zero() {
            return None;
        }
        for (b, a) in self.batch.iter().zip(apps).skip(t + 1) {
            let nxt = idle.andnot(b).andnot(a);
            if nxt.is_zero() {
                break;
            }
            idle = nxt;
        }
        Some(idle.bit_length() - 1)
    }

    #[allow(clippy::too_many_arguments)]
    fn within_cap(&self, app: &App<W>, out: &mut [Bits<W>], apps: &[Bits<W>], block: Bits<W>, s: usize, e: usize, stop: usize) -> bool {
        let from = if app.current.is_none() { s.max(1) } else { s };
        for t in from..stop {
            let before = if t > 0 { out[t - 1] } else { app.current.unwrap_or(Bits::ZERO) };
            let excess = (out[t] ^ before).count() - app.swap_cap;
            if excess <= 0 {
                continue;
            }
            let entering = if t > 0 { (out[t].andnot(&before)) & self.idle(apps, block, s, e, t - 1) } else { Bits::ZERO };
            let early = lowest_bits(entering, excess);
            if early.count() < excess || before.count() + excess > app.max_gpus {
                return false;
            }
            if t >= 2 || app.current.is_some() {
                let earlier = if t >= 2 { out[t - 2] } else { app.current.unwrap_or(Bits::ZERO) };
                if ((before | early) ^ earlier).count() > app.swap_cap {
                    return false;
                }
            }
            out[t - 1] = before | early;
        }
        true
    }
}

/// The polished plan: (starts per job position, sets per app) from a finished one.
pub fn polish<const W: usize>(p: &Problem<W>, starts: Starts, sets: Vec<Vec<Bits<W>>>, budget: i64) -> (Starts, Vec<Vec<Bits<W>>>) {
    let mut plan = Plan::new(p, starts, sets, budget);
    let horizon = p.horizon;
    while plan.budget > 0 {
        let mut gains: Vec<(f64, usize)> = Vec::new();
        for &i in &plan.queued {
            let current = plan.starts[i];
            let arrival = p.jobs[i].arrival;
            if arrival >= horizon || current.is_some_and(|c| c.0 <= arrival) {
                continue;
            }
            let gain = plan.value(i, Some(arrival)) - plan.value(i, current.map(|c| c.0));
            gains.push((-gain, i));
        }
        gains.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
        let mut moved = false;
        for (_, i) in gains {
            moved = plan.earlier(i) || plan.eject(i) || moved;
            if plan.budget <= 0 {
                break;
            }
        }
        if !moved {
            break;
        }
    }
    let sets = plan.sets.iter().map(|r| r.as_ref().clone()).collect();
    (plan.starts, sets)
}
