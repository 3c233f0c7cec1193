//! Strided copies as 2D blocks: consecutive runs that step by the same distance on both
//! sides become one [`gpuport_core::Copy2d`], so a sliced matrix is one driver call
//! (`cuMemcpy2DAsync`, `hipMemcpy2DAsync`, one queued operation) instead of one per row.

/// `rows` runs, the first at element offsets `src` and `dst`, each side's runs its pitch
/// (in elements, positive) apart; a single run's pitches are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Block {
    pub(super) src: isize,
    pub(super) dst: isize,
    pub(super) src_pitch: isize,
    pub(super) dst_pitch: isize,
    pub(super) rows: usize,
}

/// Groups the runs of a strided copy — element offsets in `src_runs` and `dst_runs`, each
/// run `run` elements long, in the order the copy visits them — into blocks. A block grows
/// while the next run is one more step further on both sides, by steps at least a run long
/// (a side's rows never overlap each other, as a 2D copy requires) and of one sign on both
/// sides; a block walking backwards on both sides is turned to start at its last run (a
/// 2D copy's pitches are unsigned). A broadcast side (step 0) or sides walking opposite
/// ways leave single-run blocks.
pub(super) fn blocks(src_runs: &[isize], dst_runs: &[isize], run: isize) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    for (&s, &d) in src_runs.iter().zip(dst_runs) {
        if out.last_mut().is_some_and(|b| b.extend(s, d, run)) {
            continue;
        }
        out.push(Block { src: s, dst: d, src_pitch: 0, dst_pitch: 0, rows: 1 });
    }
    out.iter_mut().for_each(Block::face_forward);
    out
}

impl Block {
    /// `rows` runs from `src`/`dst`, each side stepping by its pitch (non-zero, one sign on
    /// both sides, at least a run long — the caller's checks), turned to face forward.
    pub(super) fn sweep(src: isize, dst: isize, src_pitch: isize, dst_pitch: isize, rows: usize) -> Block {
        let mut b = Block { src, dst, src_pitch, dst_pitch, rows };
        b.face_forward();
        b
    }

    /// The offsets of the block's last run.
    fn last(&self) -> (isize, isize) {
        let steps = self.rows as isize - 1;
        (self.src + steps * self.src_pitch, self.dst + steps * self.dst_pitch)
    }

    /// Takes the run at `s`/`d` as the block's next row, if it is one more step on.
    fn extend(&mut self, s: isize, d: isize, run: isize) -> bool {
        let (ls, ld) = self.last();
        let (Some(step_s), Some(step_d)) = (s.checked_sub(ls), d.checked_sub(ld)) else { return false };
        let fits = match self.rows {
            1 => {
                step_s.signum() == step_d.signum()
                    && step_s.unsigned_abs() >= run.unsigned_abs()
                    && step_d.unsigned_abs() >= run.unsigned_abs()
            }
            _ => step_s == self.src_pitch && step_d == self.dst_pitch,
        };
        if fits {
            (self.src_pitch, self.dst_pitch) = (step_s, step_d);
            self.rows += 1;
        }
        fits
    }

    /// A block walking backwards on both sides starts at its last run instead.
    fn face_forward(&mut self) {
        if self.src_pitch < 0 {
            (self.src, self.dst) = self.last();
            (self.src_pitch, self.dst_pitch) = (-self.src_pitch, -self.dst_pitch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(src: isize, dst: isize, src_pitch: isize, dst_pitch: isize, rows: usize) -> Block {
        Block { src, dst, src_pitch, dst_pitch, rows }
    }

    #[test]
    fn a_sliced_matrix_is_one_block() {
        // 4 rows of 3 elements: every 10th in the source, packed in the destination.
        assert_eq!(blocks(&[0, 10, 20, 30], &[0, 3, 6, 9], 3), [block(0, 0, 10, 3, 4)]);
    }

    #[test]
    fn a_change_of_step_starts_a_new_block() {
        // Rows of a 3-D array's two planes: steps of 10 within a plane, 100 between.
        let src = [0, 10, 100, 110];
        let dst = [0, 4, 8, 12];
        assert_eq!(blocks(&src, &dst, 4), [block(0, 0, 10, 4, 2), block(100, 8, 10, 4, 2)]);
    }

    #[test]
    fn steps_shorter_than_a_run_or_broadcast_stay_single() {
        // A broadcast source (step 0) cannot be a pitch.
        assert_eq!(
            blocks(&[5, 5, 5], &[0, 2, 4], 2),
            [block(5, 0, 0, 0, 1), block(5, 2, 0, 0, 1), block(5, 4, 0, 0, 1)]
        );
        // Steps shorter than a run would overlap rows.
        assert_eq!(blocks(&[0, 1], &[0, 8], 4), [block(0, 0, 0, 0, 1), block(1, 8, 0, 0, 1)]);
    }

    #[test]
    fn backwards_on_both_sides_is_turned_around_and_opposite_ways_are_not_joined() {
        assert_eq!(blocks(&[30, 20, 10], &[6, 3, 0], 3), [block(10, 0, 10, 3, 3)]);
        assert_eq!(blocks(&[30, 20], &[0, 3], 3), [block(30, 0, 0, 0, 1), block(20, 3, 0, 0, 1)]);
    }

    #[test]
    fn no_runs_no_blocks() {
        assert!(blocks(&[], &[], 1).is_empty());
    }
}
