//! Lifetimes: what a stream's queued work uses stays alive until the work has run, after
//! the caller's last handle to it is gone.

use gpuport_runtime::Buffer;

use super::{pattern, read_all, stream, Gate, OpenOnDrop};
use crate::{ensure, Outcome, Target};

/// Allocations made while freed memory is about to be reused, each filled with 0xEE: a
/// port that freed a buffer its queued work still uses hands that memory out again here,
/// so the work reads these bytes, or overwrites them.
fn decoys(dev: &gpuport_runtime::AnyDevice, n: usize) -> Result<Vec<Buffer>, crate::Failure> {
    let mut out = Vec::new();
    for _ in 0..4 {
        let b = dev.alloc(n)?;
        dev.memset(&b, 0, n, 0xEE)?;
        out.push(b);
    }
    Ok(out)
}

/// A copy held behind a gate, whose source and destination the caller drops before it
/// runs: it still reads its source's bytes and writes its destination, and memory
/// allocated meanwhile is not touched.
pub fn queued_work_keeps_its_buffers(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let n = 1 << 16;
    let data = pattern(n, 77);
    let (src, dst, kept) = (dev.alloc(n)?, dev.alloc(n)?, dev.alloc(n)?);
    s.write(&data, &src, 0)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&s)?;
    // The source dropped: the first copy must still read its bytes.
    s.copy(&src, 0, &dst, 0, n)?;
    drop(src);
    // The destination dropped: the second copy must not write into memory handed out again.
    let gone = dev.alloc(n)?;
    s.copy(&dst, 0, &gone, 0, n)?;
    drop(gone);
    s.copy(&dst, 0, &kept, 0, n)?;
    let decoys = decoys(dev, n)?;
    gate.open();
    s.synchronize()?;
    ensure!(read_all(&s, &kept)? == data, "a queued copy read its source after the caller dropped it");
    for d in &decoys {
        ensure!(
            read_all(&s, d)? == vec![0xEE; n],
            "a queued copy wrote into memory allocated after its destination was dropped"
        );
    }
    Ok(())
}
