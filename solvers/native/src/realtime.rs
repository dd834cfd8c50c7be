//! Real-time GPU identities around batch work: the Python `realtime.assign_realtime`,
//! `extras.grow_to_demand` and `layouts.app_sets`, step for step.

use crate::bits::Bits;
use crate::model::Problem;

/// An app that batch blocks would push past its swap cap or below its floor at `step`.
pub struct ForcedMove<const W: usize> {
    pub app: usize,
    pub step: usize,
    pub gpus: Bits<W>,
}

/// The n highest set bits of mask (all of them when it has fewer).
pub fn highest_bits<const W: usize>(mut mask: Bits<W>, n: i64) -> Bits<W> {
    let mut out = Bits::ZERO;
    for _ in 0..n.max(0) {
        let len = mask.bit_length();
        if len == 0 {
            break;
        }
        let top = Bits::bit(len - 1);
        out |= top;
        mask = mask.andnot(&top);
    }
    out
}

fn lowest_only<const W: usize>(mask: Bits<W>) -> Bits<W> {
    mask.lowest().map_or(Bits::ZERO, Bits::bit)
}

/// levels[k]: the GPUs of `mask` that stay free of `busy` from step t+1 through t+k.
fn free_levels<const W: usize>(mask: Bits<W>, busy: &[Bits<W>], t: usize) -> Vec<Bits<W>> {
    let mut levels = vec![mask];
    for b in &busy[t + 1..] {
        let next = levels[levels.len() - 1].andnot(b);
        if next.is_zero() {
            break;
        }
        levels.push(next);
    }
    levels
}

/// `need` GPUs of `candidates` that stay free longest after step t (ties: highest index).
fn pick_lasting<const W: usize>(candidates: Bits<W>, busy: &[Bits<W>], t: usize, need: i64) -> Bits<W> {
    if candidates.count() <= need {
        return candidates;
    }
    let mut chosen = Bits::ZERO;
    for level in free_levels(candidates, busy, t).into_iter().rev() {
        chosen |= highest_bits(level.andnot(&chosen), need - chosen.count());
        if chosen.count() >= need {
            break;
        }
    }
    chosen
}

/// Spend spare swap budget moving off GPUs a block takes soon, one GPU (2 swaps) at a time.
fn migrate<const W: usize>(
    mut held: Bits<W>,
    mut avail: Bits<W>,
    busy: &[Bits<W>],
    later: &[Bits<W>],
    t: usize,
    mut spare: i64,
) -> (Bits<W>, Bits<W>) {
    let t_len = busy.len();
    while spare >= 2 && (held & later[t]).any() {
        let Some(until) = (t + 1..t_len).find(|&k| (held & busy[k]).any()) else { break };
        let threatened = held & busy[until];
        let mut outlasting = avail;
        for b in &busy[t + 1..=until] {
            outlasting = outlasting.andnot(b);
        }
        if outlasting.is_zero() {
            break;
        }
        let leave = lowest_only(threatened);
        let enter = pick_lasting(outlasting, busy, t, 1);
        held = held.andnot(&leave) | enter;
        avail = avail.andnot(&enter) | leave;
        spare -= 2;
    }
    (held, avail)
}

fn record<const W: usize>(found: &mut Vec<ForcedMove<W>>, mv: ForcedMove<W>) {
    if found.iter().all(|m| m.app != mv.app) {
        found.push(mv);
    }
}

