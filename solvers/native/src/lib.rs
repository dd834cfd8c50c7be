//! `gpualloc_native`: the heuristic compiled (its composition, block search, packing,
//! occupancy, trades, the search with its kicks, the greedy, the polish), the Python
//! reference's plans exactly. Python calls it once a solve (`heuristic`), or for the greedy
//! plan or the polish alone. GPU sets are arrays of 64-bit words, sized to the pool: one of 1
//! to 64 words (64 to 4,096 GPUs), each width compiled on its own.

// `is_multiple_of` is newer than some toolchains that build this crate (Debian's).
#![allow(clippy::manual_is_multiple_of)]

mod bits;
mod compose;
mod greedy;
mod model;
mod mt;
mod packing;
mod polish;
mod realtime;
mod search;
mod trade;

use std::rc::Rc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use bits::Bits;
use model::{App, Job, Problem};

type Sets = Vec<Vec<Vec<u8>>>; // per app, per step: a GPU set

/// What a problem of one width offers the Python side.
trait Width {
    fn polish(&self, starts: polish::Starts, sets: &Sets, budget: i64) -> (polish::Starts, Sets);
    fn greedy(&self, order: &[usize], floors: &[Vec<i64>], targets: &[Vec<i64>]) -> (greedy::Placed, Sets);
    fn heuristic(&self, knobs: &compose::Knobs) -> Result<(polish::Starts, Sets), String>;
}

fn masks<const W: usize>(raw: &[Vec<u8>]) -> Vec<Bits<W>> {
    raw.iter().map(|b| Bits::from_le_bytes(b)).collect()
}

fn raw<const W: usize>(sets: &[Vec<Bits<W>>]) -> Sets {
    sets.iter().map(|row| row.iter().map(|m| m.to_le_bytes()).collect()).collect()
}

impl<const W: usize> Width for Rc<Problem<W>> {
    fn polish(&self, starts: polish::Starts, sets: &Sets, budget: i64) -> (polish::Starts, Sets) {
        let sets: Vec<Vec<Bits<W>>> = sets.iter().map(|rows| masks(rows)).collect();
        let (starts, sets) = polish::polish(self, starts, sets, budget);
        (starts, raw(&sets))
    }

    fn greedy(&self, order: &[usize], floors: &[Vec<i64>], targets: &[Vec<i64>]) -> (greedy::Placed, Sets) {
        let (placed, sets) = greedy::greedy(self, order, floors, targets);
        (placed, raw(&sets))
    }

    fn heuristic(&self, knobs: &compose::Knobs) -> Result<(polish::Starts, Sets), String> {
        let (starts, sets) = compose::heuristic(self, knobs)?;
        Ok((starts, raw(&sets)))
    }
}

type JobIn<'py> = (f64, usize, usize, usize, Option<(Bound<'py, PyBytes>, usize, usize)>);
/// (priority, min_gpus, max_gpus, swap_cap, current GPUs or None, demand per step)
type AppIn<'py> = (f64, i64, i64, i64, Option<Bound<'py, PyBytes>>, Vec<i64>);

/// A problem as the Python side states it, before its GPU sets are sized to a width.
struct ProblemIn<'a, 'py> {
    gpus: usize,
    node_size: usize,
    horizon: usize,
    cum_weight: Vec<f64>,
    weights: Vec<f64>,
    penalty: f64,
    jobs: &'a [JobIn<'py>],
    apps: &'a [AppIn<'py>],
    running_busy: &'a [Bound<'py, PyBytes>],
    completion: Option<(f64, usize)>,
}

fn compile<const W: usize>(spec: ProblemIn<'_, '_>) -> Box<dyn Width> {
    let apps = spec
        .apps
        .iter()
        .map(|(priority, min_gpus, max_gpus, swap_cap, current, demand)| App {
            priority: *priority,
            min_gpus: *min_gpus,
            max_gpus: *max_gpus,
            swap_cap: *swap_cap,
            current: current.as_ref().map(|m| Bits::from_le_bytes(m.as_bytes())),
            demand: demand.clone(),
        })
        .collect();
    let jobs = spec
        .jobs
        .iter()
        .map(|(priority, gpus, duration, arrival, running)| Job {
            priority: *priority,
            gpus: *gpus,
            duration: *duration,
            arrival: *arrival,
            running: running.as_ref().map(|(m, s, r)| (Bits::from_le_bytes(m.as_bytes()), *s, *r)),
        })
        .collect();
    let busy = spec.running_busy.iter().map(|b| Bits::from_le_bytes(b.as_bytes())).collect();
    Box::new(Rc::new(Problem::<W>::new(
        spec.gpus,
        spec.node_size,
        spec.horizon,
        spec.cum_weight,
        spec.weights,
        spec.penalty,
        jobs,
        apps,
        busy,
        spec.completion,
    )))
}

/// The problem's batch jobs (by position), pool and weights, compiled once per solve.
#[pyclass(module = "gpualloc_native", unsendable)]
struct NativeProblem {
    inner: Box<dyn Width>,
    jobs: usize,
    apps: usize,
    horizon: usize,
    gpus: usize,
}

