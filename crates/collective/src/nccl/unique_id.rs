//! [`UniqueId`]: what every rank of a new NCCL or RCCL communicator is given, made by one
//! rank and carried to the others by whatever the job already has.

use gpuport_core::{Error, Result};
use gpuport_runtime::AnyDevice;

use super::calls::{self, UNIQUE_ID_BYTES};
use super::comm::engine_for;

/// The id that names a new NCCL or RCCL communicator (`ncclUniqueId`, 128 bytes): one rank
/// makes it ([`UniqueId::new`]), every rank passes the same to
/// [`Communicator::init_rank`](crate::Communicator::init_rank). It travels as bytes
/// ([`UniqueId::as_bytes`], [`UniqueId::from_bytes`]) over whatever the job already has —
/// MPI (which [`Communicator::for_device`](crate::Communicator::for_device) does for you), a
/// file, a key-value store.
///
/// NCCL's own bootstrap needs no carrying: with `NCCL_COMM_ID=host:port` set on every rank,
/// NCCL makes the same id on each (rank 0 listens there), so each rank calls
/// [`UniqueId::new`] itself.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId {
    bytes: [u8; UNIQUE_ID_BYTES],
}

impl UniqueId {
    /// The id's size in bytes (`NCCL_UNIQUE_ID_BYTES`).
    pub const BYTES: usize = UNIQUE_ID_BYTES;

    /// A new id from the engine of `device`'s backend (`ncclGetUniqueId`: NCCL for CUDA,
    /// RCCL for ROCm). With NCCL's own bootstrap (no `NCCL_COMM_ID`), the engine starts
    /// listening for the ranks here, so the rank that makes it is one of them.
    pub fn new(device: &AnyDevice) -> Result<UniqueId> {
        let loaded = engine_for(device, "UniqueId::new")?;
        Ok(UniqueId { bytes: calls::get_unique_id(loaded)? })
    }

    /// The id's bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; UNIQUE_ID_BYTES] {
        &self.bytes
    }

    /// The id another rank made, from its bytes; `InvalidArgument` unless there are
    /// exactly [`UniqueId::BYTES`].
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        let bytes = <[u8; UNIQUE_ID_BYTES]>::try_from(bytes).map_err(|_| {
            Error::invalid_argument(format!("a unique id is {UNIQUE_ID_BYTES} bytes, not {}", bytes.len()))
        })?;
        Ok(UniqueId { bytes })
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head: String = self.bytes[..8].iter().map(|b| format!("{b:02x}")).collect();
        write!(f, "UniqueId({head}…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_travels_as_its_bytes_and_only_whole() {
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        bytes[0] = 0xab;
        bytes[127] = 7;
        let id = UniqueId::from_bytes(&bytes).unwrap();
        assert_eq!(id.as_bytes(), &bytes);
        assert_eq!(format!("{id:?}"), "UniqueId(ab00000000000000…)");
        for wrong in [0, 127, 129] {
            let e = UniqueId::from_bytes(&vec![0; wrong]).unwrap_err();
            assert!(e.to_string().contains(&format!("not {wrong}")), "{e}");
        }
    }
}