/// GPU sets per step for every app around the batch occupancy `busy`, and the forced moves
/// (see the Python `assign_realtime`); apps in `fixed` keep those sets.
pub fn assign_realtime<const W: usize>(
    problem: &Problem<W>,
    curves: &[Vec<i64>],
    busy: &[Bits<W>],
    strict: bool,
    fixed: &[(usize, Vec<Bits<W>>)],
) -> (Vec<Vec<Bits<W>>>, Vec<ForcedMove<W>>) {
    let (t_len, apps) = (problem.horizon, &problem.apps);
    let mut homes = Bits::ZERO;
    for (_, masks) in fixed {
        for m in masks {
            homes |= *m;
        }
    }
    let busy: Vec<Bits<W>> = busy.iter().map(|b| *b | homes).collect();
    let is_fixed = |i: usize| fixed.iter().any(|(f, _)| *f == i);
    let mut order: Vec<usize> = (0..apps.len()).filter(|&i| !is_fixed(i)).collect();
    order.sort_by(|&a, &b| apps[b].priority.total_cmp(&apps[a].priority).then(a.cmp(&b)));
    let mut sets: Vec<Vec<Bits<W>>> = vec![vec![Bits::ZERO; t_len]; apps.len()];
    for (i, masks) in fixed {
        sets[*i] = masks.clone();
    }
    let mut found = Vec::new();
    let mut later = vec![Bits::ZERO; t_len];
    for t in (0..t_len.saturating_sub(1)).rev() {
        later[t] = later[t + 1] | busy[t + 1];
    }
    for t in 0..t_len {
        let free = problem.full.andnot(&busy[t]);
        let mut avail = free;
        let mut wants: Vec<(usize, i64, Bits<W>)> = Vec::new();
        for &i in &order {
            let app = &apps[i];
            let prev = if t > 0 { Some(sets[i][t - 1]) } else { app.current };
            let target = curves[i][t];
            let Some(prev) = prev else {
                wants.push((i, target, Bits::ZERO));
                continue;
            };
            let kept = prev & free;
            if kept.count() >= target {
                sets[i][t] = pick_lasting(kept, &busy, t, target);
                avail = avail.andnot(&sets[i][t]);
                continue;
            }
            let forced = prev.andnot(&free);
            let room = app.swap_cap - forced.count();
            if room < 0 || (strict && forced.any() && kept.count() + room < target) {
                record(&mut found, ForcedMove { app: i, step: t, gpus: forced });
            }
            sets[i][t] = kept;
            avail = avail.andnot(&kept);
            wants.push((i, (target - kept.count()).min(room.max(0)), forced));
        }
        for (i, need, forced) in wants {
            if need > 0 {
                let pick = pick_lasting(avail, &busy, t, need);
                sets[i][t] |= pick;
                avail = avail.andnot(&pick);
            }
            if sets[i][t].count() < apps[i].min_gpus {
                record(&mut found, ForcedMove { app: i, step: t, gpus: forced });
            }
        }
        for &i in &order {
            let prev = if t > 0 { Some(sets[i][t - 1]) } else { apps[i].current };
            if let Some(prev) = prev {
                let spare = apps[i].swap_cap - (sets[i][t] ^ prev).count();
                let (held, left) = migrate(sets[i][t], avail, &busy, &later, t, spare);
                sets[i][t] = held;
                avail = left;
            }
        }
    }
    (sets, found)
}

/// Each app (most valuable first) grows its legal sets toward `curves` with the GPUs left
/// around `batch_busy`, within its swap budget and its ceiling (see the Python `grow_to_demand`).
pub fn grow_to_demand<const W: usize>(
    problem: &Problem<W>,
    floor_sets: &[Vec<Bits<W>>],
    batch_busy: &[Bits<W>],
    curves: &[Vec<i64>],
) -> Vec<Vec<Bits<W>>> {
    let (t_len, apps) = (problem.horizon, &problem.apps);
    let mut taken = batch_busy.to_vec();
    for masks in floor_sets {
        for (t, m) in masks.iter().enumerate() {
            taken[t] |= *m;
        }
    }
    let mut out = floor_sets.to_vec();
    let mut by_worth: Vec<usize> = (0..apps.len()).collect();
    by_worth.sort_by(|&a, &b| apps[b].priority.total_cmp(&apps[a].priority).then(a.cmp(&b)));
    for k in by_worth {
        let app = &apps[k];
        let sets = &mut out[k];
        let before: Vec<Option<Bits<W>>> = (0..t_len).map(|t| if t == 0 { app.current } else { Some(sets[t - 1]) }).collect();
        let mut used: Vec<i64> = (0..t_len).map(|t| before[t].map_or(0, |b| (sets[t] ^ b).count())).collect();
        let budget: Vec<i64> =
            (0..t_len).map(|t| if before[t].is_some() { app.swap_cap } else { problem.gpus as i64 }).collect();
        let mut extras = vec![Bits::<W>::ZERO; t_len];
        // GPUs the app holds at each step (its set and its extras), and from each step the first
        // at which it holds its ceiling (see the Python `_first_full`, `_now_full`)
        let mut held: Vec<i64> = sets.iter().map(|m| m.count()).collect();
        let mut full = first_full(&held, app.max_gpus);
        let until = |g: usize, t: usize| (t..t_len).find(|&u| taken[u].test(g)).unwrap_or(t_len);
        let claim = |g: usize,
                     t: usize,
                     kept: bool,
                     used: &mut Vec<i64>,
                     extras: &mut Vec<Bits<W>>,
                     held: &mut Vec<i64>,
                     full: &mut Vec<usize>| {
            let r = until(g, t).min(full[t]);
            let leave = r < t_len && used[r] >= budget[r];
            if leave || (!kept && used[t] >= budget[t]) {
                return;
            }
            used[t] += if kept { -1 } else { 1 };
            if r < t_len {
                used[r] += 1;
            }
            let bit = Bits::bit(g);
            for u in t..r {
                extras[u] |= bit;
                held[u] += 1;
                if held[u] == app.max_gpus {
                    now_full(full, u);
                }
            }
        };
        if let Some(current) = app.current.filter(|c| c.any()) {
            let mut mine: Vec<usize> = current.andnot(&sets[0]).andnot(&taken[0]).ones().collect();
            mine.sort_by_key(|&g| (std::cmp::Reverse(until(g, 0)), g));
            for g in mine {
                if held[0] >= curves[k][0] {
                    break;
                }
                claim(g, 0, true, &mut used, &mut extras, &mut held, &mut full);
            }
        }
        for t in 0..t_len {
            if held[t] >= curves[k][t] || used[t] >= budget[t] {
                continue;
            }
            let free = problem.full.andnot(&taken[t]).andnot(&sets[t]).andnot(&extras[t]);
            let mut below = Bits::ZERO;
            'levels: for level in free_levels(free, &taken, t).into_iter().rev() {
                for g in level.andnot(&below).ones() {
                    if held[t] >= curves[k][t] || used[t] >= budget[t] {
                        break 'levels;
                    }
                    claim(g, t, false, &mut used, &mut extras, &mut held, &mut full);
                }
                below |= level;
            }
        }
        for t in 0..t_len {
            sets[t] |= extras[t];
            taken[t] |= sets[t];
        }
    }
    out
}

