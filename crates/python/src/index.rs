//! Basic indexing (`a[1:, ::2]`, `a[-1]`, `a[..., 0]`), once for `Array` and
//! `MirroredArray`: the key becomes a list of per-axis steps, applied from the last axis
//! to the first so that removing an axis never shifts one still to be applied.

use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};

/// One axis's part of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `start:stop:step`, resolved against the extent (`stop` None = to the end in the
    /// step's direction).
    Slice { axis: usize, start: usize, stop: Option<usize>, step: isize },
    /// An integer: the axis is removed.
    Index { axis: usize, index: usize },
}

/// Views that basic indexing can make.
pub trait Indexable: Sized {
    /// A strided slice along one axis.
    fn slice(&self, axis: usize, start: usize, stop: Option<usize>, step: isize) -> gpuport::Result<Self>;
    /// One index along an axis, removing it.
    fn index_axis(&self, axis: usize, index: usize) -> gpuport::Result<Self>;
}

impl Indexable for gpuport::Array {
    fn slice(&self, axis: usize, start: usize, stop: Option<usize>, step: isize) -> gpuport::Result<Self> {
        gpuport::Array::slice(self, axis, start, stop, step)
    }
    fn index_axis(&self, axis: usize, index: usize) -> gpuport::Result<Self> {
        gpuport::Array::index_axis(self, axis, index)
    }
}

impl Indexable for gpuport::MirroredArray {
    fn slice(&self, axis: usize, start: usize, stop: Option<usize>, step: isize) -> gpuport::Result<Self> {
        gpuport::MirroredArray::slice(self, axis, start, stop, step)
    }
    fn index_axis(&self, axis: usize, index: usize) -> gpuport::Result<Self> {
        gpuport::MirroredArray::index_axis(self, axis, index)
    }
}

/// Parses `key` against `shape`. Integers out of range are IndexError; anything but
/// integers, slices and one Ellipsis (in a tuple or alone) is TypeError.
pub fn parse(key: &Bound<'_, PyAny>, shape: &[usize]) -> PyResult<Vec<Step>> {
    let items: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![key.clone()],
    };
    let ellipses = items.iter().filter(|k| k.is_instance_of::<PyEllipsis>()).count();
    if ellipses > 1 {
        return Err(PyIndexError::new_err("an index can only have a single ellipsis ('...')"));
    }
    let explicit = items.len() - ellipses;
    if explicit > shape.len() {
        return Err(PyIndexError::new_err(format!(
            "too many indices: the array is {}-dimensional, but {explicit} were indexed",
            shape.len()
        )));
    }
    let mut steps = Vec::with_capacity(explicit);
    let mut axis = 0;
    for item in &items {
        if item.is_instance_of::<PyEllipsis>() {
            axis += shape.len() - explicit;
            continue;
        }
        let extent = shape[axis];
        if let Ok(slice) = item.cast::<PySlice>() {
            let ind = slice.indices(extent as isize)?;
            steps.push(resolve_slice(axis, ind.start, ind.step, ind.slicelength));
        } else if let Ok(i) = item.extract::<i64>() {
            let index = if i < 0 { i + extent as i64 } else { i };
            if index < 0 || index >= extent as i64 {
                return Err(PyIndexError::new_err(format!(
                    "index {i} is out of bounds for axis {axis} with size {extent}"
                )));
            }
            steps.push(Step::Index { axis, index: index as usize });
        } else {
            return Err(PyTypeError::new_err(format!(
                "only integers, slices and '...' are valid indices (basic indexing), not {}",
                item.get_type().name()?
            )));
        }
        axis += 1;
    }
    Ok(steps)
}

/// A slice as Python resolved it (`start`, `step`, `slicelength`) in gpuport's terms.
fn resolve_slice(axis: usize, start: isize, step: isize, len: usize) -> Step {
    if len == 0 {
        return Step::Slice { axis, start: 0, stop: Some(0), step: 1 };
    }
    let start = start as usize;
    let last = start as isize + (len as isize - 1) * step;
    let stop = if step > 0 { Some(last as usize + 1) } else { (last > 0).then(|| last as usize - 1) };
    Step::Slice { axis, start, stop, step }
}

/// Applies parsed steps, last axis first.
pub fn apply<T: Indexable + Clone>(value: &T, steps: &[Step]) -> gpuport::Result<T> {
    let mut v = value.clone();
    for step in steps.iter().rev() {
        v = match *step {
            Step::Slice { axis, start, stop, step } => v.slice(axis, start, stop, step)?,
            Step::Index { axis, index } => v.index_axis(axis, index)?,
        };
    }
    Ok(v)
}
