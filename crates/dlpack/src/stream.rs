//! The array-API stream handshake: what the consumer's `stream` argument means, by the
//! vendor rules of the Python specification, and making that stream wait for the array.

use gpuport_runtime::{Access, AnyDevice, Array, DefaultStream, DlDeviceType, Error, Result};

/// True for the device types whose consumers name a vendor stream: `kDLCUDA`,
/// `kDLCUDAManaged`, `kDLROCM`.
pub fn has_vendor_streams(ty: DlDeviceType) -> bool {
    matches!(ty, DlDeviceType::CUDA | DlDeviceType::CUDA_MANAGED | DlDeviceType::ROCM)
}

/// True for the device types that take no stream at all (only `None`): the CPU and pinned
/// host memory.
pub fn takes_no_stream(ty: DlDeviceType) -> bool {
    matches!(ty, DlDeviceType::CPU | DlDeviceType::CUDA_HOST | DlDeviceType::ROCM_HOST)
}

/// The `stream` argument naming the legacy default stream on `ty` (CUDA `1`, ROCm `0`);
/// `None` for devices without vendor streams.
pub fn legacy_stream_arg(ty: DlDeviceType) -> Option<i64> {
    match ty {
        DlDeviceType::CUDA | DlDeviceType::CUDA_MANAGED => Some(1),
        DlDeviceType::ROCM => Some(0),
        _ => None,
    }
}

/// The consumer's stream, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRequest {
    /// No stream given: CUDA's legacy default stream, ROCm's default stream; for the CPU
    /// and devices without streams, the data must be ready on return.
    None,
    /// The legacy default stream (CUDA `1`; ROCm `0`).
    Legacy,
    /// The per-thread default stream (CUDA `2`).
    PerThread,
    /// A stream handle of the consumer's (`cudaStream_t`, `hipStream_t`, a gpuport raw
    /// handle for other devices).
    Handle(usize),
    /// `-1`: the consumer synchronizes itself.
    NoSync,
}

impl StreamRequest {
    /// Parses the Python-level `stream` argument for a tensor on `device_type`. Invalid
    /// values (CUDA `0`, ROCm `1`/`2`, anything but None for the CPU and pinned memory,
    /// negatives but `-1`) are errors naming the value and the rule.
    pub fn parse(device_type: DlDeviceType, stream: Option<i64>) -> Result<StreamRequest> {
        let bad = |why: &str| {
            Err(Error::Interchange {
                what: format!("stream={} is not valid for {device_type}: {why}", stream.unwrap_or_default()),
            })
        };
        let Some(value) = stream else { return Ok(StreamRequest::None) };
        if takes_no_stream(device_type) {
            return bad("the CPU takes no stream (pass None)");
        }
        if value == -1 {
            return Ok(StreamRequest::NoSync);
        }
        if value < -1 {
            return bad("the only negative value is -1 (no synchronization)");
        }
        let handle = usize::try_from(value).map_err(|_| Error::Interchange { what: format!("stream={value}") })?;
        match device_type {
            DlDeviceType::CUDA | DlDeviceType::CUDA_MANAGED => match handle {
                0 => bad("0 is ambiguous on CUDA; use 1 (legacy default) or 2 (per-thread default)"),
                1 => Ok(StreamRequest::Legacy),
                2 => Ok(StreamRequest::PerThread),
                h => Ok(StreamRequest::Handle(h)),
            },
            DlDeviceType::ROCM => match handle {
                0 => Ok(StreamRequest::Legacy),
                1 | 2 => bad("1 and 2 are reserved on ROCm; use 0 or None for the default stream"),
                h => Ok(StreamRequest::Handle(h)),
            },
            _ => Ok(StreamRequest::Handle(handle)),
        }
    }
}

/// Makes the consumer's stream wait for all of `array`'s pending work (event waits, no
/// host block); with no stream on a device whose consumers have none (the CPU, pinned
/// memory, an unnamed stream on a device that is not CUDA or ROCm), waits on the host so
/// the data is ready on return. A foreign handle is wrapped, used and released without
/// being destroyed or synchronized.
///
/// # Safety
/// A [`StreamRequest::Handle`] must be a live stream of the array's device, as for
/// `Device::wrap_stream`.
pub unsafe fn handshake(array: &Array, device_type: DlDeviceType, request: StreamRequest) -> Result<()> {
    let dev: &AnyDevice = array.device();
    let gpu = has_vendor_streams(device_type);
    let stream = match request {
        StreamRequest::NoSync => return Ok(()),
        StreamRequest::None if !gpu => return array.synchronize(),
        StreamRequest::None | StreamRequest::Legacy => dev.default_stream(DefaultStream::Legacy)?,
        StreamRequest::PerThread => dev.default_stream(DefaultStream::PerThread)?,
        // SAFETY: the caller promises a live stream of this device.
        StreamRequest::Handle(h) => unsafe { dev.wrap_stream(h) }?,
    };
    array.wait_pending(&stream, Access::Read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_rules() {
        use StreamRequest::{Handle, Legacy, NoSync, PerThread};
        let cuda = DlDeviceType::CUDA;
        assert_eq!(StreamRequest::parse(cuda, None).unwrap(), StreamRequest::None);
        assert_eq!(StreamRequest::parse(cuda, Some(1)).unwrap(), Legacy);
        assert_eq!(StreamRequest::parse(cuda, Some(2)).unwrap(), PerThread);
        assert_eq!(StreamRequest::parse(cuda, Some(0x7f00)).unwrap(), Handle(0x7f00));
        assert_eq!(StreamRequest::parse(cuda, Some(-1)).unwrap(), NoSync);
        assert!(StreamRequest::parse(cuda, Some(0)).is_err());
        assert!(StreamRequest::parse(cuda, Some(-2)).is_err());
        let rocm = DlDeviceType::ROCM;
        assert_eq!(StreamRequest::parse(rocm, Some(0)).unwrap(), Legacy);
        assert_eq!(StreamRequest::parse(rocm, None).unwrap(), StreamRequest::None);
        assert!(StreamRequest::parse(rocm, Some(1)).is_err());
        assert!(StreamRequest::parse(rocm, Some(2)).is_err());
        assert_eq!(StreamRequest::parse(rocm, Some(0x5000)).unwrap(), Handle(0x5000));
        let cpu = DlDeviceType::CPU;
        assert_eq!(StreamRequest::parse(cpu, None).unwrap(), StreamRequest::None);
        assert!(StreamRequest::parse(cpu, Some(-1)).is_err(), "the CPU takes only None");
        let err = StreamRequest::parse(cpu, Some(1)).unwrap_err().to_string();
        assert!(err.contains("stream=1") && err.contains("kDLCPU"), "{err}");
    }
}
