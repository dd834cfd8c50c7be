//! The heuristic's composition compiled: the Python `compose.compose` step for step (curve
//! sets, layouts, screening, finishing with repairs, the local search, the greedy, the polish),
//! so a solve crosses to Python once. Floats are summed and compared in the Python order, and
//! sorts break ties as Python's stable sorts do, so the plans are the reference's.

use std::rc::Rc;

use crate::bits::Bits;
use crate::greedy::greedy;
use crate::model::{Problem, Reservation, Trade};
use crate::packing::{pack, PackState};
use crate::polish::{polish, Starts};
use crate::realtime::{app_sets, assign_realtime, grow_to_demand, highest_bits, nest_picks};
use crate::search::Search;

/// The Python side's counts (one module holds the defaults): work budgets already scaled by
/// the effort, and the composition's constants.
pub struct Knobs {
    pub budget: i64,
    pub polish_budget: i64,
    pub screened: usize,
    pub searched: usize,
    pub reserving_repairs: usize,
    pub home_cap: i64,
}

type Curves = Vec<Vec<i64>>;
type Sets<const W: usize> = Vec<Vec<Bits<W>>>;

/// Per app: its fixed GPU set per step (homed apps, or every app in a fixed-sets layout).
type Fixed<const W: usize> = Vec<Option<Vec<Bits<W>>>>;

fn floor_at<const W: usize>(p: &Problem<W>, a: usize, t: usize) -> i64 {
    let app = &p.apps[a];
    match app.current {
        None => app.min_gpus,
        Some(c) => app.min_gpus.max(c.count() - (t as i64 + 1) * app.swap_cap),
    }
}

fn ceiling_at<const W: usize>(p: &Problem<W>, a: usize, t: usize) -> i64 {
    let app = &p.apps[a];
    match app.current {
        None => app.max_gpus,
        Some(c) => app.max_gpus.min(c.count() + (t as i64 + 1) * app.swap_cap),
    }
}

/// The Python `floor_curves`.
pub fn floor_curves<const W: usize>(p: &Problem<W>) -> Curves {
    (0..p.apps.len()).map(|a| (0..p.horizon).map(|t| floor_at(p, a, t)).collect()).collect()
}

/// The Python `target_curves`: demand within floors and ceilings, ramped within the swap cap,
/// lowered to fit the pool lowest priority first.
pub fn target_curves<const W: usize>(p: &Problem<W>) -> Curves {
    let mut curves: Curves = Vec::new();
    for (a, app) in p.apps.iter().enumerate() {
        let mut out: Vec<i64> =
            app.demand.iter().enumerate().map(|(t, &d)| d.min(app.max_gpus).max(floor_at(p, a, t))).collect();
        for t in 1..out.len() {
            out[t] = out[t].max(out[t - 1] - app.swap_cap);
        }
        for t in (0..out.len().saturating_sub(1)).rev() {
            out[t] = out[t].max(out[t + 1] - app.swap_cap);
        }
        curves.push((0..p.horizon).map(|t| out[t].min(ceiling_at(p, a, t))).collect());
    }
    let mut by_priority: Vec<usize> = (0..p.apps.len()).collect();
    by_priority.sort_by(|&x, &y| p.apps[x].priority.partial_cmp(&p.apps[y].priority).unwrap().then(y.cmp(&x)));
    for t in 0..p.horizon {
        let room = p.gpus as i64 - p.running_busy[t].count();
        let mut excess: i64 = curves.iter().map(|c| c[t]).sum::<i64>() - room;
        for &a in &by_priority {
            if excess <= 0 {
                break;
            }
            let cut = excess.min(curves[a][t] - floor_at(p, a, t));
            if cut <= 0 {
                continue;
            }
            let level = curves[a][t] - cut;
            let cap = p.apps[a].swap_cap;
            for (u, c) in curves[a].iter_mut().enumerate() {
                *c = (*c).min(level + (u as i64 - t as i64).abs() * cap);
            }
            excess -= cut;
        }
    }
    curves
}

