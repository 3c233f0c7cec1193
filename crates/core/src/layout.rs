//! Shape and strides, with checked arithmetic. Strides are in elements and may be
//! negative; overflow, negative extents and strides that leave their buffer are errors,
//! never wrap-around. This is the one place layout arithmetic lives.

use crate::dims::Dims;
use crate::error::{Error, Result};

/// Most dimensions an array may have (NumPy 2's `NPY_MAXDIMS`).
pub const MAX_NDIM: usize = 64;

/// The shape and element strides of an array.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Dims<usize>,
    strides: Dims<isize>,
    numel: usize,
}

/// The bytes a layout touches, relative to the address of its first (index 0…0) element:
/// `start ≤ 0` (negative strides reach backwards) and `end` is exclusive. Both are zero
/// for an array with no elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSpan {
    /// Lowest byte offset touched (≤ 0).
    pub start: isize,
    /// One past the highest byte offset touched.
    pub end: isize,
}

impl ByteSpan {
    /// Number of bytes from `start` to `end`.
    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }
    /// True when no byte is touched.
    pub fn is_empty(self) -> bool {
        self.end == self.start
    }
}

fn overflow(what: &str) -> Error {
    Error::invalid_layout(format!("{what} overflows"))
}

/// Row-major (C order) element strides for `shape`, checked.
pub fn c_strides(shape: &[usize]) -> Result<Vec<isize>> {
    Ok(c_strides_dims(shape)?.to_vec())
}

fn c_strides_dims(shape: &[usize]) -> Result<Dims<isize>> {
    let mut strides = Dims::filled(shape.len(), 0isize);
    fill_c_strides(shape, &mut strides)?;
    Ok(strides)
}

/// Writes the row-major element strides of `shape` into `strides` (as long as `shape`).
fn fill_c_strides(shape: &[usize], strides: &mut [isize]) -> Result<()> {
    let mut acc: isize = 1;
    for (i, &extent) in shape.iter().enumerate().rev() {
        strides[i] = acc;
        let extent = isize::try_from(extent).map_err(|_| overflow("an extent"))?;
        acc = acc.checked_mul(extent.max(1)).ok_or_else(|| overflow("the element count"))?;
    }
    Ok(())
}

impl Layout {
    /// A C-contiguous layout of `shape`.
    pub fn contiguous(shape: &[usize]) -> Result<Self> {
        let strides = c_strides_dims(shape)?;
        Self::from_dims(Dims::from_slice(shape), strides)
    }

    /// A layout from explicit element strides. Checks the dimension count, that the
    /// element count fits, and that the furthest element offset is representable.
    pub fn new(shape: &[usize], strides: &[isize]) -> Result<Self> {
        Self::from_dims(Dims::from_slice(shape), Dims::from_slice(strides))
    }

    /// [`Layout::new`] over values already copied.
    fn from_dims(shape: Dims<usize>, strides: Dims<isize>) -> Result<Self> {
        if shape.len() != strides.len() {
            return Err(Error::invalid_layout(format!(
                "shape has {} dimensions but strides have {}",
                shape.len(),
                strides.len()
            )));
        }
        if shape.len() > MAX_NDIM {
            return Err(Error::invalid_layout(format!("{} dimensions; at most {MAX_NDIM} are supported", shape.len())));
        }
        let mut layout = Layout { shape, strides, numel: 0 };
        layout.finish()?;
        Ok(layout)
    }

