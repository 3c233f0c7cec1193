//! [`Copy2d`], the rows-and-pitches copy every GPU runtime has (`cuMemcpy2DAsync`,
//! `hipMemcpy2DAsync`), and the one check every backend runs before it.
//!
//! A strided array whose inner block is contiguous is exactly this shape: one row per outer
//! index, each `width` bytes, the rows `pitch` bytes apart. Copying it row by row costs one
//! driver call per row (thousands for a sliced matrix); as one 2D copy it is one call.

use crate::{Buffer, Error, Result};

/// `height` rows of `width` bytes: row `i` is read at `src_offset + i * src_pitch` of the
/// source and written at `dst_offset + i * dst_pitch` of the destination (offsets and
/// pitches in bytes).
///
/// With more than one row each pitch is at least `width` (rows of one side never overlap
/// each other); a single row's pitches are not used. Pitches are unsigned, as the drivers
/// take them: a layout that walks backwards is copied from its last row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Copy2d {
    /// Where the first row starts in the source.
    pub src_offset: usize,
    /// Bytes from one source row's start to the next's.
    pub src_pitch: usize,
    /// Where the first row starts in the destination.
    pub dst_offset: usize,
    /// Bytes from one destination row's start to the next's.
    pub dst_pitch: usize,
    /// Bytes per row.
    pub width: usize,
    /// Number of rows.
    pub height: usize,
}

impl Copy2d {
    /// Whether the copy moves nothing (no rows, or empty rows).
    pub fn is_empty(&self) -> bool {
        self.width == 0 || self.height == 0
    }

    /// The offset of row `row` in the source and in the destination. For a row below
    /// `height` of a copy [`check_copy_2d`] accepted, neither overflows.
    pub fn row_offsets(&self, row: usize) -> (usize, usize) {
        (self.src_offset + row * self.src_pitch, self.dst_offset + row * self.dst_pitch)
    }

    /// The same copy with a single row's unused pitches set to `width`, which every
    /// driver accepts (they refuse a pitch below the width even for one row).
    pub fn normalized(&self) -> Copy2d {
        match self.height {
            1 => Copy2d { src_pitch: self.width, dst_pitch: self.width, ..*self },
            _ => *self,
        }
    }

    /// Bytes from the first row's start to the last row's end on a side with `pitch`.
    fn span(&self, pitch: usize, side: &str) -> Result<usize> {
        if self.is_empty() {
            return Ok(0);
        }
        if self.height > 1 && pitch < self.width {
            return Err(Error::invalid_argument(format!(
                "2D copy: the {side} pitch ({pitch}) is below the row width ({}), so its rows would overlap",
                self.width
            )));
        }
        (self.height - 1)
            .checked_mul(pitch)
            .and_then(|rows| rows.checked_add(self.width))
            .ok_or_else(|| Error::invalid_argument(format!("2D copy: the {side} span overflows")))
    }

    /// [`Copy2d`]'s source span: bytes from the first row's start to the last row's end.
    pub fn src_span(&self) -> Result<usize> {
        self.span(self.src_pitch, "source")
    }

    /// The destination span, as [`Copy2d::src_span`].
    pub fn dst_span(&self) -> Result<usize> {
        self.span(self.dst_pitch, "destination")
    }

    /// Whether the two spans share a byte, read as offsets into one buffer (a 2D copy
    /// within one allocation may not overlap itself). An empty copy touches nothing.
    pub fn spans_meet(&self) -> Result<bool> {
        let (s, d) = (self.src_offset, self.dst_offset);
        Ok(!self.is_empty() && s < d.saturating_add(self.dst_span()?) && d < s.saturating_add(self.src_span()?))
    }
}