/// The Python `value_at_arrival`.
fn value_at_arrival<const W: usize>(p: &Problem<W>, pos: usize) -> f64 {
    if p.jobs[pos].arrival < p.horizon {
        p.start_value(pos, p.jobs[pos].arrival)
    } else {
        0.0
    }
}

fn cmp_f(a: f64, b: f64) -> std::cmp::Ordering {
    a.partial_cmp(&b).unwrap()
}

/// The Python `greedy_order`: the queue by priority, highest first; ties by arrival, then order.
fn greedy_order<const W: usize>(p: &Problem<W>, queue: &[usize]) -> Vec<usize> {
    let j = |pos: usize| &p.jobs[pos];
    let mut order = queue.to_vec();
    order.sort_by(|&x, &y| cmp_f(-j(x).priority, -j(y).priority).then(j(x).arrival.cmp(&j(y).arrival)).then(x.cmp(&y)));
    order
}

/// The Python `_seed_orders` (job positions; a position is the job's order in the problem; the
/// `completion` value model's orders where it is the problem's);
/// `potential` is each job's value at its arrival.
fn seed_orders<const W: usize>(p: &Problem<W>, queue: &[usize], potential: &[f64]) -> Vec<Vec<usize>> {
    let j = |pos: usize| &p.jobs[pos];
    let mut out: Vec<Vec<usize>> = Vec::new();
    for key in 0..4 {
        let order = if key == 2 {
            greedy_order(p, queue)
        } else {
            let mut order = queue.to_vec();
            let area = |pos: usize| j(pos).gpus * j(pos).duration;
            order.sort_by(|&x, &y| match (key, p.completion.is_some()) {
                (0, true) => cmp_f(-potential[x] / area(x) as f64, -potential[y] / area(y) as f64).then(x.cmp(&y)),
                (1, true) => cmp_f(-j(x).priority, -j(y).priority)
                    .then(area(x).cmp(&area(y)))
                    .then(j(x).arrival.cmp(&j(y).arrival))
                    .then(x.cmp(&y)),
                (_, true) => cmp_f(-j(x).priority, -j(y).priority)
                    .then(j(x).duration.cmp(&j(y).duration))
                    .then(j(x).gpus.cmp(&j(y).gpus))
                    .then(x.cmp(&y)),
                (0, false) => cmp_f(-potential[x], -potential[y]).then(x.cmp(&y)),
                (1, false) => cmp_f(-j(x).priority, -j(y).priority)
                    .then(((j(y).gpus * j(y).duration) as i64).cmp(&((j(x).gpus * j(x).duration) as i64)))
                    .then(j(x).arrival.cmp(&j(y).arrival))
                    .then(x.cmp(&y)),
                (_, false) => cmp_f(-(j(x).priority * j(x).gpus as f64), -(j(y).priority * j(y).gpus as f64))
                    .then(j(y).duration.cmp(&j(x).duration))
                    .then(x.cmp(&y)),
            });
            order
        };
        if !out.contains(&order) {
            out.push(order);
        }
    }
    out
}

/// The Python `curve_sets`: (curves, the target when they hold some app below it).
fn curve_sets<const W: usize>(p: &Problem<W>, queue: &[usize], target: &Curves, floors: &Curves) -> Vec<(Curves, Option<Curves>)> {
    let mut out = vec![(target.clone(), None)];
    if queue.is_empty() || p.apps.is_empty() {
        return out;
    }
    let top = queue.iter().map(|&q| p.jobs[q].priority).fold(f64::NEG_INFINITY, f64::max);
    let w = &p.weights;
    let mut worth = Vec::new();
    for (a, app) in p.apps.iter().enumerate() {
        let (curve, floor) = (&target[a], &floors[a]);
        let mut taken = 0.0;
        let mut avoided = 0.0;
        for t in 0..p.horizon {
            taken += w[t] * (curve[t] - floor[t]) as f64;
        }
        for t in 0..p.horizon {
            avoided += w[t] * (curve[t].min(app.demand[t]) - floor[t]).max(0) as f64;
        }
        worth.push(if taken > 0.0 { p.penalty * app.priority * avoided / taken } else { f64::INFINITY });
    }
    let cheap: Vec<usize> = (0..worth.len()).filter(|&a| worth[a] < top).collect();
    let mut curves = target.clone();
    for &a in &cheap {
        curves[a] = floors[a].clone();
    }
    if !cheap.is_empty() {
        out.push((curves, Some(target.clone())));
    }
    if cheap.len() < worth.len() && floors != target {
        out.push((floors.clone(), Some(target.clone())));
    }
    out
}

