//! Device mapping, both ways, read from what each backend declares
//! (`Backend::DLPACK`): no table here names a backend, so a registered plugin maps like a
//! built-in one.

use gpuport_runtime::{AnyDevice, Array, BackendKind, DlDeviceType, Error, MemoryKind, Result, Runtime};

use crate::abi::DLDevice;

/// The `DLDevice` an array exports as: its backend's declared type for the kind of memory
/// its allocation is (a pinned buffer is `kDLCUDAHost`, not `kDLCPU`), with the device's
/// ordinal (0 for pinned and managed memory, as the header asks).
pub fn dl_device_of(array: &Array) -> Result<DLDevice> {
    let memory = array.buffer().memory();
    let declared = array.device().dlpack_devices();
    let ty = declared.for_memory(memory).ok_or_else(|| Error::Interchange {
        what: format!("{:?} memory of {} has no DLPack device type", memory, array.device_id()),
    })?;
    let device_id = match memory {
        MemoryKind::Device | MemoryKind::Host => array.device_id().ordinal as i32,
        _ => 0,
    };
    Ok(DLDevice { device_type: ty.0, device_id })
}

/// Where a `DLDevice` lives in gpuport.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The device that owns (or, for pinned and managed memory, registered) the memory.
    pub device: AnyDevice,
    /// What kind of memory the type denotes.
    pub memory: MemoryKind,
}

/// The gpuport device and memory kind of `dl`: the first available backend declaring the
/// type for its device memory, else for its pinned or managed memory. `kDLCPU` is the host.
/// An unknown or unsupported type, or an ordinal past the backend's devices, is an error
/// naming it. Where several backends declare the type and the memory's address is known,
/// [`resolve_at`] picks the one that owns it.
pub fn resolve(rt: &Runtime, dl: DLDevice) -> Result<Resolved> {
    let ty = DlDeviceType(dl.device_type);
    if ty == DlDeviceType::CPU {
        return host(rt);
    }
    let (report, memory) = declaring(rt, ty).next().ok_or_else(|| unhandled(ty, dl))?;
    Ok(Resolved { device: report.open(ordinal(ty, dl)?)?, memory })
}

/// [`resolve`] for memory at `addr`: when several available backends declare the type —
/// two software devices both `kDLExtDev`, the ext device and a loaded plugin — the one
/// whose device at that ordinal knows the address as its own memory (`pointer_attributes`)
/// is the memory's; when none does, the first, as [`resolve`] — or, where a candidate could
/// not answer (its `pointer_attributes` failed), that failure. With one candidate nothing
/// is asked.
pub fn resolve_at(rt: &Runtime, dl: DLDevice, addr: u64) -> Result<Resolved> {
    let ty = DlDeviceType(dl.device_type);
    if ty == DlDeviceType::CPU {
        return host(rt);
    }
    let mut candidates = declaring(rt, ty);
    let (first, memory) = candidates.next().ok_or_else(|| unhandled(ty, dl))?;
    let ordinal = ordinal(ty, dl)?;
    let mut others = candidates.peekable();
    if others.peek().is_none() {
        return Ok(Resolved { device: first.open(ordinal)?, memory });
    }
    // A candidate that cannot answer is passed over, but its failure is kept: when no
    // other candidate owns the address, it is the answer (it may be the owner's).
    let mut failed = None;
    for (report, memory) in std::iter::once((first, memory)).chain(others) {
        let Ok(device) = report.open(ordinal) else { continue };
        match device.pointer_attributes(addr) {
            Ok(a) if a.memory != MemoryKind::Unregistered && a.device.is_none_or(|d| d.kind == device.id().kind) => {
                return Ok(Resolved { device, memory });
            }
            Ok(_) => {}
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(Resolved { device: first.open(ordinal)?, memory }),
    }
}

/// The host device (`kDLCPU`): the one the runtime's report keeps, borrowed and cloned
/// here, once (no device string parsed, no handle moved through the calls in between);
/// `Runtime::device` gives the error when the host was left out.
fn host(rt: &Runtime) -> Result<Resolved> {
    let kept = match rt.report_for(BackendKind::Host.name()) {
        Some(host) => host.kept(0)?,
        None => None,
    };
    let device = match kept {
        Some(device) => device.clone(),
        None => rt.device(BackendKind::Host.name())?,
    };
    Ok(Resolved { device, memory: MemoryKind::Host })
}

/// The available backends declaring `ty`, with the memory it denotes for each: those
/// declaring it for device memory first, then for pinned or managed memory.
fn declaring(rt: &Runtime, ty: DlDeviceType) -> impl Iterator<Item = (&gpuport_runtime::BackendReport, MemoryKind)> {
    let with = move |want_device: bool| {
        rt.reports().iter().filter_map(move |r| {
            let memory = r.dlpack_devices()?.memory_for(ty)?;
            (want_device == (memory == MemoryKind::Device)).then_some((r, memory))
        })
    };
    with(true).chain(with(false))
}

fn unhandled(ty: DlDeviceType, dl: DLDevice) -> Error {
    Error::Interchange { what: format!("no available backend handles DLPack {ty} (device_id {})", dl.device_id) }
}

fn ordinal(ty: DlDeviceType, dl: DLDevice) -> Result<u32> {
    u32::try_from(dl.device_id)
        .map_err(|_| Error::Interchange { what: format!("a negative device_id {} for {ty}", dl.device_id) })
}
