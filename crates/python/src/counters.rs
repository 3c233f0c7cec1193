//! How many exchanges took each path, producer and consumer side (relaxed counters, read
//! by `gpuport.exchange_counters()`): a test can tell which path ran.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The paths counted.
#[derive(Debug, Clone, Copy)]
pub enum Counter {
    /// `Array.__dlpack__` called.
    ProducerDunder,
    /// The table's `managed_tensor_from_py_object_no_sync` called.
    ProducerExchangeApi,
    /// The table's `managed_tensor_to_py_object_no_sync` called.
    ProducerToPyObject,
    /// The table's allocator called.
    ProducerAllocator,
    /// The table's `dltensor_from_py_object_no_sync` called.
    ProducerDltensor,
    /// `from_dlpack` through a producer's table.
    ConsumerExchangeApi,
    /// `from_dlpack` through `__dlpack__`.
    ConsumerDunder,
    /// `from_dlpack` of a raw capsule.
    ConsumerCapsule,
}

const COUNTER_NAMES: [&str; 8] = [
    "producer_dunder",
    "producer_exchange_api",
    "producer_to_py_object",
    "producer_allocator",
    "producer_dltensor",
    "consumer_exchange_api",
    "consumer_dunder",
    "consumer_capsule",
];

static COUNTERS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

/// Counts one exchange on `path`, taken with the GIL held (`_py`), which orders the counts:
/// a plain load and store, not a locked read-modify-write (some twenty cycles on every
/// exchange, of a few hundred).
pub fn count(_py: Python<'_>, path: Counter) {
    let c = &COUNTERS[path as usize];
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// Counts one exchange on `path` from a caller that may not hold the GIL (the exchange
/// table's allocator).
pub fn count_without_gil(path: Counter) {
    COUNTERS[path as usize].fetch_add(1, Ordering::Relaxed);
}

/// `gpuport.exchange_counters()`: how many exchanges took each path so far.
#[pyfunction]
pub fn exchange_counters(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (name, c) in COUNTER_NAMES.iter().zip(&COUNTERS) {
        d.set_item(name, c.load(Ordering::Relaxed))?;
    }
    Ok(d)
}
