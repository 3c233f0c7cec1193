//! Export with the producer join, and import with the consumer's synchronization policy.

use gpuport_runtime::{Access, AnyDevice, AnyStream, Array, DefaultStream, Error, ForeignElements, Result, Runtime};

use crate::model::{CaiStream, Interface, VERSION};

/// An exported interface, and the stream it names kept alive with it (the device's
/// legacy default stream: it outlives the array that exported it).
#[derive(Debug, Clone)]
pub struct Export {
    /// The interface (`to_value` gives the dict).
    pub interface: Interface,
    /// The named stream, when one is named.
    pub stream: Option<AnyStream>,
}

/// Exports `array`. Version 3; C-contiguous arrays give `strides: None`, others byte
/// strides; zero-size arrays pointer 0; read-only arrays `(ptr, True)`; a dtype with no
/// typestr (bfloat16, fp8, …) is an error. When the array has pending work — on any
/// number of streams — the device's legacy default stream is made to wait for all of it
/// (events, no host block) and is named (`1` on CUDA); with none, `stream` is `None`.
pub fn export(array: &Array) -> Result<Export> {
    let dtype = array.dtype();
    dtype.to_typestr()?; // refused up front: no silent reinterpretation
    let item = dtype.itemsize()?;
    let strides = if array.layout().is_c_contiguous() { None } else { Some(array.layout().byte_strides(item)?) };
    let data = if array.numel() == 0 { 0 } else { array.data_addr() };
    let (stream, named) = if array.has_pending_work()? {
        let join = array.device().default_stream(DefaultStream::Legacy)?;
        array.wait_pending(&join, Access::Write)?;
        (CaiStream::from_raw(join.raw_handle()), Some(join))
    } else {
        (CaiStream::None, None)
    };
    let interface = Interface {
        shape: array.shape().to_vec(),
        dtype,
        data,
        read_only: array.is_read_only(),
        version: VERSION,
        strides,
        stream,
    };
    Ok(Export { interface, stream: named })
}

/// How a consumer honours the `stream` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sync {
    /// The default: an event recorded on the given stream becomes the imported array's
    /// pending write, so every later use of the array through gpuport waits for it on the
    /// device (no host block) — as cuda.core does.
    #[default]
    Enqueue,
    /// Synchronize the given stream on the host before returning (Numba's behaviour).
    Host,
    /// Ignore the entry: the user has taken care of synchronization.
    Ignore,
}

impl Sync {
    /// `requested`, unless `GPUPORT_CAI_SYNC=0` says to ignore the stream entry.
    pub fn from_env(requested: Sync) -> Sync {
        match std::env::var("GPUPORT_CAI_SYNC") {
            Ok(v) if v.trim() == "0" => Sync::Ignore,
            _ => requested,
        }
    }
}

/// The device that owns `addr`, asking every available backend's devices. A device that
/// cannot answer is passed over (another may own the address), and its failure is the
/// error when none does.
fn owner_of(rt: &Runtime, addr: u64) -> Result<(AnyDevice, gpuport_runtime::PointerAttributes)> {
    let mut failed = None;
    for report in rt.reports().iter().filter(|r| r.is_available()) {
        let count = match &report.status {
            gpuport_runtime::BackendStatus::Available { devices, .. } => devices.len(),
            gpuport_runtime::BackendStatus::Unavailable(_) => 0,
        };
        for ordinal in 0..count {
            let dev = rt.device(&format!("{}:{ordinal}", report.name))?;
            match dev.pointer_attributes(addr) {
                Ok(attrs) if attrs.device == Some(dev.id()) => return Ok((dev, attrs)),
                Ok(_) => {}
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
    }
    Err(match failed {
        Some(e) => Error::Interchange {
            what: format!("data pointer {addr:#x} belongs to no device that could answer; one failed: {e}"),
        },
        None => Error::Interchange { what: format!("data pointer {addr:#x} belongs to no device gpuport knows") },
    })
}

/// Imports an interface as an array over the producer's memory. `owner` (the producer
/// object, or whatever keeps the memory alive) is held in the array's buffer as long as
/// the array's memory is used; `device` names the device for a zero-size array (pointer 0), else the pointer's
/// owner is found with pointer attributes. `sync` says how the `stream` entry is honoured.
///
/// # Safety
/// The interface describes live memory that `owner` keeps alive, and a stream handle in
/// it is a live stream of that memory's device (the producer's promise).
pub unsafe fn import<K: Send + std::marker::Sync + 'static>(
    rt: &Runtime,
    interface: &Interface,
    owner: K,
    device: Option<&AnyDevice>,
    sync: Sync,
) -> Result<Array> {
    let layout = interface.layout()?;
    let (dev, attributes) = if interface.numel() == 0 {
        let dev = match device {
            Some(d) => d.clone(),
            None => rt.best_device()?,
        };
        (dev, None)
    } else {
        let (dev, attrs) = owner_of(rt, interface.data)?;
        (dev, Some(attrs))
    };
    let (memory, host_accessible) =
        attributes.as_ref().map_or((gpuport_runtime::MemoryKind::Device, false), |a| (a.memory, a.host_accessible));
    // An address by the protocol's definition (an integer in a dict): host pointers into
    // the array are made from it with the provenance it was exposed with. The owner's
    // answer goes along, so the span is checked against its allocation without asking
    // again.
    let at = ForeignElements { element0: interface.data, memory, host_accessible, pointer: None, attributes };
    // SAFETY: the caller promises live memory kept alive by `owner`, which the array holds.
    let mut array = unsafe { Array::from_foreign(dev.clone(), at, interface.dtype, layout, owner) }?;
    if interface.read_only {
        array = array.into_read_only();
    }
    let stream = match (sync, interface.stream) {
        (Sync::Ignore, _) | (_, CaiStream::None) => return Ok(array),
        (_, CaiStream::Legacy) => dev.default_stream(DefaultStream::Legacy)?,
        (_, CaiStream::PerThread) => dev.default_stream(DefaultStream::PerThread)?,
        // SAFETY: the caller promises a live stream of this device.
        (_, CaiStream::Handle(h)) => unsafe { dev.wrap_stream(h) }?,
    };
    match sync {
        Sync::Enqueue => array.record_access(&stream, Access::Write)?,
        Sync::Host => stream.synchronize()?,
        Sync::Ignore => {}
    }
    Ok(array)
}