/// Real-time curves and what they ask of batch work under one layout (the Python `Layout`).
struct Layout<const W: usize> {
    curves: Curves,
    reservation: Reservation<W>,
    fixed: Fixed<W>,
    max_repairs: Option<usize>,
    lowered: Option<Curves>,
}

/// The apps that have fixed sets, as (app index, sets), lowest index first.
fn listed<const W: usize>(fixed: &Fixed<W>) -> Vec<(usize, Vec<Bits<W>>)> {
    fixed.iter().enumerate().filter_map(|(a, f)| f.as_ref().map(|m| (a, m.clone()))).collect()
}

fn mask_of<const W: usize>(gpus: &[usize]) -> Bits<W> {
    let mut out = Bits::ZERO;
    for &g in gpus {
        out |= Bits::bit(g);
    }
    out
}

/// The Python `_longest_run`.
fn longest_run<const W: usize>(p: &Problem<W>, free: Bits<W>) -> usize {
    if free.is_zero() {
        return 0;
    }
    let last = p.node_starts.shr(1) | Bits::bit(p.gpus - 1);
    let mut length = 1;
    let mut run = (free & free.shr(1)).andnot(&last);
    while run.any() {
        length += 1;
        run &= run.shr(1);
    }
    length
}

/// The Python `_homes`: per app that cannot change its set, its GPU set per step.
fn homes<const W: usize>(p: &Problem<W>, curves: &Curves, home_cap: i64) -> Fixed<W> {
    let mut kept = Bits::ZERO;
    for app in &p.apps {
        kept |= app.current.unwrap_or(Bits::ZERO);
    }
    let mut claimed = kept;
    for b in &p.running_busy {
        claimed |= *b;
    }
    let mut out: Fixed<W> = vec![None; p.apps.len()];
    let mut any = false;
    for (a, app) in p.apps.iter().enumerate() {
        if app.swap_cap > home_cap {
            continue;
        }
        let own: Vec<usize> = app.current.unwrap_or(Bits::ZERO).ones().collect();
        let need = curves[a].iter().copied().max().unwrap_or(0) - own.len() as i64;
        let unclaimed = p.full.andnot(&claimed);
        if need > unclaimed.count() {
            continue;
        }
        let ends: Vec<Vec<usize>> = if need > 0 {
            let mut high: Vec<usize> = highest_bits(unclaimed, need).ones().collect();
            high.reverse();
            let low: Vec<usize> = unclaimed.ones().take(need as usize).collect();
            vec![nest_picks(p, claimed, unclaimed, need), high, low]
        } else {
            vec![Vec::new()]
        };
        let mut extra = &ends[0];
        let mut best = longest_run(p, p.full.andnot(&kept).andnot(&mask_of(extra)));
        for e in &ends[1..] {
            let run = longest_run(p, p.full.andnot(&kept).andnot(&mask_of(e)));
            if run > best {
                best = run;
                extra = e;
            }
        }
        let order: Vec<usize> = own.iter().chain(extra.iter()).copied().collect();
        let m = mask_of(&order);
        claimed |= m;
        kept |= m;
        out[a] = Some(curves[a].iter().map(|&c| mask_of(&order[..(c.max(0) as usize).min(order.len())])).collect());
        any = true;
    }
    if any && homes_fit(p, curves, &out) {
        out
    } else {
        vec![None; p.apps.len()]
    }
}

