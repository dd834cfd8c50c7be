//! `gpualloc_native`: the heuristic's packing and local search compiled (block search,
//! packing, occupancy, trades, the search with its kicks), the Python reference's plans
//! exactly. GPU sets are arrays of 64-bit words, sized to the pool: one of 1 to 64 words
//! (64 to 4,096 GPUs), each width compiled on its own.

mod bits;
mod model;
mod mt;
mod packing;
mod search;
mod trade;

use std::rc::Rc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use bits::Bits;
use model::{Job, Problem, Reservation, Trade};
use packing::{pack, PackState};
use search::Search;

/// (placed (job position, start, GPU bytes), value, busy per step, curves, traded).
type PackingOut = (Vec<(usize, usize, Vec<u8>)>, f64, Vec<Vec<u8>>, Option<Vec<Vec<i64>>>, f64);

fn packing_out<const W: usize>(state: &PackState<W>) -> PackingOut {
    (
        state.placed().into_iter().map(|(pos, s, m)| (pos, s, m.to_le_bytes())).collect(),
        state.value,
        state.busy.iter().map(|m| m.to_le_bytes()).collect(),
        state.curves.as_ref().map(|rows| rows.iter().map(|r| r.as_ref().clone()).collect()),
        state.traded,
    )
}

fn packing_py(py: Python<'_>, out: PackingOut) -> PyResult<Bound<'_, PyAny>> {
    let (placed, value, busy, curves, traded) = out;
    let placed: Vec<(usize, usize, Bound<PyBytes>)> =
        placed.into_iter().map(|(p, s, m)| (p, s, PyBytes::new(py, &m))).collect();
    let busy: Vec<Bound<PyBytes>> = busy.iter().map(|m| PyBytes::new(py, m)).collect();
    (placed, value, busy, curves, traded).into_pyobject(py).map(|t| t.into_any())
}

/// A layout's reservation as the Python side states it (GPU sets as little-endian bytes).
#[pyclass(module = "gpualloc_native", frozen)]
struct NativeReservation {
    reserve: Vec<i64>,
    keep: Option<Vec<i64>>,
    zone: Vec<Vec<u8>>,
    trade: Option<Trade>,
}

#[pymethods]
impl NativeReservation {
    /// `trade`: (curves, floors, pinned, low, worth, caps, demand, weights, cheapest) or None.
    #[new]
    #[allow(clippy::type_complexity)]
    fn new(
        reserve: Vec<i64>,
        keep: Option<Vec<i64>>,
        zone: Vec<Bound<'_, PyBytes>>,
        trade: Option<(
            Vec<Vec<i64>>,
            Vec<Vec<i64>>,
            Vec<Vec<i64>>,
            Vec<Vec<i64>>,
            Vec<f64>,
            Vec<i64>,
            Vec<Vec<i64>>,
            Vec<f64>,
            Vec<usize>,
        )>,
    ) -> Self {
        let trade = trade.map(|(curves, floors, pinned, low, worth, caps, demand, weights, cheapest)| Trade {
            curves,
            floors,
            pinned,
            low,
            worth,
            caps,
            demand,
            weights,
            cheapest,
        });
        NativeReservation { reserve, keep, zone: zone.iter().map(|b| b.as_bytes().to_vec()).collect(), trade }
    }
}

impl NativeReservation {
    fn compiled<const W: usize>(&self) -> Reservation<W> {
        Reservation {
            reserve: self.reserve.clone(),
            keep: self.keep.clone(),
            zone: self.zone.iter().map(|b| Bits::from_le_bytes(b)).collect(),
            trade: self.trade.clone(),
        }
    }
}

/// What a problem of one width offers the Python side.
trait Width {
    fn search(&self, res: &NativeReservation, budget: i64, potential: Vec<f64>) -> Box<dyn SearchApi>;
    fn pack(&self, res: &NativeReservation, order: &[usize]) -> PackingOut;
}

trait SearchApi {
    fn best_of(&mut self, seeds: &[Vec<usize>]) -> bool;
    fn improve(&mut self) -> bool;
    fn order(&self) -> Vec<usize>;
    fn packing(&self) -> PackingOut;
    fn budget(&self) -> i64;
}

impl<const W: usize> Width for Rc<Problem<W>> {
    fn search(&self, res: &NativeReservation, budget: i64, potential: Vec<f64>) -> Box<dyn SearchApi> {
        Box::new(Search::new(self.clone(), res.compiled(), budget, potential))
    }

    fn pack(&self, res: &NativeReservation, order: &[usize]) -> PackingOut {
        packing_out(&pack(self, &res.compiled(), order))
    }
}

impl<const W: usize> SearchApi for Search<W> {
    fn best_of(&mut self, seeds: &[Vec<usize>]) -> bool {
        Search::best_of(self, seeds)
    }
    fn improve(&mut self) -> bool {
        Search::improve(self)
    }
    fn order(&self) -> Vec<usize> {
        Search::order(self).to_vec()
    }
    fn packing(&self) -> PackingOut {
        packing_out(&self.state())
    }
    fn budget(&self) -> i64 {
        self.budget
    }
}

type JobIn<'py> = (f64, usize, usize, usize, Option<(Bound<'py, PyBytes>, usize)>);

