//! The mirrored-array state machine: every transition, no copy when clean, forced copies,
//! acquire for read and write, shared state across views, wrapping existing buffers.

mod common;

use common::devices;
use gpuport_runtime::{Access, Array, DType, MirroredArray, SyncState};

fn mirrored(n: usize) -> MirroredArray {
    let (host, e0, _) = devices();
    MirroredArray::zeros(&host, &e0, &[n], DType::I32).unwrap()
}

#[test]
fn host_writes_reach_the_device_once() {
    let m = mirrored(10);
    assert_eq!(m.state(), SyncState::Clean);
    let h = m.acquire_host(Access::Write).unwrap();
    assert_eq!(m.state(), SyncState::HostDirty);
    h.copy_from_slice(&(0..10).collect::<Vec<i32>>()).unwrap();
    assert_eq!(m.copy_counts(), (0, 0), "acquiring a clean side copies nothing");
    let d = m.acquire_device(Access::Read).unwrap();
    assert_eq!(m.state(), SyncState::Clean);
    assert_eq!(m.copy_counts(), (1, 0));
    assert_eq!(d.to_vec::<i32>().unwrap(), (0..10).collect::<Vec<i32>>());
    m.acquire_device(Access::Read).unwrap();
    assert_eq!(m.copy_counts(), (1, 0), "no second copy while clean");
}

#[test]
fn device_writes_reach_the_host_once() {
    let m = mirrored(4);
    let d = m.acquire_device(Access::Write).unwrap();
    assert_eq!(m.state(), SyncState::DeviceDirty);
    d.copy_from_slice(&[5i32, 6, 7, 8]).unwrap();
    let h = m.acquire_host(Access::Read).unwrap();
    assert_eq!(m.state(), SyncState::Clean);
    assert_eq!(h.to_vec::<i32>().unwrap(), vec![5, 6, 7, 8]);
    assert_eq!(m.copy_counts(), (0, 1));
}

#[test]
fn explicit_transitions_and_forced_copies() {
    let m = mirrored(3);
    // Clean: nothing copies unless forced.
    assert!(!m.host_to_device(false).unwrap());
    assert!(!m.device_to_host(false).unwrap());
    assert!(!m.synchronize().unwrap());
    assert_eq!(m.copy_counts(), (0, 0));
    assert!(m.host_to_device(true).unwrap());
    assert!(m.device_to_host(true).unwrap());
    assert_eq!(m.copy_counts(), (1, 1));
    // HostDirty: device_to_host does nothing, host_to_device copies, synchronize copies.
    m.set_host_modified();
    assert!(!m.device_to_host(false).unwrap());
    assert_eq!(m.state(), SyncState::HostDirty);
    assert!(m.host_to_device(false).unwrap());
    assert_eq!(m.state(), SyncState::Clean);
    m.set_host_modified();
    assert!(m.synchronize().unwrap());
    assert_eq!(m.copy_counts(), (3, 1));
    // DeviceDirty: the mirror image.
    m.set_device_modified();
    assert!(!m.host_to_device(false).unwrap());
    assert!(m.device_to_host(false).unwrap());
    m.set_device_modified();
    assert!(m.synchronize().unwrap());
    assert_eq!(m.copy_counts(), (3, 3));
    // set_synchronized drops a pending copy.
    m.set_host_modified();
    m.set_synchronized();
    assert_eq!(m.state(), SyncState::Clean);
    assert!(!m.synchronize().unwrap());
    assert_eq!(m.copy_counts(), (3, 3));
    // The last modification wins.
    m.set_host_modified();
    m.set_device_modified();
    assert_eq!(m.state(), SyncState::DeviceDirty);
}

#[test]
fn views_share_the_state_and_copy_the_whole_base() {
    let m = mirrored(8);
    let tail = m.slice(0, 4, None, 1).unwrap();
    let rev = m.slice(0, 7, None, -1).unwrap();
    assert!(tail.shares_state_with(&m) && rev.shares_state_with(&m));
    let h = tail.acquire_host(Access::Write).unwrap();
    h.copy_from_slice(&[1i32, 2, 3, 4]).unwrap();
    assert_eq!(m.state(), SyncState::HostDirty, "a view's write marks the whole array");
    let d = rev.acquire_device(Access::Read).unwrap();
    assert_eq!(d.to_vec::<i32>().unwrap(), vec![4, 3, 2, 1, 0, 0, 0, 0]);
    assert_eq!(m.copy_counts(), (1, 0));
    assert_eq!(rev.shape().unwrap(), vec![8]);
    assert!(m.permute(&[0]).is_ok());
    assert!(m.slice(0, 9, None, 1).is_err());
}

#[test]
fn wrapping_existing_buffers_copies_nothing() {
    let (host, e0, e1) = devices();
    let h = Array::from_slice(&host, &[1.5f64, 2.5], &[2]).unwrap();
    let d = Array::from_slice(&e0, &[9.0f64, 9.0], &[2]).unwrap();
    let m = MirroredArray::from_parts(h.clone(), d.clone(), SyncState::HostDirty).unwrap();
    assert_eq!(m.copy_counts(), (0, 0));
    assert_eq!(d.to_vec::<f64>().unwrap(), vec![9.0, 9.0], "wrapping does not copy");
    let got = m.acquire_device(Access::Read).unwrap();
    assert!(got.buffer().same_allocation(d.buffer()), "the wrapped buffer is used in place");
    assert_eq!(got.to_vec::<f64>().unwrap(), vec![1.5, 2.5]);
    // Mismatched parts and a device-only "host" side are refused.
    let other = Array::zeros(&e0, &[3], DType::F64).unwrap();
    assert!(MirroredArray::from_parts(h.clone(), other, SyncState::Clean).is_err());
    let not_host = Array::zeros(&e1, &[2], DType::F64).unwrap();
    assert!(MirroredArray::from_parts(not_host, d, SyncState::Clean).is_err());
    let strided = Array::zeros(&host, &[4], DType::F64).unwrap().slice(0, 0, None, 2).unwrap();
    assert!(MirroredArray::from_parts(strided, Array::zeros(&e0, &[2], DType::F64).unwrap(), SyncState::Clean).is_err());
}