/// The Python `_homes_fit`.
fn homes_fit<const W: usize>(p: &Problem<W>, curves: &Curves, homes: &Fixed<W>) -> bool {
    let mut homed = Bits::ZERO;
    for masks in homes.iter().flatten() {
        for m in masks {
            homed |= *m;
        }
    }
    (0..p.horizon).all(|t| {
        let dynamic: i64 = (0..curves.len()).filter(|&a| homes[a].is_none()).map(|a| curves[a][t]).sum();
        dynamic + (p.running_busy[t] | homed).count() <= p.gpus as i64
    })
}

/// The Python `_pinned`.
fn pinned<const W: usize>(p: &Problem<W>, homes: &Fixed<W>) -> Sets<W> {
    p.apps
        .iter()
        .enumerate()
        .map(|(a, app)| match &homes[a] {
            Some(masks) => masks.clone(),
            None => {
                let cur = app.current.unwrap_or(Bits::ZERO);
                let n = cur.count();
                (0..p.horizon)
                    .map(|t| if n - (t as i64 + 1) * app.swap_cap > 0 || t == 0 { cur } else { Bits::ZERO })
                    .collect()
            }
        })
        .collect()
}

/// The Python `Layout.reserving`.
fn reserving<const W: usize>(
    p: &Problem<W>,
    k: &Knobs,
    curves: &Curves,
    lowered: &Option<Curves>,
    homes: &Fixed<W>,
    trade: bool,
    floors: &Curves,
) -> Layout<W> {
    let t_len = p.horizon;
    let pins = pinned(p, homes);
    let counts: Curves = pins.iter().map(|pin| pin.iter().map(|m| m.count()).collect()).collect();
    let (mut zone, mut reserve, mut keep) = (vec![Bits::ZERO; t_len], vec![0i64; t_len], vec![0i64; t_len]);
    for ((c, pin), n) in curves.iter().zip(&pins).zip(&counts) {
        for t in 0..t_len {
            zone[t] |= pin[t];
            reserve[t] += c[t] - n[t].min(c[t]);
            if t > 0 {
                keep[t] += c[t - 1].min(c[t]);
            }
        }
    }
    let deal = if trade && !p.apps.is_empty() {
        let mut fl = floors.clone();
        for (a, h) in homes.iter().enumerate() {
            if h.is_some() {
                fl[a] = curves[a].clone();
            }
        }
        let worth: Vec<f64> = p.apps.iter().map(|app| p.penalty * app.priority).collect();
        let low: Curves = fl.iter().zip(&counts).map(|(f, n)| f.iter().zip(n).map(|(x, y)| *x.max(y)).collect()).collect();
        let mut cheapest: Vec<usize> = (0..worth.len()).collect();
        cheapest.sort_by(|&x, &y| cmp_f(worth[x], worth[y]).then(x.cmp(&y)));
        Some(Trade {
            curves: curves.clone(),
            floors: fl,
            pinned: counts,
            low,
            worth,
            caps: p.apps.iter().map(|app| app.swap_cap).collect(),
            demand: p.apps.iter().map(|app| app.demand.clone()).collect(),
            weights: p.weights.clone(),
            cheapest,
        })
    } else {
        None
    };
    Layout {
        curves: curves.clone(),
        reservation: Reservation { reserve, keep: Some(keep), zone, trade: deal },
        fixed: homes.clone(),
        max_repairs: Some(k.reserving_repairs),
        lowered: lowered.clone(),
    }
}

/// The Python `Layout.fixed_sets`.
fn fixed_sets<const W: usize>(p: &Problem<W>, curves: &Curves, lowered: &Option<Curves>, homes: &Fixed<W>, nest: bool) -> Layout<W> {
    let sets = app_sets(p, curves, &listed(homes), nest);
    let mut zone = vec![Bits::ZERO; p.horizon];
    for masks in &sets {
        for (t, m) in masks.iter().enumerate() {
            zone[t] |= *m;
        }
    }
    Layout {
        curves: curves.clone(),
        reservation: Reservation { reserve: vec![0; p.horizon], keep: None, zone, trade: None },
        fixed: sets.into_iter().map(Some).collect(),
        max_repairs: None,
        lowered: lowered.clone(),
    }
}