/// Checks a 2D copy against its buffers: each pitch at least the width (for more than one
/// row), each side's span — first row's start to last row's end — inside its buffer, and
/// the two spans apart when both are in one allocation (overlapping 2D copies are
/// undefined in every driver). Returns the addresses of the first source and destination
/// rows. An empty copy only checks that both offsets are inside their buffers.
pub fn check_copy_2d(src: &Buffer, dst: &Buffer, copy: &Copy2d) -> Result<(u64, u64)> {
    let (src_span, dst_span) = (copy.src_span()?, copy.dst_span()?);
    let s = src.range_addr(copy.src_offset, src_span)?;
    let d = dst.range_addr(copy.dst_offset, dst_span)?;
    if src.same_allocation(dst) && copy.spans_meet()? {
        return Err(Error::invalid_argument(format!(
            "2D copy: source span {}..{} and destination span {}..{} overlap in one buffer",
            copy.src_offset,
            copy.src_offset + src_span,
            copy.dst_offset,
            copy.dst_offset + dst_span
        )));
    }
    Ok((s, d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BufferDesc, DeviceId, MemoryKind};

    fn buffer(len: usize) -> Buffer {
        let desc = BufferDesc {
            addr: 0x1000,
            len,
            device: DeviceId::HOST,
            memory: MemoryKind::Device,
            host_accessible: false,
        };
        // SAFETY: the memory is never dereferenced; nothing to release.
        unsafe { Buffer::from_borrowed(desc, None) }.unwrap()
    }

    fn copy(width: usize, height: usize, src_pitch: usize, dst_pitch: usize) -> Copy2d {
        Copy2d { src_offset: 0, src_pitch, dst_offset: 0, dst_pitch, width, height }
    }

    #[test]
    fn spans_cover_first_row_to_last_row() {
        let c = Copy2d { src_offset: 8, ..copy(4, 3, 16, 4) };
        assert_eq!(c.src_span().unwrap(), 36);
        assert_eq!(c.dst_span().unwrap(), 12);
        assert_eq!(c.row_offsets(2), (40, 8));
        let (src, dst) = (buffer(44), buffer(12));
        assert_eq!(check_copy_2d(&src, &dst, &c).unwrap(), (0x1008, 0x1000));
        let short = buffer(43);
        let err = check_copy_2d(&short, &dst, &c).unwrap_err();
        assert!(err.to_string().contains("outside a 43-byte buffer"), "{err}");
    }

    #[test]
    fn pitch_below_width_is_refused_for_several_rows_only() {
        let (src, dst) = (buffer(64), buffer(64));
        let err = check_copy_2d(&src, &dst, &copy(8, 2, 4, 8)).unwrap_err();
        assert!(err.to_string().contains("source pitch (4) is below the row width (8)"), "{err}");
        let err = check_copy_2d(&src, &dst, &copy(8, 2, 8, 0)).unwrap_err();
        assert!(err.to_string().contains("destination pitch"), "{err}");
        // One row: the pitches are not used, and `normalized` makes them the width.
        let one = copy(8, 1, 0, 3);
        check_copy_2d(&src, &dst, &one).unwrap();
        assert_eq!(one.normalized(), copy(8, 1, 8, 8));
        assert_eq!(copy(8, 2, 9, 10).normalized(), copy(8, 2, 9, 10));
    }

    #[test]
    fn overflowing_spans_are_errors() {
        let (src, dst) = (buffer(64), buffer(64));
        let err = check_copy_2d(&src, &dst, &copy(8, usize::MAX, 8, 8)).unwrap_err();
        assert!(err.to_string().contains("span overflows"), "{err}");
    }

    #[test]
    fn empty_copies_check_only_offsets() {
        let (src, dst) = (buffer(16), buffer(16));
        let c = Copy2d { src_offset: 16, dst_offset: 16, ..copy(0, 1000, 0, 0) };
        assert!(c.is_empty());
        check_copy_2d(&src, &dst, &c).unwrap();
        let c = Copy2d { src_offset: 17, ..c };
        assert!(check_copy_2d(&src, &dst, &c).is_err());
    }

    #[test]
    fn spans_in_one_allocation_must_not_overlap() {
        let b = buffer(64);
        // Rows 0..8 and 8..16 at pitch 16: spans 0..24 and 8..32 overlap.
        let c = Copy2d { dst_offset: 8, ..copy(8, 2, 16, 16) };
        let err = check_copy_2d(&b, &b.clone(), &c).unwrap_err();
        assert!(err.to_string().contains("overlap in one buffer"), "{err}");
        let apart = Copy2d { dst_offset: 32, ..copy(8, 2, 16, 16) };
        check_copy_2d(&b, &b.clone(), &apart).unwrap();
        // Another buffer at the same addresses is not the same allocation.
        check_copy_2d(&b, &buffer(64), &c).unwrap();
    }
}