    /// Counts the elements of a layout whose extents and strides are in place (as many of
    /// each, at most [`MAX_NDIM`]) and checks that the count fits and that the furthest
    /// element offset is representable (bytes are checked in `span`).
    fn finish(&mut self) -> Result<()> {
        let numel = self
            .shape
            .iter()
            .try_fold(1usize, |acc, &e| acc.checked_mul(e))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| overflow("the element count"))?;
        self.numel = numel;
        self.span(1)?;
        Ok(())
    }

    /// A layout from DLPack/NumPy-style signed 64-bit shape and optional strides
    /// (`None` = C-contiguous). Negative extents are errors.
    pub fn from_i64(shape: &[i64], strides: Option<&[i64]>) -> Result<Self> {
        if shape.len() > MAX_NDIM {
            return Err(Error::invalid_layout(format!("{} dimensions; at most {MAX_NDIM} are supported", shape.len())));
        }
        if let Some(s) = strides.filter(|s| s.len() != shape.len()) {
            return Err(Error::invalid_layout(format!(
                "shape has {} dimensions but strides have {}",
                shape.len(),
                s.len()
            )));
        }
        // Built in place, each value written into its slot: every import builds one, and
        // lists built apart and moved in cost more than the checks.
        let mut layout =
            Layout { shape: Dims::filled(shape.len(), 0), strides: Dims::filled(shape.len(), 0), numel: 0 };
        for (i, (slot, &e)) in layout.shape.iter_mut().zip(shape).enumerate() {
            *slot = usize::try_from(e)
                .map_err(|_| Error::invalid_layout(format!("extent {e} of dimension {i} is negative")))?;
        }
        match strides {
            None => fill_c_strides(&layout.shape, &mut layout.strides)?,
            Some(s) => {
                for (slot, &v) in layout.strides.iter_mut().zip(s) {
                    *slot = isize::try_from(v).map_err(|_| overflow("a stride"))?;
                }
            }
        }
        layout.finish()?;
        Ok(layout)
    }

    /// Byte strides (as NumPy and the CUDA Array Interface give them) converted to element
    /// strides; each must be a multiple of `itemsize`.
    pub fn from_byte_strides(shape: &[usize], byte_strides: &[isize], itemsize: usize) -> Result<Self> {
        let item = isize::try_from(itemsize).map_err(|_| overflow("the item size"))?;
        if item == 0 {
            return Err(Error::invalid_layout("item size is zero"));
        }
        let strides = Dims::try_from_fn(byte_strides.len(), |i| {
            let b = byte_strides[i];
            if b % item != 0 {
                Err(Error::invalid_layout(format!("byte stride {b} is not a multiple of the item size {itemsize}")))
            } else {
                Ok(b / item)
            }
        })?;
        Self::from_dims(Dims::from_slice(shape), strides)
    }

    /// The extents.
    #[inline]
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The element strides.
    #[inline]
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }
    /// Number of dimensions.
    #[inline]
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// Number of elements (1 for a 0-d array, 0 when any extent is 0).
    #[inline]
    pub fn numel(&self) -> usize {
        self.numel
    }

    /// Byte strides for an item size, checked.
    pub fn byte_strides(&self, itemsize: usize) -> Result<Vec<isize>> {
        let item = isize::try_from(itemsize).map_err(|_| overflow("the item size"))?;
        self.strides.iter().map(|&s| s.checked_mul(item).ok_or_else(|| overflow("a byte stride"))).collect()
    }

    /// True when elements are laid out in row-major order with no gaps. Strides of
    /// dimensions of extent 1 do not matter, and an empty array is contiguous.
    pub fn is_c_contiguous(&self) -> bool {
        self.is_contiguous_in(self.shape.len(), |i| self.shape.len() - 1 - i)
    }

    /// True when elements are laid out in column-major order with no gaps.
    pub fn is_f_contiguous(&self) -> bool {
        self.is_contiguous_in(self.shape.len(), |i| i)
    }

    /// True when the elements fill their span exactly — no gaps between them, none shared —
    /// in any order: a contiguous layout with its axes permuted or walked backwards (a
    /// transposed matrix, reversed rows). Every byte of such a layout's span is an element.
    pub fn is_dense(&self) -> bool {
        let mut axes: Vec<(usize, usize)> = (0..self.ndim())
            .filter(|&a| self.shape[a] != 1)
            .map(|a| (self.strides[a].unsigned_abs(), self.shape[a]))
            .collect();
        axes.sort_unstable();
        let mut expected = 1usize;
        for (stride, extent) in axes {
            if stride != expected {
                return self.numel == 0;
            }
            // Cannot overflow: numel fits in isize.
            expected *= extent;
        }
        true
    }

    fn is_contiguous_in(&self, n: usize, axis_from_fastest: impl Fn(usize) -> usize) -> bool {
        if self.numel == 0 {
            return true;
        }
        let mut expected: isize = 1;
        for i in 0..n {
            let axis = axis_from_fastest(i);
            let extent = self.shape[axis];
            if extent == 1 {
                continue;
            }
            if self.strides[axis] != expected {
                return false;
            }
            // Cannot overflow: numel fits in isize.
            expected *= extent as isize;
        }
        true
    }

    /// The byte range this layout touches for elements of `itemsize` bytes, checked.
    pub fn span(&self, itemsize: usize) -> Result<ByteSpan> {
        if self.numel == 0 {
            return Ok(ByteSpan { start: 0, end: 0 });
        }
        let item = isize::try_from(itemsize).map_err(|_| overflow("the item size"))?;
        let (mut lo, mut hi) = (0isize, 0isize);
        for (axis, (&extent, &stride)) in self.shape.iter().zip(self.strides.iter()).enumerate() {
            // A stride this far out is no real layout: most often a producer that wrote a
            // negative stride as its unsigned value. Name it, so the bad value is visible.
            let too_far = || {
                Error::invalid_layout(format!(
                    "the byte extent overflows: dimension {axis} has {extent} elements {stride} elements apart"
                ))
            };
            let reach =
                (extent as isize - 1).checked_mul(stride).and_then(|r| r.checked_mul(item)).ok_or_else(too_far)?;
            if reach < 0 {
                lo = lo.checked_add(reach).ok_or_else(too_far)?;
            } else {
                hi = hi.checked_add(reach).ok_or_else(too_far)?;
            }
        }
        let end = hi.checked_add(item).ok_or_else(|| overflow("the byte extent"))?;
        Ok(ByteSpan { start: lo, end })
    }

    /// Checks that the elements, starting at byte `offset` of a buffer of `buffer_len`
    /// bytes, stay inside the buffer.
    pub fn check_fits(&self, offset: usize, itemsize: usize, buffer_len: usize) -> Result<ByteSpan> {
        let span = self.span(itemsize)?;
        if span.is_empty() {
            if offset > buffer_len {
                return Err(Error::invalid_layout(format!(
                    "offset {offset} is past the end of a {buffer_len}-byte buffer"
                )));
            }
            return Ok(span);
        }
        let offset = isize::try_from(offset).map_err(|_| overflow("the offset"))?;
        let first = offset.checked_add(span.start).ok_or_else(|| overflow("the offset"))?;
        let last = offset.checked_add(span.end).ok_or_else(|| overflow("the offset"))?;
        if first < 0 || last as usize > buffer_len {
            return Err(Error::invalid_layout(format!(
                "elements span bytes {first}..{last} but the buffer holds 0..{buffer_len}"
            )));
        }
        Ok(span)
    }

    /// The element offset of a multi-index, checked against the shape.
    pub fn offset_of(&self, index: &[usize]) -> Result<isize> {
        if index.len() != self.ndim() {
            return Err(Error::invalid_argument(format!(
                "index has {} dimensions, array has {}",
                index.len(),
                self.ndim()
            )));
        }
        let mut off = 0isize;
        for (axis, ((&i, &extent), &stride)) in index.iter().zip(self.shape.iter()).zip(self.strides.iter()).enumerate()
        {
            if i >= extent {
                return Err(Error::invalid_argument(format!(
                    "index {i} out of range for axis {axis} of extent {extent}"
                )));
            }
            // Cannot overflow: span() was checked at construction.
            off += i as isize * stride;
        }
        Ok(off)
    }

    /// The layout with its axes reordered: axis `k` of the result is axis `axes[k]` here.
    pub fn permute(&self, axes: &[usize]) -> Result<Layout> {
        let n = self.ndim();
        let mut seen = vec![false; n];
        if axes.len() != n || axes.iter().any(|&a| a >= n || std::mem::replace(&mut seen[a], true)) {
            return Err(Error::invalid_argument(format!("axes {axes:?} are not a permutation of 0..{n}")));
        }
        Ok(Layout {
            shape: Dims::try_from_fn(n, |k| Ok::<_, Error>(self.shape[axes[k]]))?,
            strides: Dims::try_from_fn(n, |k| Ok::<_, Error>(self.strides[axes[k]]))?,
            numel: self.numel,
        })
    }

    /// The layout of index `index` along `axis`, with that axis removed (NumPy's
    /// `a[..., i, ...]`); returns it and the element offset of its first element.
    pub fn index_axis(&self, axis: usize, index: usize) -> Result<(Layout, isize)> {
        let extent = *self
            .shape
            .get(axis)
            .ok_or_else(|| Error::invalid_argument(format!("axis {axis} out of range for {} dims", self.ndim())))?;
        if index >= extent {
            return Err(Error::invalid_argument(format!("index {index} out of range for extent {extent}")));
        }
        let first = isize::try_from(index)
            .ok()
            .and_then(|i| i.checked_mul(self.strides[axis]))
            .ok_or_else(|| overflow("an index offset"))?;
        Ok((Layout::from_dims(self.shape.without(axis), self.strides.without(axis))?, first))
    }

    /// A strided slice along one axis, as Python's `start:stop:step`: elements `start,
    /// start+step, …` before `stop`; `stop = None` runs to the end in the step's direction
    /// (so `Some(2), None, -1` is `2::-1`, which includes index 0). Returns the new layout
    /// and the element offset of its first element.
    pub fn slice(&self, axis: usize, start: usize, stop: Option<usize>, step: isize) -> Result<(Layout, isize)> {
        let extent = *self
            .shape
            .get(axis)
            .ok_or_else(|| Error::invalid_argument(format!("axis {axis} out of range for {} dims", self.ndim())))?;
        if step == 0 {
            return Err(Error::invalid_argument("slice step must not be zero"));
        }
        let out_of_range =
            || Error::invalid_argument(format!("slice {start}:{stop:?}:{step} out of range for extent {extent}"));
        let count = if step > 0 {
            let stop = stop.unwrap_or(extent);
            if start > stop || stop > extent {
                return Err(out_of_range());
            }
            (stop - start).div_ceil(step as usize)
        } else {
            match stop {
                Some(stop) if stop > start => return Err(out_of_range()),
                Some(stop) if stop == start => 0,
                _ if start >= extent => return Err(out_of_range()),
                Some(stop) => (start - stop).div_ceil(step.unsigned_abs()),
                None => start / step.unsigned_abs() + 1,
            }
        };
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        shape[axis] = count;
        strides[axis] = strides[axis].checked_mul(step).ok_or_else(|| overflow("a stride"))?;
        let first = if count == 0 { 0 } else { start as isize * self.strides[axis] };
        Ok((Layout::from_dims(shape, strides)?, first))
    }

    /// Visits the element offset of every element in row-major index order.
    pub fn for_each_offset(&self, mut f: impl FnMut(isize)) {
        if self.numel == 0 {
            return;
        }
        let n = self.ndim();
        let mut index = vec![0usize; n];
        let mut off = 0isize;
        loop {
            f(off);
            let mut axis = n;
            loop {
                if axis == 0 {
                    return;
                }
                axis -= 1;
                index[axis] += 1;
                off += self.strides[axis];
                if index[axis] < self.shape[axis] {
                    break;
                }
                off -= self.strides[axis] * self.shape[axis] as isize;
                index[axis] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn contiguous_basics() {
        let l = Layout::contiguous(&[2, 3, 4]).unwrap();
        assert_eq!(l.strides(), &[12, 4, 1]);
        assert_eq!(l.numel(), 24);
        assert!(l.is_c_contiguous());
        assert!(!l.is_f_contiguous());
        assert_eq!(l.span(4).unwrap(), ByteSpan { start: 0, end: 96 });
        let scalar = Layout::contiguous(&[]).unwrap();
        assert_eq!(scalar.numel(), 1);
        assert!(scalar.is_c_contiguous() && scalar.is_f_contiguous());
        let empty = Layout::contiguous(&[3, 0, 2]).unwrap();
        assert_eq!(empty.numel(), 0);
        assert!(empty.span(8).unwrap().is_empty());
    }

    #[test]
    fn size_one_strides_do_not_matter() {
        let l = Layout::new(&[1, 4, 1], &[999, 1, -7]).unwrap();
        assert!(l.is_c_contiguous());
        assert!(l.is_f_contiguous());
    }

    #[test]
    fn negative_strides_reach_backwards() {
        let l = Layout::new(&[4], &[-1]).unwrap();
        assert_eq!(l.span(4).unwrap(), ByteSpan { start: -12, end: 4 });
        assert!(l.check_fits(12, 4, 16).is_ok());
        assert!(l.check_fits(8, 4, 16).is_err());
    }

    #[test]
    fn overflow_and_bad_input_are_errors() {
        assert!(Layout::contiguous(&[usize::MAX, 2]).is_err());
        assert!(Layout::contiguous(&[1 << 40, 1 << 40]).is_err());
        assert!(Layout::new(&[2, 2], &[1]).is_err());
        assert!(Layout::new(&[3], &[isize::MAX]).is_err());
        // A negative stride written as its unsigned value, divided by the item size (as
        // one producer's DLPack export does): refused, naming the value.
        let err = Layout::from_i64(&[2, 3], Some(&[3, 4611686018427387903])).unwrap_err();
        assert!(err.to_string().contains("dimension 1 has 3 elements 4611686018427387903 elements apart"), "{err}");
        assert!(Layout::from_i64(&[2, -1], None).is_err());
        assert!(Layout::new(&[2; 65], &[0; 65]).is_err());
        assert!(Layout::from_byte_strides(&[2], &[6], 4).is_err());
        assert_eq!(Layout::from_byte_strides(&[2, 3], &[12, 4], 4).unwrap(), Layout::contiguous(&[2, 3]).unwrap());
        let l = Layout::contiguous(&[4]).unwrap();
        assert!(l.check_fits(1, 4, 16).is_err());
        assert!(l.check_fits(0, 4, 16).is_ok());
        assert!(l.span(usize::MAX).is_err());
    }

    #[test]
    fn slicing_and_permuting() {
        let l = Layout::contiguous(&[4, 5]).unwrap();
        let (s, off) = l.slice(1, 1, Some(5), 2).unwrap();
        assert_eq!(s.shape(), &[4, 2]);
        assert_eq!(s.strides(), &[5, 2]);
        assert_eq!(off, 1);
        let (r, off) = l.slice(0, 3, Some(0), -1).unwrap();
        assert_eq!(r.shape(), &[3, 5]);
        assert_eq!(r.strides(), &[-5, 1]);
        assert_eq!(off, 15);
        let (all_rev, off) = l.slice(0, 3, None, -1).unwrap();
        assert_eq!((all_rev.shape()[0], off), (4, 15));
        let (every_other, _) = l.slice(1, 4, None, -2).unwrap();
        assert_eq!(every_other.shape(), &[4, 3]);
        assert_eq!(l.slice(1, 2, None, 1).unwrap().0.shape(), &[4, 3]);
        assert_eq!(l.slice(1, 2, Some(2), -1).unwrap().0.numel(), 0);
        assert!(l.slice(0, 0, Some(5), 1).is_err());
        assert!(l.slice(0, 4, None, -1).is_err());
        assert!(l.slice(0, 0, Some(1), 0).is_err());
        let t = l.permute(&[1, 0]).unwrap();
        assert!(t.is_f_contiguous() && !t.is_c_contiguous());
        assert!(l.permute(&[0, 0]).is_err());
        assert_eq!(l.offset_of(&[2, 3]).unwrap(), 13);
        assert!(l.offset_of(&[4, 0]).is_err());
    }

    #[test]
    fn for_each_offset_visits_row_major() {
        let l = Layout::new(&[2, 3], &[1, 2]).unwrap();
        let mut seen = vec![];
        l.for_each_offset(|o| seen.push(o));
        assert_eq!(seen, vec![0, 2, 4, 1, 3, 5]);
        let mut n = 0;
        Layout::contiguous(&[]).unwrap().for_each_offset(|_| n += 1);
        assert_eq!(n, 1);
    }

    proptest! {
        #[test]
        fn span_covers_every_offset(
            dims in proptest::collection::vec((0usize..6, -7isize..8), 0..5),
            item in 1usize..9,
        ) {
            let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
            let strides: Vec<isize> = dims.iter().map(|d| d.1).collect();
            let l = Layout::new(&shape, &strides).unwrap();
            let span = l.span(item).unwrap();
            let mut count = 0usize;
            l.for_each_offset(|o| {
                count += 1;
                let b = o * item as isize;
                assert!(b >= span.start && b + item as isize <= span.end);
            });
            prop_assert_eq!(count, l.numel());
            if l.is_c_contiguous() && l.numel() > 0 {
                prop_assert_eq!(span.len(), l.numel() * item);
            }
        }

        #[test]
        fn dense_means_the_offsets_fill_their_range_once(
            dims in proptest::collection::vec((0usize..5, -6isize..7), 0..5),
        ) {
            let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
            let strides: Vec<isize> = dims.iter().map(|d| d.1).collect();
            let l = Layout::new(&shape, &strides).unwrap();
            let mut offsets = Vec::new();
            l.for_each_offset(|o| offsets.push(o));
            offsets.sort_unstable();
            let tiles = offsets.windows(2).all(|w| w[1] == w[0] + 1);
            prop_assert_eq!(l.is_dense(), tiles, "{:?} {:?}", shape, strides);
        }

        #[test]
        fn permuted_and_reversed_contiguous_layouts_are_dense(
            dims in proptest::collection::vec((1usize..5, any::<u8>(), any::<bool>()), 0..5),
        ) {
            let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
            // Contiguous in the order of the random keys, each axis maybe walked backwards.
            let mut order: Vec<usize> = (0..dims.len()).collect();
            order.sort_by_key(|&a| (dims[a].1, a));
            let mut strides = vec![0isize; dims.len()];
            let mut step = 1isize;
            for &a in order.iter().rev() {
                strides[a] = if dims[a].2 { -step } else { step };
                step *= shape[a] as isize;
            }
            prop_assert!(Layout::new(&shape, &strides).unwrap().is_dense(), "{:?} {:?}", shape, strides);
        }

        #[test]
        fn from_i64_never_panics(
            shape in proptest::collection::vec(any::<i64>(), 0..4),
            strides in proptest::collection::vec(any::<i64>(), 0..4),
        ) {
            let _ = Layout::from_i64(&shape, Some(&strides));
            if let Ok(l) = Layout::from_i64(&shape, None) {
                prop_assert!(l.is_c_contiguous());
            }
        }
    }
}