/// The Python `_distinct`: layouts asking different things of batch work and of the apps.
fn distinct<const W: usize>(found: Vec<Layout<W>>) -> Vec<Layout<W>> {
    let mut out: Vec<Layout<W>> = Vec::new();
    let keep_of = |l: &Layout<W>| l.reservation.keep.clone().filter(|k| k.iter().any(|&x| x != 0));
    for layout in found {
        let same = out.iter().any(|o| {
            o.reservation.reserve == layout.reservation.reserve
                && keep_of(o) == keep_of(&layout)
                && o.reservation.zone == layout.reservation.zone
                && o.fixed == layout.fixed
                && o.lowered.is_none() == layout.lowered.is_none()
                && o.curves == layout.curves
        });
        if !same {
            out.push(layout);
        }
    }
    out
}

/// A plan: per job position its (start, first GPU) when a queued job is placed, and the apps' sets.
struct Plan<const W: usize> {
    starts: Starts,
    sets: Sets<W>,
}

fn plan_of<const W: usize>(p: &Problem<W>, state: &PackState<W>, sets: Sets<W>) -> Plan<W> {
    let mut starts: Starts = vec![None; p.jobs.len()];
    for (pos, s, mask) in state.placed() {
        if p.jobs[pos].running.is_none() {
            starts[pos] = Some((s, mask.lowest().expect("a block holds a GPU")));
        }
    }
    Plan { starts, sets }
}

/// The Python `_least_valuable_at`.
fn least_valuable_at<const W: usize>(p: &Problem<W>, state: &PackState<W>, step: usize) -> Result<usize, String> {
    let mut start_of: Vec<Option<usize>> = vec![None; p.jobs.len()];
    for (pos, s, _) in state.placed() {
        start_of[pos] = Some(s);
    }
    let mut best: Option<(f64, usize)> = None;
    for (pos, j) in p.jobs.iter().enumerate() {
        if j.running.is_some() {
            continue;
        }
        if let Some(s) = start_of[pos] {
            if s <= step && step < p.end_of(pos, s) {
                let v = j.priority * j.gpus as f64 * j.duration as f64;
                let better = match best {
                    None => true,
                    Some((b, q)) => v < b || (v == b && pos > q),
                };
                if better {
                    best = Some((v, pos));
                }
            }
        }
    }
    best.map(|b| b.1).ok_or_else(|| format!("real-time floors cannot be met at step {step} even without batch work"))
}

/// The Python `_assign_with_repairs`: (state, sets, whether the packing changed), None past
/// the layout's repair rounds.
fn assign_with_repairs<const W: usize>(
    p: &Rc<Problem<W>>,
    layout: &Layout<W>,
    order: &[usize],
    state: PackState<W>,
    strict: bool,
) -> Result<Option<(PackState<W>, Sets<W>, bool)>, String> {
    if layout.fixed.iter().all(|f| f.is_some()) {
        let sets = layout.fixed.iter().map(|f| f.clone().expect("all fixed")).collect();
        return Ok(Some((state, sets, false)));
    }
    let fixed = listed(&layout.fixed);
    let (mut res, mut kept, mut rounds, mut state) = (layout.reservation.clone(), order.to_vec(), 0, state);
    loop {
        let curves: Curves = match &state.curves {
            None => layout.curves.clone(),
            Some(c) => c.iter().map(|r| r.as_ref().clone()).collect(),
        };
        let (sets, forced) = assign_realtime(p, &curves, &state.busy, strict, &fixed);
        if forced.is_empty() {
            return Ok(Some((state, sets, rounds > 0)));
        }
        if let Some(max) = layout.max_repairs {
            if rounds >= max || forced.len() > 2 * max {
                return Ok(None);
            }
        }
        rounds += 1;
        let mut zone = res.zone.clone();
        for mv in &forced {
            if mv.gpus.andnot(&zone[mv.step]).any() {
                zone[mv.step] |= mv.gpus;
            } else {
                let victim = least_valuable_at(p, &state, mv.step)?;
                kept.retain(|&q| q != victim);
            }
        }
        res.zone = zone;
        state = pack(p, &res, &kept);
    }
}

