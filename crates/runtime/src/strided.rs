//! The plan of a strided copy: its runs (the longest trailing block contiguous on both
//! sides), joined into 2D blocks (see `blocks`), and the queuing of that plan on one
//! stream. Used by the copy engine between arrays and by `Array::copy_from_bytes` and
//! `Array::to_bytes` between host bytes and a strided view; with the choice between a
//! view's blocks and its whole span (`gather_beats_span`), and the walk over a host copy
//! of the span a run at a time (`for_each_run`).

use gpuport_core::{Buffer, Copy2d, Error, Layout, Result};

use crate::dynamic::AnyStream;
use blocks::{blocks, Block};
pub(crate) use kernels::{plan as kernel_plan, release as release_kernels};
pub use kernels::{strided_copy_kernels, COPY_KERNELS_ENV};

mod blocks;
mod kernels;

/// Strided copies in more 2D blocks than this, their runs shorter than
/// [`SHORT_RUN_BYTES`], are not planned: one device call per block would cost more than
/// a trip through the host, which the caller makes its own way.
const MANY_BLOCKS: usize = 4096;
const SHORT_RUN_BYTES: usize = 4096;

/// What reading a view's elements in 2D blocks costs beyond reading them contiguously,
/// in bytes of reading its span instead: a fixed cost (a queued copy and a wait for it,
/// where a small read of the span runs at once on an idle software queue), and a cost per
/// row of the blocks (a device's row, or a software device's `memcpy` call, against
/// picking the element out of the span on the host). Measured on the software devices: a
/// view of every k-th `f32` of 32 MiB reads faster in blocks from k = 8 on (10–14 ms
/// against 22–24 ms through the span), slower at k = 5 (36–46 ms against 21–29 ms).
const GATHER_CALL_BYTES: usize = 64 << 10;
const GATHER_ROW_BYTES: usize = 24;

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
    let (run, outer_shape) = run_length(src, dst);
    let run_bytes = run.checked_mul(item).ok_or_else(|| Error::invalid_layout("run length"))?;
    let too_many = |blocks: usize| blocks > MANY_BLOCKS && run_bytes < SHORT_RUN_BYTES;
    let blocks = match regular_blocks(src, dst, &outer_shape, run, too_many)? {
        Regular::Blocks(blocks) => blocks,
        Regular::TooMany => return Ok(None),
        Regular::No => {
            let (run, src_runs, dst_runs) = runs(src, dst)?;
            blocks(&src_runs, &dst_runs, run as isize)
        }
    };
    if too_many(blocks.len()) {
        return Ok(None);
    }
    Ok(Some(Plan { item, run_bytes, blocks }))
}

/// What [`regular_blocks`] found.
enum Regular {
    Blocks(Vec<Block>),
    /// More blocks than a plan takes ([`MANY_BLOCKS`] of runs under [`SHORT_RUN_BYTES`]).
    TooMany,
    /// Not the regular case: the runs are grouped one by one.
    No,
}

