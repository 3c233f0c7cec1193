//! The reductions a collective can apply.

/// A reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum (for `bool`: logical and).
    Min,
    /// Maximum (for `bool`: logical or).
    Max,
    /// Mean over the ranks: NCCL's `ncclAvg`. MPI has no such operation.
    Avg,
}