/// From each step, the first step at which `held` reaches `ceiling` (its length: none).
fn first_full(held: &[i64], ceiling: i64) -> Vec<usize> {
    let mut out = vec![held.len(); held.len()];
    let mut first = held.len();
    for u in (0..held.len()).rev() {
        if held[u] >= ceiling {
            first = u;
        }
        out[u] = first;
    }
    out
}

/// `first_full`'s answers once step u reaches the ceiling (holdings only grow).
fn now_full(full: &mut [usize], u: usize) {
    for v in (0..=u).rev() {
        if full[v] <= u {
            break;
        }
        full[v] = u;
    }
}

/// n GPUs of `candidates`, one at a time, each in the smallest aligned block that already holds
/// an occupied GPU; the highest index among equals (see the Python `nest_picks`), in the order
/// picked.
pub fn nest_picks<const W: usize>(problem: &Problem<W>, mut occupied: Bits<W>, mut candidates: Bits<W>, n: i64) -> Vec<usize> {
    let mut out = Vec::new();
    for _ in 0..n.max(0) {
        if candidates.is_zero() {
            break;
        }
        let (mut pick, mut touched) = (candidates, occupied);
        for (low, high, half) in &problem.buddy_halves {
            touched |= (touched & *low).shl(*half) | (touched & *high).shr(*half);
            let inside = candidates & touched;
            if inside.any() {
                pick = inside;
                break;
            }
        }
        let g = pick.bit_length() - 1;
        out.push(g);
        occupied |= Bits::bit(g);
        candidates = candidates.andnot(&Bits::bit(g));
    }
    out
}

fn nest_mask<const W: usize>(problem: &Problem<W>, occupied: Bits<W>, candidates: Bits<W>, n: i64) -> Bits<W> {
    let mut out = Bits::ZERO;
    for g in nest_picks(problem, occupied, candidates, n) {
        out |= Bits::bit(g);
    }
    out
}

/// Per dynamic app, its GPU set at each step at the top of the pool or nested (see the Python
/// `app_sets`); homed apps (`homes`) keep theirs.
pub fn app_sets<const W: usize>(
    problem: &Problem<W>,
    curves: &[Vec<i64>],
    homes: &[(usize, Vec<Bits<W>>)],
    nest: bool,
) -> Vec<Vec<Bits<W>>> {
    let (t_len, apps) = (problem.horizon, &problem.apps);
    let mut sets: Vec<Vec<Bits<W>>> = vec![vec![Bits::ZERO; t_len]; apps.len()];
    let mut homed = Bits::ZERO;
    for (i, masks) in homes {
        sets[*i] = masks.clone();
        for m in masks {
            homed |= *m;
        }
    }
    let dynamic: Vec<usize> = (0..apps.len()).filter(|i| !homes.iter().any(|(h, _)| h == i)).collect();
    let mut held = vec![Bits::<W>::ZERO; apps.len()];
    for t in 0..t_len {
        let mut free = problem.full.andnot(&problem.running_busy[t]).andnot(&homed);
        let prev: Vec<Option<Bits<W>>> =
            (0..apps.len()).map(|i| if t == 0 { apps[i].current } else { Some(sets[i][t - 1]) }).collect();
        for &i in &dynamic {
            let mut keep = prev[i].unwrap_or(Bits::ZERO) & free;
            let mut extra = keep.count() - curves[i][t];
            while extra > 0 {
                keep = keep.andnot(&lowest_only(keep));
                extra -= 1;
            }
            held[i] = keep;
            free = free.andnot(&keep);
        }
        for &i in &dynamic {
            let need = curves[i][t] - held[i].count();
            if need > 0 {
                held[i] |= if nest {
                    nest_mask(problem, problem.full.andnot(&free), free, need)
                } else {
                    highest_bits(free, need)
                };
                free = free.andnot(&held[i]);
            }
        }
        for &i in &dynamic {
            if let (Some(p), false) = (prev[i], nest) {
                let mut spare = apps[i].swap_cap - (held[i] ^ p).count();
                while spare >= 2 && held[i].any() && free.bit_length() > held[i].lowest().map_or(0, |l| l + 1) {
                    let low = lowest_only(held[i]);
                    let high = Bits::bit(free.bit_length() - 1);
                    held[i] = held[i].andnot(&low) | high;
                    free = free.andnot(&high) | low;
                    spare -= 2;
                }
            }
            sets[i][t] = held[i];
        }
    }
    sets
}