/// The Python `_served`: the plan and its objective.
fn served<const W: usize>(p: &Problem<W>, layout: &Layout<W>, state: &PackState<W>, sets: Sets<W>) -> (Plan<W>, f64) {
    let cut = match &state.curves {
        None => false,
        Some(c) => c.iter().zip(&layout.curves).any(|(x, y)| x.as_ref() != y),
    };
    let sets = if layout.lowered.is_some() || cut {
        grow_to_demand(p, &sets, &state.busy, layout.lowered.as_ref().unwrap_or(&layout.curves))
    } else {
        sets
    };
    let mut penalty = 0.0;
    for (app, masks) in p.apps.iter().zip(&sets) {
        for ((demand, mask), w) in app.demand.iter().zip(masks).zip(&p.weights) {
            let short = demand - mask.count();
            if short > 0 {
                penalty += app.priority * w * short as f64;
            }
        }
    }
    let objective = state.value + state.traded - p.penalty * penalty;
    (plan_of(p, state, sets), objective)
}

/// The Python `_finish`: strictly first, leniently too when that changed the packing.
fn finish<const W: usize>(p: &Rc<Problem<W>>, layout: &Layout<W>, order: &[usize], state: PackState<W>) -> Result<Option<(Plan<W>, f64)>, String> {
    let Some((s_state, s_sets, changed)) = assign_with_repairs(p, layout, order, state.clone(), true)? else {
        return Ok(None);
    };
    let mut best = served(p, layout, &s_state, s_sets);
    if changed {
        if let Some((l_state, l_sets, _)) = assign_with_repairs(p, layout, order, state, false)? {
            let other = served(p, layout, &l_state, l_sets);
            if other.1 > best.1 + 1e-9 {
                best = other;
            }
        }
    }
    Ok(Some(best))
}

/// A layout's best packed seed order, finished into a plan (the Python `_Candidate`).
struct Candidate<const W: usize> {
    objective: f64,
    layout: usize,
    plan: Rc<Plan<W>>,
}

/// The Python `_pack_seeds`.
fn pack_seeds<const W: usize>(
    p: &Rc<Problem<W>>,
    layouts: &[Layout<W>],
    searches: &mut [Search<W>],
    index: usize,
    seeds: &[Vec<usize>],
    prior: Option<Candidate<W>>,
) -> Result<Option<Candidate<W>>, String> {
    let search = &mut searches[index];
    if !search.best_of(seeds) && prior.is_some() {
        return Ok(prior);
    }
    let order = search.order().to_vec();
    Ok(finish(p, &layouts[index], &order, search.state())?
        .map(|(plan, objective)| Candidate { objective, layout: index, plan: Rc::new(plan) }))
}

/// The composition's objective of a plan: the queued jobs' value (in the problem's order)
/// less the real-time shortfall's price; the running jobs add the same to every plan.
fn objective<const W: usize>(p: &Problem<W>, plan: &Plan<W>) -> f64 {
    let mut value = 0.0;
    for (pos, placed) in plan.starts.iter().enumerate() {
        if let Some((s, _)) = placed {
            value += p.start_value(pos, *s);
        }
    }
    let mut penalty = 0.0;
    for (app, masks) in p.apps.iter().zip(&plan.sets) {
        let mut short = 0.0;
        for ((demand, mask), w) in app.demand.iter().zip(masks).zip(&p.weights) {
            short += w * (demand - mask.count().min(*demand)) as f64;
        }
        penalty += app.priority * short;
    }
    value - p.penalty * penalty
}

fn sort_desc<const W: usize>(cands: &mut [Candidate<W>]) {
    cands.sort_by(|a, b| cmp_f(b.objective, a.objective));
}

