//! The facade's `Array` and copy engine on the target: the layer every interchange
//! feature is built on must work on every backend, not only in the facade's own tests.

use gpuport_runtime::{copy, Access, Array, Element, Error};

use super::{finishes_within, stream, Gate, OpenOnDrop, HELD_FOR};
use crate::{ensure, Outcome, Target};

fn values<T: Element + From<u16>>(n: usize) -> Vec<T> {
    (0..n).map(|i| T::from((i * 7 % 1000) as u16)).collect()
}

/// Upload, download, and views with offsets, steps and a transposition.
pub fn round_trip_and_views(t: &Target) -> Outcome {
    let dev = t.device();
    let data: Vec<u32> = values(12 * 10);
    let a = Array::from_slice(dev, &data, &[12, 10])?;
    ensure!(a.to_vec::<u32>()? == data, "an array did not round-trip");
    // Rows 3, 5, 7, 9 and columns 8, 6, 4, 2: an offset, and negative and positive steps.
    let view = a.slice(0, 3, Some(10), 2)?.slice(1, 8, Some(1), -2)?;
    let expect: Vec<u32> = [3, 5, 7, 9].iter().flat_map(|r| [8, 6, 4, 2].map(|c| data[r * 10 + c])).collect();
    ensure!(view.to_vec::<u32>()? == expect, "a strided view read the wrong elements");
    let transposed = a.permute(&[1, 0])?;
    let expect_t: Vec<u32> =
        (0..10).flat_map(|c| (0..12).map(move |r| (r, c))).map(|(r, c)| data[r * 10 + c]).collect();
    ensure!(transposed.to_vec::<u32>()? == expect_t, "a transposed view read the wrong elements");
    // Writing through a view lands in the shared storage at the view's offset.
    let row = a.slice(0, 11, Some(12), 1)?;
    row.copy_from_slice(&[9u32; 10])?;
    let after = a.to_vec::<u32>()?;
    ensure!(after[110..] == [9u32; 10] && after[..110] == data[..110], "a write through a view missed its rows");
    ensure_err_layout(&a)?;
    Ok(())
}

fn ensure_err_layout(a: &Array) -> Outcome {
    crate::ensure_err!(a.slice(2, 0, None, 1), Error::InvalidArgument { .. } | Error::InvalidLayout { .. }, "axis 2");
    Ok(())
}

/// The copy engine between the target and every other device it can reach: the host,
/// its own second device, other backends.
pub fn copy_engine_across_devices(t: &Target) -> Outcome {
    let dev = t.device();
    let data: Vec<f32> = values(64 * 33);
    let src = Array::from_slice(dev, &data, &[64, 33])?;
    let mut others: Vec<gpuport_runtime::AnyDevice> = t.devices.iter().skip(1).cloned().collect();
    others.extend(t.foreign.iter().cloned());
    others.push(dev.clone());
    for other in &others {
        let there = Array::zeros(other, &[64, 33], src.dtype())?;
        copy(&src, &there)?;
        ensure!(there.to_vec::<f32>()? == data, "copy {} → {} lost data", dev.id(), other.id());
        // Back, into a strided view (every other column of a wider array).
        let wide = Array::zeros(dev, &[64, 66], src.dtype())?;
        let cols = wide.slice(1, 0, None, 2)?;
        copy(&there, &cols)?;
        ensure!(cols.to_vec::<f32>()? == data, "copy {} → strided view on {} lost data", other.id(), dev.id());
        let untouched = wide.slice(1, 1, None, 2)?.to_vec::<f32>()?;
        ensure!(untouched.iter().all(|&v| v == 0.0), "a strided copy wrote between its elements");
    }
    Ok(())
}

/// A write queued through an array on a blocked stream holds back a reader on another
/// stream that orders itself through the array's pending work.
pub fn pending_work_orders_streams(t: &Target) -> Outcome {
    let dev = t.device();
    let (a, b) = (stream(dev)?, stream(dev)?);
    let n = 4096;
    let src = Array::from_slice(dev, &values::<u32>(n), &[n])?;
    let dst = Array::zeros(dev, &[n], src.dtype())?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&a)?;
    gpuport_runtime::CopyEngine::default().copy_on(&src, &dst, &a)?;
    // B reads dst after the pending write.
    let out = dev.alloc(4 * n)?;
    dst.wait_pending(&b, Access::Read)?;
    b.copy(dst.buffer(), 0, &out, 0, 4 * n)?;
    dst.record_access(&b, Access::Read)?;
    // Held for a while, not asked once: a reader that does not wait has time to finish.
    ensure!(!finishes_within(&b, HELD_FOR)?, "a reader ran ahead of the array's pending write");
    gate.open();
    b.synchronize()?;
    let mut bytes = vec![0u8; 4 * n];
    b.read(&out, 0, &mut bytes)?;
    ensure!(bytes == gpuport_runtime::as_bytes(&values::<u32>(n)), "the reader did not see the array's pending write");
    dst.synchronize()?;
    ensure!(!dst.has_pending_work()?, "pending work remains after Array::synchronize");
    Ok(())
}
