//! The plan of a strided copy: its runs (the longest trailing block contiguous on both
//! sides), joined into 2D blocks (see `blocks`), and the queuing of that plan on one
//! stream. Used by the copy engine between arrays and by `Array::copy_from_bytes` from
//! host bytes into a strided view.

use gpuport_core::{Buffer, Copy2d, Error, Layout, Result};

use super::blocks::{blocks, Block};
use crate::dynamic::AnyStream;

/// Strided copies in more 2D blocks than this, their runs shorter than
/// [`SHORT_RUN_BYTES`], are not planned: one device call per block would cost more than
/// a trip through the host, which the caller makes its own way.
const MANY_BLOCKS: usize = 4096;
const SHORT_RUN_BYTES: usize = 4096;

/// One side of a strided copy: the buffer and the byte offset of element 0 in it.
#[derive(Clone, Copy)]
pub(crate) struct Side<'a> {
    pub(crate) buffer: &'a Buffer,
    pub(crate) offset: usize,
}

/// The blocks of a strided copy, in element offsets, and the sizes that turn them into
/// bytes.
pub(crate) struct Plan {
    item: usize,
    run_bytes: usize,
    blocks: Vec<Block>,
}

/// Plans the copy of every element from layout `src` to layout `dst` (one shape), `item`
/// bytes each; `None` when the blocks are many and their runs short (see [`MANY_BLOCKS`]).
pub(crate) fn plan(src: &Layout, dst: &Layout, item: usize) -> Result<Option<Plan>> {
    let (run, src_runs, dst_runs) = runs(src, dst)?;
    let run_bytes = run.checked_mul(item).ok_or_else(|| Error::invalid_layout("run length"))?;
    let blocks = blocks(&src_runs, &dst_runs, run as isize);
    if blocks.len() > MANY_BLOCKS && run_bytes < SHORT_RUN_BYTES {
        return Ok(None);
    }
    Ok(Some(Plan { item, run_bytes, blocks }))
}

/// Queues `plan` on `stream`, which reaches both sides: one 2D copy per block, a copy per
/// row for single runs and for blocks whose two spans interleave in one buffer (a 2D copy
/// may not overlap itself: a matrix's columns copied onto its other columns).
pub(crate) fn queue(stream: &AnyStream, src: Side<'_>, dst: Side<'_>, plan: &Plan) -> Result<()> {
    let bytes = |elems: isize| elems.checked_mul(plan.item as isize).ok_or_else(|| Error::invalid_layout("run offset"));
    let at = |base: usize, elems: isize| -> Result<usize> {
        usize::try_from(base as isize + bytes(elems)?).map_err(|_| Error::invalid_layout("run offset"))
    };
    let one_buffer = src.buffer.same_allocation(dst.buffer);
    for b in &plan.blocks {
        let copy = Copy2d {
            src_offset: at(src.offset, b.src)?,
            src_pitch: bytes(b.src_pitch)? as usize,
            dst_offset: at(dst.offset, b.dst)?,
            dst_pitch: bytes(b.dst_pitch)? as usize,
            width: plan.run_bytes,
            height: b.rows,
        };
        if b.rows == 1 || (one_buffer && copy.spans_meet()?) {
            for row in 0..copy.height {
                let (s, d) = copy.row_offsets(row);
                stream.copy(src.buffer, s, dst.buffer, d, plan.run_bytes)?;
            }
        } else {
            stream.copy_2d(src.buffer, dst.buffer, &copy)?;
        }
    }
    Ok(())
}

/// The element offsets of every run of `src` and `dst` (the longest trailing block that is
/// contiguous in both), and the run length in elements.
fn runs(src: &Layout, dst: &Layout) -> Result<(usize, Vec<isize>, Vec<isize>)> {
    let shape = src.shape();
    let mut run = 1usize;
    let mut outer_shape = shape.to_vec();
    for axis in (0..shape.len()).rev() {
        let extent = shape[axis];
        if extent != 1 && (src.strides()[axis] != run as isize || dst.strides()[axis] != run as isize) {
            break;
        }
        run *= extent;
        outer_shape[axis] = 1;
    }
    let outer = |l: &Layout| -> Result<Vec<isize>> {
        let mut offsets = Vec::new();
        Layout::new(&outer_shape, l.strides())?.for_each_offset(|o| offsets.push(o));
        Ok(offsets)
    };
    Ok((run, outer(src)?, outer(dst)?))
}