/// The blocks of the common case without listing every run: the innermost axis outside
/// the run (merged with the axes above it while they continue its steps on both sides)
/// steps both sides by a distance that keeps rows apart and walks them the same way, so
/// each sweep of it is one block. Every 8th element of 2M, or a column of a large matrix,
/// is one block found at once; listing the runs first took two vectors of 2M offsets
/// (32 MiB, most of the time of such a read from a GPU).
fn regular_blocks(
    src: &Layout,
    dst: &Layout,
    outer_shape: &[usize],
    run: usize,
    too_many: impl Fn(usize) -> bool,
) -> Result<Regular> {
    let mut shape = outer_shape.to_vec();
    let Some(inner) = shape.iter().rposition(|&n| n > 1) else { return Ok(Regular::No) };
    let (step_s, step_d) = (src.strides()[inner], dst.strides()[inner]);
    let apart = |step: isize| step.unsigned_abs() >= run;
    if step_s == 0 || step_s.signum() != step_d.signum() || !apart(step_s) || !apart(step_d) {
        return Ok(Regular::No);
    }
    let mut rows = shape[inner];
    shape[inner] = 1;
    // The axes above that continue the sweep (a sliced matrix's rows, flattened).
    for axis in (0..inner).rev() {
        if shape[axis] == 1 {
            continue;
        }
        let continues = |l: &Layout, step: isize| Some(l.strides()[axis]) == step.checked_mul(rows as isize);
        if !continues(src, step_s) || !continues(dst, step_d) {
            break;
        }
        rows = rows.checked_mul(shape[axis]).ok_or_else(|| Error::invalid_layout("rows"))?;
        shape[axis] = 1;
    }
    let sweeps: usize = shape.iter().product();
    if too_many(sweeps) {
        return Ok(Regular::TooMany);
    }
    let starts = |l: &Layout| -> Result<Vec<isize>> {
        let mut v = Vec::with_capacity(sweeps);
        Layout::new(&shape, l.strides())?.for_each_offset(|o| v.push(o));
        Ok(v)
    };
    let blocks =
        starts(src)?.into_iter().zip(starts(dst)?).map(|(s, d)| Block::sweep(s, d, step_s, step_d, rows)).collect();
    Ok(Regular::Blocks(blocks))
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

/// Whether reading the elements of `view` (`item` bytes each) in the blocks of their runs
/// beats reading the span that holds them (`span` bytes) and picking them out on the host:
/// when the bytes between the elements outweigh the blocks' extra costs
/// ([`GATHER_CALL_BYTES`], [`GATHER_ROW_BYTES`]). A column of a large matrix is one 2D copy
/// of its elements instead of a read (and a host allocation) of the whole matrix.
pub(crate) fn gather_beats_span(view: &Layout, item: usize, span: usize) -> bool {
    let elements = view.numel().saturating_mul(item);
    let (run, _) = run_length(view, view);
    let rows = view.numel() / run.max(1);
    span.saturating_sub(elements) > rows.saturating_mul(GATHER_ROW_BYTES).saturating_add(GATHER_CALL_BYTES)
}

/// Calls `f(packed, at, len)` for every run of `view` (the longest trailing block of
/// contiguous elements) in row-major order: `len` bytes that start `packed` bytes into
/// the elements packed row-major, and `at` bytes from element 0 in the view. How a host
/// copy of a view's span is gathered from or scattered into, a run at a time.
pub(crate) fn for_each_run(view: &Layout, item: usize, mut f: impl FnMut(usize, isize, usize)) -> Result<()> {
    let (run, outer_shape) = run_length(view, view);
    let len = run * item;
    let mut packed = 0;
    Layout::new(&outer_shape, view.strides())?.for_each_offset(|o| {
        f(packed, o * item as isize, len);
        packed += len;
    });
    Ok(())
}

/// The element offsets of every run of `src` and `dst` (the longest trailing block that is
/// contiguous in both), and the run length in elements.
fn runs(src: &Layout, dst: &Layout) -> Result<(usize, Vec<isize>, Vec<isize>)> {
    let (run, outer_shape) = run_length(src, dst);
    let outer = |l: &Layout| -> Result<Vec<isize>> {
        let mut offsets = Vec::new();
        Layout::new(&outer_shape, l.strides())?.for_each_offset(|o| offsets.push(o));
        Ok(offsets)
    };
    Ok((run, outer(src)?, outer(dst)?))
}

/// The run length in elements (the longest trailing block contiguous in both `src` and
/// `dst`, read row-major) and the shape of the runs' starts (the run's axes set to 1).
fn run_length(src: &Layout, dst: &Layout) -> (usize, Vec<usize>) {
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
    (run, outer_shape)
}

#[cfg(test)]
mod tests {
    use proptest::strategy::Just;

    use super::*;

    /// `view` of `f32`s against the span that holds it.
    fn gathers(view: &Layout) -> bool {
        gather_beats_span(view, 4, view.span(4).unwrap().len())
    }

    /// The (source, destination) offsets of every run the blocks copy, sorted.
    fn covered(blocks: &[Block]) -> Vec<(isize, isize)> {
        let mut v: Vec<_> = blocks
            .iter()
            .flat_map(|b| (0..b.rows as isize).map(move |r| (b.src + r * b.src_pitch, b.dst + r * b.dst_pitch)))
            .collect();
        v.sort_unstable();
        v
    }

    /// A view of `shape` over a larger buffer: each axis's stride from `steps` (a multiple
    /// of the axes inside it, signed), so views overlap nothing, as arrays' views do.
    fn strided(shape: &[usize], steps: &[isize]) -> Layout {
        let mut strides = vec![0isize; shape.len()];
        let mut inner = 1isize;
        for axis in (0..shape.len()).rev() {
            strides[axis] = inner * steps[axis];
            inner *= shape[axis] as isize * steps[axis].abs();
        }
        Layout::new(shape, &strides).unwrap()
    }

    proptest::proptest! {
        /// The blocks found without listing the runs copy exactly the runs, each pitch
        /// keeping rows apart and facing forward.
        #[test]
        fn regular_blocks_cover_exactly_the_runs(
            shape in proptest::collection::vec(1usize..6, 1..4),
            steps in proptest::collection::vec(proptest::prop_oneof![Just(1isize), Just(2), Just(3), Just(-1), Just(-2)], 4),
            flip in proptest::bool::ANY,
        ) {
            let view = strided(&shape, &steps[..shape.len()]);
            let packed = Layout::contiguous(&shape).unwrap();
            let (src, dst) = if flip { (&packed, &view) } else { (&view, &packed) };
            let (run, outer) = run_length(src, dst);
            if let Regular::Blocks(b) = regular_blocks(src, dst, &outer, run, |_| false).unwrap() {
                let (_, s, d) = runs(src, dst).unwrap();
                let mut want: Vec<_> = s.into_iter().zip(d).collect();
                want.sort_unstable();
                proptest::prop_assert_eq!(covered(&b), want);
                for b in &b {
                    proptest::prop_assert!(b.rows >= 2 && b.src_pitch >= run as isize && b.dst_pitch >= run as isize);
                }
            }
        }
    }

    #[test]
    fn every_eighth_of_millions_is_one_block() {
        let view = Layout::new(&[2 << 20], &[8]).unwrap();
        let every = plan(&view, &Layout::contiguous(&[2 << 20]).unwrap(), 4).unwrap().unwrap();
        assert_eq!(every.blocks, [Block::sweep(0, 0, 8, 1, 2 << 20)]);
        let columns = Layout::new(&[4096, 3, 2], &[3 << 20, 1 << 20, 1]).unwrap();
        let sliced = plan(&columns, &Layout::contiguous(&[4096, 3, 2]).unwrap(), 4).unwrap().unwrap();
        assert_eq!(sliced.blocks, [Block::sweep(0, 0, 1 << 20, 2, 3 * 4096)], "the sweep continues up the axes");
    }

    #[test]
    fn gathering_pays_for_views_sparse_enough() {
        let every = |k: isize| Layout::new(&[(8 << 20) / k as usize], &[k]).unwrap();
        assert!(!gathers(&every(5)) && gathers(&every(8)) && gathers(&every(64)), "the measured steps");
        let column = |n: usize| Layout::new(&[n], &[n as isize]).unwrap();
        assert!(gathers(&column(2048)), "a large matrix's column");
        assert!(!gathers(&column(64)), "a small matrix's column: one read of its span");
        let transposed = Layout::new(&[2048, 2048], &[1, 2048]).unwrap();
        assert!(!gathers(&transposed), "no bytes between the elements");
        let columns = Layout::new(&[2048, 64], &[2048, 1]).unwrap();
        assert!(gathers(&columns), "64 of 2048 columns: 2048 rows of 256 bytes");
    }
}