/// The heuristic's plan (the Python `compose.compose`): per job position the (start, first
/// GPU) of each queued job placed, and every app's GPU set per step.
pub fn heuristic<const W: usize>(p: &Rc<Problem<W>>, k: &Knobs) -> Result<(Starts, Sets<W>), String> {
    let queue: Vec<usize> = (0..p.jobs.len()).filter(|&q| p.jobs[q].running.is_none()).collect();
    let mut potential = vec![0.0; p.jobs.len()];
    for &q in &queue {
        potential[q] = value_at_arrival(p, q);
    }
    let seeds = seed_orders(p, &queue, &potential);
    let (target, floors) = (target_curves(p), floor_curves(p));
    let mut found = Vec::new();
    for (curves, lowered) in curve_sets(p, &queue, &target, &floors) {
        let homes = homes(p, &curves, k.home_cap);
        found.push(reserving(p, k, &curves, &lowered, &homes, lowered.is_none(), &floors));
        found.push(fixed_sets(p, &curves, &lowered, &homes, false));
        if !p.apps.is_empty() {
            found.push(fixed_sets(p, &curves, &lowered, &homes, true));
        }
    }
    let mut found = distinct(found);
    found.truncate(k.screened.max((k.budget / queue.len().max(1) as i64) as usize));
    let mut searches: Vec<Search<W>> =
        found.iter().map(|l| Search::new(p.clone(), l.reservation.clone(), k.budget, potential.clone())).collect();
    let mut best: Vec<Candidate<W>> = Vec::new();
    if found.len() > k.screened {
        let mut screened = Vec::new();
        for i in 0..found.len() {
            if let Some(c) = pack_seeds(p, &found, &mut searches, i, &seeds[..1], None)? {
                screened.push(c);
            }
        }
        sort_desc(&mut screened);
        let mut chosen: Vec<Candidate<W>> = Vec::new();
        let mut lowered_taken = false;
        for (n, c) in screened.into_iter().enumerate() {
            if n < k.screened {
                chosen.push(c);
            } else if !lowered_taken && found[c.layout].lowered.is_none() {
                lowered_taken = true;
                chosen.push(c);
            }
        }
        for c in chosen {
            let index = c.layout;
            if let Some(c) = pack_seeds(p, &found, &mut searches, index, &seeds, Some(c))? {
                best.push(c);
            }
        }
    } else {
        for i in 0..found.len() {
            if let Some(c) = pack_seeds(p, &found, &mut searches, i, &seeds, None)? {
                best.push(c);
            }
        }
    }
    let top = best
        .iter()
        .fold(None::<&Candidate<W>>, |acc, c| match acc {
            Some(a) if a.objective >= c.objective => Some(a),
            _ => Some(c),
        })
        .ok_or("no layout finished a plan")?;
    let (mut objective_found, mut plan) = (top.objective, top.plan.clone());
    let mut firsts: Vec<&Candidate<W>> = best.iter().filter(|c| found[c.layout].lowered.is_none()).collect();
    firsts.sort_by(|a, b| cmp_f(b.objective, a.objective));
    let searched: Vec<usize> = firsts.iter().take(k.searched).map(|c| c.layout).collect();
    for index in searched {
        if searches[index].improve() {
            let order = searches[index].order().to_vec();
            if let Some((finished, obj)) = finish(p, &found[index], &order, searches[index].state())? {
                if obj > objective_found + 1e-9 {
                    objective_found = obj;
                    plan = Rc::new(finished);
                }
            }
        }
    }
    let (placed, sets) = greedy(p, &greedy_order(p, &queue), &floors, &target);
    let mut starts: Starts = vec![None; p.jobs.len()];
    for (pos, s, first) in placed {
        starts[pos] = Some((s, first));
    }
    let greedy_plan = Plan { starts, sets };
    let chosen = if objective(p, &greedy_plan) > objective(p, &plan) + 1e-9 { &greedy_plan } else { plan.as_ref() };
    Ok(polish(p, chosen.starts.clone(), chosen.sets.clone(), k.polish_budget))
}
