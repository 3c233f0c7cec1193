//! A backend's device list that survives one broken device: discovery must still report
//! the others when a device has failed (lost, or answering every query with an error).

use gpuport_core::{BackendKind, DeviceId, DeviceInfo, Result};

/// The facts of devices `0..count`. A device whose facts cannot be read is listed with
/// its id and, as its name, why (`unavailable: …`), so the others stay usable; only when
/// every device fails is the first error returned (the backend is then unavailable).
pub fn device_infos(
    kind: BackendKind,
    count: u32,
    info: impl Fn(u32) -> Result<DeviceInfo>,
) -> Result<Vec<DeviceInfo>> {
    let mut out = Vec::with_capacity(count as usize);
    let mut first_error = None;
    for ordinal in 0..count {
        match info(ordinal) {
            Ok(i) => out.push(i),
            Err(e) => {
                log::warn!("{kind}:{ordinal}: {e}");
                out.push(DeviceInfo {
                    id: DeviceId::new(kind, ordinal),
                    name: format!("unavailable: {e}"),
                    total_memory: 0,
                    compute_capability: None,
                    arch: None,
                    multiprocessors: None,
                    pci_bus_id: None,
                    uuid: None,
                });
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if out.iter().all(|d| d.name.starts_with("unavailable: ")) => Err(e),
        _ => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuport_core::Error;

    fn info(ordinal: u32) -> Result<DeviceInfo> {
        if ordinal == 0 {
            return Err(Error::invalid_argument("device 0 was lost"));
        }
        Ok(DeviceInfo {
            id: DeviceId::new(BackendKind::Cuda, ordinal),
            name: "fine".into(),
            total_memory: 1,
            compute_capability: None,
            arch: None,
            multiprocessors: None,
            pci_bus_id: None,
            uuid: None,
        })
    }

    #[test]
    fn one_broken_device_leaves_the_others_listed() {
        let list = device_infos(BackendKind::Cuda, 2, info).unwrap();
        assert_eq!(list.len(), 2);
        assert!(list[0].name.contains("device 0 was lost"), "{}", list[0].name);
        assert_eq!(list[1].name, "fine");
        assert!(device_infos(BackendKind::Cuda, 1, info).is_err(), "every device broken: the backend is unavailable");
    }
}