fn compile<const W: usize>(
    gpus: usize,
    node_size: usize,
    horizon: usize,
    cum_weight: Vec<f64>,
    jobs: &[JobIn<'_>],
    running_busy: &[Bound<'_, PyBytes>],
) -> Box<dyn Width> {
    let jobs = jobs
        .iter()
        .map(|(priority, gpus, duration, arrival, running)| Job {
            priority: *priority,
            gpus: *gpus,
            duration: *duration,
            arrival: *arrival,
            running: running.as_ref().map(|(m, r)| (Bits::from_le_bytes(m.as_bytes()), *r)),
        })
        .collect();
    let busy = running_busy.iter().map(|b| Bits::from_le_bytes(b.as_bytes())).collect();
    Box::new(Rc::new(Problem::<W>::new(gpus, node_size, horizon, cum_weight, jobs, busy)))
}

/// The problem's batch jobs (by position), pool and weights, compiled once per solve.
#[pyclass(module = "gpualloc_native", unsendable)]
struct NativeProblem {
    inner: Box<dyn Width>,
    jobs: usize,
    horizon: usize,
}

#[pymethods]
impl NativeProblem {
    #[new]
    fn new(
        gpus: usize,
        node_size: usize,
        horizon: usize,
        cum_weight: Vec<f64>,
        jobs: Vec<JobIn<'_>>,
        running_busy: Vec<Bound<'_, PyBytes>>,
    ) -> PyResult<Self> {
        if node_size == 0 || cum_weight.len() != horizon + 1 || running_busy.len() != horizon {
            return Err(PyValueError::new_err("node_size, cum_weight or running_busy do not fit the horizon"));
        }
        let args = (gpus, node_size, horizon, cum_weight, &jobs[..], &running_busy[..]);
        let inner = match gpus.div_ceil(64) {
            0..=1 => compile::<1>(args.0, args.1, args.2, args.3, args.4, args.5),
            2 => compile::<2>(args.0, args.1, args.2, args.3, args.4, args.5),
            3..=4 => compile::<4>(args.0, args.1, args.2, args.3, args.4, args.5),
            5..=8 => compile::<8>(args.0, args.1, args.2, args.3, args.4, args.5),
            9..=16 => compile::<16>(args.0, args.1, args.2, args.3, args.4, args.5),
            17..=32 => compile::<32>(args.0, args.1, args.2, args.3, args.4, args.5),
            33..=64 => compile::<64>(args.0, args.1, args.2, args.3, args.4, args.5),
            _ => return Err(PyValueError::new_err(format!("gpus: {gpus} is above the 4096 a native problem holds"))),
        };
        Ok(NativeProblem { inner, jobs: jobs.len(), horizon })
    }

    /// The packing of `order` (job positions) around `reservation`, from the running jobs on.
    fn pack<'py>(
        &self,
        py: Python<'py>,
        reservation: &NativeReservation,
        order: Vec<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check(reservation, &order)?;
        packing_py(py, self.inner.pack(reservation, &order))
    }
}

impl NativeProblem {
    fn check(&self, res: &NativeReservation, order: &[usize]) -> PyResult<()> {
        if res.reserve.len() != self.horizon || res.zone.len() != self.horizon {
            return Err(PyValueError::new_err("reservation: reserve and zone need one entry a step"));
        }
        if let Some(p) = order.iter().find(|&&p| p >= self.jobs) {
            return Err(PyValueError::new_err(format!("order: job position {p} is past the {} jobs", self.jobs)));
        }
        Ok(())
    }
}

/// Packings of one layout under a work budget: seed orders, then the local search.
#[pyclass(module = "gpualloc_native", unsendable)]
struct NativeSearch {
    inner: Box<dyn SearchApi>,
}

#[pymethods]
impl NativeSearch {
    #[new]
    fn new(problem: &NativeProblem, reservation: &NativeReservation, budget: i64, potential: Vec<f64>) -> PyResult<Self> {
        problem.check(reservation, &[])?;
        if potential.len() != problem.jobs {
            return Err(PyValueError::new_err("potential: one value a job position"));
        }
        Ok(NativeSearch { inner: problem.inner.search(reservation, budget, potential) })
    }

    /// Pack each seed order (job positions) that can beat the best so far; true when the best
    /// changed.
    fn best_of(&mut self, seeds: Vec<Vec<usize>>) -> bool {
        self.inner.best_of(&seeds)
    }

    /// The local search from the best order; true when it found a better one.
    fn improve(&mut self) -> bool {
        self.inner.improve()
    }

    /// The best order so far (job positions).
    fn order(&self) -> Vec<usize> {
        self.inner.order()
    }

    /// The best order's packing.
    fn packing<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        packing_py(py, self.inner.packing())
    }

    #[getter]
    fn budget(&self) -> i64 {
        self.inner.budget()
    }
}

#[pymodule]
fn gpualloc_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeProblem>()?;
    m.add_class::<NativeReservation>()?;
    m.add_class::<NativeSearch>()?;
    Ok(())
}
