//! [`Dims`]: the extents or strides of a [`crate::Layout`], kept inline up to
//! [`INLINE_NDIM`] dimensions and on the heap beyond.
//!
//! Every array carries a layout, and interchange builds one per exchange (a DLPack or CUDA
//! Array Interface import, a clone for an export): with two vectors that was two heap
//! allocations per exchange for what is nearly always a handful of numbers. Six inline
//! slots cover every tensor rank seen in practice (PyTorch keeps five inline); a
//! higher-rank layout still works, with one allocation.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};

/// Dimensions stored without a heap allocation.
pub const INLINE_NDIM: usize = 6;

/// Up to [`INLINE_NDIM`] values inline, more on the heap. Dereferences to a slice.
#[derive(Clone)]
pub(crate) enum Dims<T: Copy + Default> {
    Inline { len: u8, items: [T; INLINE_NDIM] },
    Heap(Box<[T]>),
}

impl<T: Copy + Default> Dims<T> {
    /// A copy of `values`.
    pub(crate) fn from_slice(values: &[T]) -> Self {
        if values.len() <= INLINE_NDIM {
            let mut items = [T::default(); INLINE_NDIM];
            items[..values.len()].copy_from_slice(values);
            Dims::Inline { len: values.len() as u8, items }
        } else {
            Dims::Heap(values.into())
        }
    }

    /// `len` copies of `value`.
    pub(crate) fn filled(len: usize, value: T) -> Self {
        if len <= INLINE_NDIM {
            Dims::Inline { len: len as u8, items: [value; INLINE_NDIM] }
        } else {
            Dims::Heap(vec![value; len].into_boxed_slice())
        }
    }

    /// The values with the one at `index` removed (`index` < len).
    pub(crate) fn without(&self, index: usize) -> Self {
        let mut out = Self::filled(self.len() - 1, T::default());
        out[..index].copy_from_slice(&self[..index]);
        out[index..].copy_from_slice(&self[index + 1..]);
        out
    }

    /// The values `map` gives for `0..len`, or its first error.
    pub(crate) fn try_from_fn<E>(len: usize, mut map: impl FnMut(usize) -> Result<T, E>) -> Result<Self, E> {
        let mut out = Self::filled(len, T::default());
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = map(i)?;
        }
        Ok(out)
    }
}

impl<T: Copy + Default> Deref for Dims<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            Dims::Inline { len, items } => &items[..*len as usize],
            Dims::Heap(values) => values,
        }
    }
}

impl<T: Copy + Default> DerefMut for Dims<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Dims::Inline { len, items } => &mut items[..*len as usize],
            Dims::Heap(values) => values,
        }
    }
}

// Equality and hashing see only the values: where they are stored does not matter.
impl<T: Copy + Default + PartialEq> PartialEq for Dims<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Copy + Default + Eq> Eq for Dims<T> {}

impl<T: Copy + Default + Hash> Hash for Dims<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl<T: Copy + Default + fmt::Debug> fmt::Debug for Dims<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap_hold_the_same_values() {
        for n in [0, 1, INLINE_NDIM, INLINE_NDIM + 1, 64] {
            let values: Vec<isize> = (0..n as isize).map(|v| v * 3 - 7).collect();
            let dims = Dims::from_slice(&values);
            assert_eq!(&*dims, &values[..], "{n} values");
            assert_eq!(matches!(dims, Dims::Heap(_)), n > INLINE_NDIM, "{n} values");
            assert_eq!(dims.clone(), dims);
            assert_eq!(Dims::try_from_fn(n, |i| Ok::<_, ()>(values[i])).unwrap(), dims);
            if n > 0 {
                let mut expected = values.clone();
                expected.remove(n / 2);
                assert_eq!(&*dims.without(n / 2), &expected[..], "{n} values less one");
            }
        }
    }

    #[test]
    fn equality_ignores_where_values_live() {
        let heap = Dims::Heap(vec![1usize, 2, 3].into_boxed_slice());
        assert_eq!(heap, Dims::from_slice(&[1, 2, 3]));
        assert_ne!(heap, Dims::from_slice(&[1, 2]));
        // Unused inline slots never take part.
        let mut a = Dims::from_slice(&[1usize, 2, 3]);
        a = a.without(2);
        assert_eq!(a, Dims::from_slice(&[1, 2]));
    }
}
