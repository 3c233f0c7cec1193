//! Every path that takes a range, at small sizes and past every size where a port changes
//! strategy, at an odd offset inside a larger buffer: the range gets exactly its bytes and
//! the bytes around it are untouched.

use gpuport_runtime::{AnyDevice, AnyStream, Buffer};

use super::{pattern, read_all, stream};
use crate::{ensure, Failure, Outcome, Target};

/// Sizes: single bytes, around a page, past 64 KiB, and past 16 MiB + 13 (the queue kit
/// splits copies across threads from 16 MiB; odd, so no chunk divides it). Miri runs the
/// small ones and one past its own split threshold (64 KiB).
const SIZES: &[usize] =
    if cfg!(miri) { &[1, 4097, (64 << 10) + 13] } else { &[1, 255, 4097, (64 << 10) + 1, (16 << 20) + 13] };
/// Bytes before the range (odd, so the range is unaligned) and after it.
const BEFORE: usize = 3;
const AFTER: usize = 5;

/// A buffer of `BEFORE + n + AFTER` bytes holding `fill`, and its model.
fn surrounded(dev: &AnyDevice, s: &AnyStream, n: usize, seed: u8) -> Result<(Buffer, Vec<u8>), Failure> {
    let model = pattern(BEFORE + n + AFTER, seed);
    let b = dev.alloc(model.len())?;
    s.write(&model, &b, 0)?;
    Ok((b, model))
}

/// The range's bytes are the model's, and so are the bytes around it.
fn check(s: &AnyStream, b: &Buffer, model: &[u8], what: &str, n: usize) -> Outcome {
    let got = read_all(s, b)?;
    let head = got[..BEFORE] == model[..BEFORE];
    let tail = got[BEFORE + n..] == model[BEFORE + n..];
    let range = got[BEFORE..BEFORE + n] == model[BEFORE..BEFORE + n];
    ensure!(head && tail, "{what} of {n} bytes at offset {BEFORE} touched the bytes around its range");
    ensure!(range, "{what} of {n} bytes at offset {BEFORE} wrote the wrong bytes");
    Ok(())
}

/// `Stream::copy`, `Stream::memset`, `Device::memset`, `Stream::write` and `Stream::read`
/// at every size, each on a range inside a larger buffer.
pub fn every_path_at_every_size(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    for &n in SIZES {
        let data = pattern(n, 91);
        // Stream::copy from an odd offset of one buffer to an odd offset of another.
        let (src, _) = surrounded(dev, &s, n, 1)?;
        s.write(&data, &src, BEFORE)?;
        let (dst, mut model) = surrounded(dev, &s, n, 2)?;
        s.copy(&src, BEFORE, &dst, BEFORE, n)?;
        model[BEFORE..BEFORE + n].copy_from_slice(&data);
        check(&s, &dst, &model, "Stream::copy", n)?;
        // Stream::memset and Device::memset.
        let (b, mut model) = surrounded(dev, &s, n, 3)?;
        s.memset(&b, BEFORE, n, 0xC3)?;
        model[BEFORE..BEFORE + n].fill(0xC3);
        check(&s, &b, &model, "Stream::memset", n)?;
        s.synchronize()?;
        dev.memset(&b, BEFORE, n, 0x3C)?;
        model[BEFORE..BEFORE + n].fill(0x3C);
        check(&s, &b, &model, "Device::memset", n)?;
        // Stream::write, then Stream::read of the range alone.
        let (b, mut model) = surrounded(dev, &s, n, 4)?;
        s.write(&data, &b, BEFORE)?;
        model[BEFORE..BEFORE + n].copy_from_slice(&data);
        check(&s, &b, &model, "Stream::write", n)?;
        let mut out = vec![0u8; n];
        s.read(&b, BEFORE, &mut out)?;
        ensure!(out == data, "Stream::read of {n} bytes at offset {BEFORE} read the wrong bytes");
    }
    Ok(())
}
