//! What a cudarc or CuPy user reaches for first: typed reads and writes, array upload,
//! download and copy on a stream of their choosing, a copy to another device in one call,
//! range slicing, and picking the best device.

mod common;

use common::devices;
use gpuport_runtime::host::HostBackend;
use gpuport_runtime::prelude::*;

#[test]
fn typed_reads_and_writes_on_both_tiers() -> Result<()> {
    let (host, e0, _) = devices();
    for dev in [&host, &e0] {
        let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0)?;
        let b = dev.alloc(64)?;
        s.write_slice(&[1.5f32, -2.0, 3.25], &b, 8)?;
        assert_eq!(s.read_vec::<f32>(&b, 8, 3)?, vec![1.5, -2.0, 3.25]);
        assert!(s.read_vec::<f64>(&b, 60, 1).is_err(), "a read past the buffer is an error");
    }
    let typed = HostBackend.open(0)?;
    let s = typed.create_stream(StreamFlags::empty(), 0)?;
    let b = typed.alloc(16)?;
    s.write_slice(&[7u32, 8, 9, 10], &b, 0)?;
    assert_eq!(s.read_vec::<u32>(&b, 4, 2)?, vec![8, 9]);
    Ok(())
}

#[test]
fn arrays_on_a_named_stream() -> Result<()> {
    let (_, e0, _) = devices();
    let s = e0.create_stream(StreamFlags::NON_BLOCKING, 0)?;
    let a = Array::from_slice_on(&e0, &[1i32, 2, 3, 4, 5, 6], &[2, 3], &s)?;
    assert_eq!(a.to_vec_on::<i32>(&s)?, vec![1, 2, 3, 4, 5, 6]);
    a.range(1, 1..)?.copy_from_slice_on(&[20i32, 30, 50, 60], &s)?;
    assert_eq!(a.to_vec_on::<i32>(&s)?, vec![1, 20, 30, 4, 50, 60]);
    assert_eq!(a.range(0, ..=0)?.to_vec::<i32>()?, vec![1, 20, 30]);
    assert_eq!(a.range(1, 1..2)?.to_vec::<i32>()?, vec![20, 50]);
    assert!(a.range(1, 2..9).is_err(), "a range past the axis is an error");
    Ok(())
}

#[test]
fn to_device_copies_in_one_call() -> Result<()> {
    let (host, e0, e1) = devices();
    let a = Array::from_slice(&host, &[1u16, 2, 3, 4, 5, 6], &[3, 2])?;
    let strided = a.slice(0, 0, None, 2)?; // rows 0 and 2
    for dev in [&e0, &e1, &host] {
        let there = strided.to_device(dev)?;
        assert_eq!(there.device_id(), dev.id());
        assert_eq!(there.shape(), &[2, 2]);
        assert_eq!(there.to_vec::<u16>()?, vec![1, 2, 5, 6]);
    }
    Ok(())
}

#[test]
fn best_device_falls_back_to_the_host() -> Result<()> {
    if std::env::var_os(gpuport_runtime::DEVICE_ENV).is_some() {
        return Ok(()); // the user chose; best_device honours it (checked by the demo)
    }
    let rt = Runtime::discover();
    let best = rt.best_device()?;
    let gpu = ["cuda", "rocm"].into_iter().find(|b| rt.report_for(b).is_some_and(|r| r.is_available()));
    match gpu {
        Some(name) => assert_eq!(best.id().kind.name(), name),
        None => assert_eq!(best.id(), gpuport_runtime::DeviceId::HOST),
    }
    Ok(())
}