#[pymethods]
impl NativeProblem {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        gpus: usize,
        node_size: usize,
        horizon: usize,
        cum_weight: Vec<f64>,
        weights: Vec<f64>,
        penalty: f64,
        jobs: Vec<JobIn<'_>>,
        apps: Vec<AppIn<'_>>,
        running_busy: Vec<Bound<'_, PyBytes>>,
        completion: Option<(f64, usize)>,
    ) -> PyResult<Self> {
        if node_size == 0 || cum_weight.len() != horizon + 1 || weights.len() != horizon || running_busy.len() != horizon {
            return Err(PyValueError::new_err("node_size, cum_weight, weights or running_busy do not fit the horizon"));
        }
        if apps.iter().any(|a| a.5.len() != horizon) {
            return Err(PyValueError::new_err("apps: a demand needs one value a step"));
        }
        let (n_jobs, n_apps) = (jobs.len(), apps.len());
        let spec = ProblemIn {
            gpus,
            node_size,
            horizon,
            cum_weight,
            weights,
            penalty,
            jobs: &jobs,
            apps: &apps,
            running_busy: &running_busy,
            completion,
        };
        let inner = match gpus.div_ceil(64) {
            0..=1 => compile::<1>(spec),
            2 => compile::<2>(spec),
            3..=4 => compile::<4>(spec),
            5..=8 => compile::<8>(spec),
            9..=16 => compile::<16>(spec),
            17..=32 => compile::<32>(spec),
            33..=64 => compile::<64>(spec),
            _ => return Err(PyValueError::new_err(format!("gpus: {gpus} is above the 4096 a native problem holds"))),
        };
        Ok(NativeProblem { inner, jobs: n_jobs, apps: n_apps, horizon, gpus })
    }

    /// A finished plan polished (batch jobs earlier, apps migrating off their blocks):
    /// `starts` per job position, (start step, first GPU of its block) or None; `sets` per app,
    /// a GPU set per step. Returns both, polished.
    #[allow(clippy::type_complexity)]
    fn polish<'py>(
        &self,
        py: Python<'py>,
        starts: Vec<Option<(usize, usize)>>,
        sets: Vec<Vec<Bound<'py, PyBytes>>>,
        budget: i64,
    ) -> PyResult<(Vec<Option<(usize, usize)>>, Vec<Vec<Bound<'py, PyBytes>>>)> {
        if starts.len() != self.jobs || sets.len() != self.apps || sets.iter().any(|r| r.len() != self.horizon) {
            return Err(PyValueError::new_err("starts, sets: one entry a job position, a GPU set a step for every app"));
        }
        if starts.iter().flatten().any(|&(s, first)| s >= self.horizon || first >= self.gpus) {
            return Err(PyValueError::new_err("starts: a start past the horizon or a GPU past the pool"));
        }
        let raw_sets: Sets = sets.iter().map(|r| bytes_of(r)).collect();
        let (starts, sets) = self.inner.polish(starts, &raw_sets, budget);
        Ok((starts, sets_py(py, sets)))
    }

    /// The greedy plan: real-time `floors` first, the jobs of `order` (positions) each at its
    /// earliest legal block, the apps grown toward `targets`. Returns the jobs placed
    /// (position, start step, first GPU) and every app's GPU set per step.
    #[allow(clippy::type_complexity)]
    fn greedy<'py>(
        &self,
        py: Python<'py>,
        order: Vec<usize>,
        floors: Vec<Vec<i64>>,
        targets: Vec<Vec<i64>>,
    ) -> PyResult<(greedy::Placed, Vec<Vec<Bound<'py, PyBytes>>>)> {
        self.check_curves(&floors)?;
        self.check_curves(&targets)?;
        if let Some(p) = order.iter().find(|&&p| p >= self.jobs) {
            return Err(PyValueError::new_err(format!("order: job position {p} is past the {} jobs", self.jobs)));
        }
        let (placed, sets) = self.inner.greedy(&order, &floors, &targets);
        Ok((placed, sets_py(py, sets)))
    }

    /// The whole heuristic: `budget` and `polish_budget` are the work budgets at the solve's
    /// effort, `screened`, `searched`, `reserving_repairs` and `home_cap` the composition's
    /// constants. Returns per job position (start step, first GPU) or None for each queued
    /// job, and every app's GPU set per step.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn heuristic<'py>(
        &self,
        py: Python<'py>,
        budget: i64,
        polish_budget: i64,
        screened: usize,
        searched: usize,
        reserving_repairs: usize,
        home_cap: i64,
    ) -> PyResult<(polish::Starts, Vec<Vec<Bound<'py, PyBytes>>>)> {
        let knobs = compose::Knobs { budget, polish_budget, screened, searched, reserving_repairs, home_cap };
        let (starts, sets) = self.inner.heuristic(&knobs).map_err(PyValueError::new_err)?;
        Ok((starts, sets_py(py, sets)))
    }
}

fn bytes_of(raw: &[Bound<'_, PyBytes>]) -> Vec<Vec<u8>> {
    raw.iter().map(|b| b.as_bytes().to_vec()).collect()
}

fn sets_py(py: Python<'_>, sets: Sets) -> Vec<Vec<Bound<'_, PyBytes>>> {
    sets.iter().map(|row| row.iter().map(|m| PyBytes::new(py, m)).collect()).collect()
}

impl NativeProblem {
    fn check_curves(&self, curves: &[Vec<i64>]) -> PyResult<()> {
        if curves.len() != self.apps || curves.iter().any(|c| c.len() != self.horizon) {
            return Err(PyValueError::new_err("floors, targets: one value a step for every app"));
        }
        Ok(())
    }
}

#[pymodule]
fn gpualloc_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeProblem>()?;
    Ok(())
}
