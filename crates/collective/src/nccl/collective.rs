//! The collectives of an NCCL or RCCL communicator, queued on gpuport streams: the arrays
//! checked against the rank's device, the stream made to wait for their pending work, the
//! call launched on the stream's own handle (inside a group: at the group's end), its end
//! recorded as an event after it, and the whole followed by the watchdog
//! ([`super::flight`]) until that event has completed.
//!
//! The stream's handle goes to the engine as it is: NCCL takes the legacy and per-thread
//! default streams' handles (`cudaStreamLegacy`, `cudaStreamPerThread`) as CUDA does, and
//! resolves the per-thread one on the thread that launches — the calling thread, or the
//! one ending the group — which is the thread whose stream gpuport named, since gpuport's
//! communicators are blocking ones, launched from the caller.

use std::ffi::c_int;
use std::sync::Arc;

use gpuport_core::{DType, DTypeCode, DefaultStream, Error, EventFlags, Result};
use gpuport_runtime::{Access, AnyStream, Array};

use super::calls::{self, Call, Launch};
use super::comm::NcclComm;
use super::flight::{self, Flight};
use super::group;
use super::Version;
use crate::op::ReduceOp;
use crate::operands::{check_arrays, Role};
use crate::work::Work;

/// `ncclDataType_t` values.
mod dtype {
    use std::ffi::c_int;
    pub(super) const INT8: c_int = 0;
    pub(super) const UINT8: c_int = 1;
    pub(super) const INT32: c_int = 2;
    pub(super) const UINT32: c_int = 3;
    pub(super) const INT64: c_int = 4;
    pub(super) const UINT64: c_int = 5;
    pub(super) const FLOAT16: c_int = 6;
    pub(super) const FLOAT32: c_int = 7;
    pub(super) const FLOAT64: c_int = 8;
    pub(super) const BFLOAT16: c_int = 9;
}

/// `ncclRedOp_t` values.
mod redop {
    use std::ffi::c_int;
    pub(super) const SUM: c_int = 0;
    pub(super) const PROD: c_int = 1;
    pub(super) const MAX: c_int = 2;
    pub(super) const MIN: c_int = 3;
    pub(super) const AVG: c_int = 4;
}

/// NCCL 2.10: `ncclAvg` and `ncclBfloat16`.
const V2_10: Version = Version::new(2, 10, 0);

/// How the engine reduces `dtype` with `op`: its dtype, how many of its elements one array
/// element is, and its operation. Complex numbers sum (and average) as pairs of reals;
/// booleans take `Max` for or and `Min` for and.
fn reduction(engine: &'static str, version: Version, dtype: DType, op: ReduceOp) -> Result<(c_int, usize, c_int)> {
    let refuse = |what: String| Error::EngineUnsupported { engine, what };
    let since = |v: Version, what: &str| -> Result<()> {
        if version < v {
            return Err(refuse(format!("{what} (from NCCL {v}; {engine} {version} is loaded)")));
        }
        Ok(())
    };
    let code = match op {
        ReduceOp::Sum => redop::SUM,
        ReduceOp::Prod => redop::PROD,
        ReduceOp::Max => redop::MAX,
        ReduceOp::Min => redop::MIN,
        ReduceOp::Avg => {
            since(V2_10, "ReduceOp::Avg")?;
            redop::AVG
        }
    };
    if dtype.lanes() != 1 {
        return Err(refuse(format!("reductions of {dtype} arrays")));
    }
    let (ty, per) = match (dtype.code(), dtype.bits()) {
        (DTypeCode::Bool, 8) => match op {
            ReduceOp::Max | ReduceOp::Min => (dtype::UINT8, 1),
            _ => return Err(refuse(format!("ReduceOp::{op:?} on {dtype} arrays (use Max for or, Min for and)"))),
        },
        (DTypeCode::Complex, bits @ (64 | 128)) => match op {
            ReduceOp::Sum | ReduceOp::Avg => (if bits == 64 { dtype::FLOAT32 } else { dtype::FLOAT64 }, 2),
            _ => {
                return Err(refuse(format!(
                    "ReduceOp::{op:?} on {dtype} arrays (complex numbers reduce by Sum and Avg only)"
                )))
            }
        },
        (DTypeCode::Int, 8) => (dtype::INT8, 1),
        (DTypeCode::UInt, 8) => (dtype::UINT8, 1),
        (DTypeCode::Int, 32) => (dtype::INT32, 1),
        (DTypeCode::UInt, 32) => (dtype::UINT32, 1),
        (DTypeCode::Int, 64) => (dtype::INT64, 1),
        (DTypeCode::UInt, 64) => (dtype::UINT64, 1),
        (DTypeCode::Float, 16) => (dtype::FLOAT16, 1),
        (DTypeCode::Float, 32) => (dtype::FLOAT32, 1),
        (DTypeCode::Float, 64) => (dtype::FLOAT64, 1),
        (DTypeCode::Bfloat, 16) => {
            since(V2_10, "reductions of bfloat16 arrays")?;
            (dtype::BFLOAT16, 1)
        }
        _ => {
            return Err(refuse(format!(
                "reductions of {dtype} arrays ({engine} reduces 8-, 32- and 64-bit integers, float16, bfloat16, \
                 float32, float64, and complex numbers by Sum and Avg)"
            )))
        }
    };
    Ok((ty, per, code))
}

/// The dtype of a collective that moves data without reducing it: its elements go as
/// bytes, so every dtype moves, whatever the engine's own dtypes are.
const BYTES: c_int = dtype::INT8;

pub(crate) fn all_reduce(
    comm: &Arc<NcclComm>,
    x: &Array,
    op: ReduceOp,
    out: Option<&Array>,
    stream: Option<&AnyStream>,
) -> Result<Work> {
    let (dtype, per, op) = reduction(comm.loaded.flavour.name(), comm.loaded.version, x.dtype(), op)?;
    let count = x.numel() * per;
    let arrays = match out {
        None => vec![(x, Role::InOut)],
        Some(out) => vec![(x, Role::In), (out, Role::Out)],
    };
    queue(comm, "all_reduce", &arrays, stream, |p| Launch {
        call: Call::AllReduce,
        send: p[0],
        recv: *p.last().unwrap_or(&p[0]),
        count,
        dtype,
        op,
        rank: 0,
    })
}

pub(crate) fn broadcast(comm: &Arc<NcclComm>, x: &Array, root: usize, stream: Option<&AnyStream>) -> Result<Work> {
    let role = if comm.rank == root { Role::In } else { Role::Out };
    let (count, root) = (x.nbytes(), rank_arg(root)?);
    queue(comm, "broadcast", &[(x, role)], stream, |p| Launch {
        call: Call::Broadcast,
        send: p[0],
        recv: p[0],
        count,
        dtype: BYTES,
        op: 0,
        rank: root,
    })
}

pub(crate) fn reduce(
    comm: &Arc<NcclComm>,
    x: &Array,
    op: ReduceOp,
    root: usize,
    out: Option<&Array>,
    stream: Option<&AnyStream>,
) -> Result<Work> {
    let (dtype, per, op) = reduction(comm.loaded.flavour.name(), comm.loaded.version, x.dtype(), op)?;
    let (count, at_root) = (x.numel() * per, comm.rank == root);
    let arrays = match out {
        Some(out) => vec![(x, Role::In), (out, Role::Out)],
        None if at_root => vec![(x, Role::InOut)],
        // Away from the root the receive buffer is not used: NCCL is given the input.
        None => vec![(x, Role::In)],
    };
    let root = rank_arg(root)?;
    queue(comm, "reduce", &arrays, stream, |p| Launch {
        call: Call::Reduce,
        send: p[0],
        recv: *p.last().unwrap_or(&p[0]),
        count,
        dtype,
        op,
        rank: root,
    })
}

pub(crate) fn all_gather(comm: &Arc<NcclComm>, x: &Array, out: &Array, stream: Option<&AnyStream>) -> Result<Work> {
    let count = x.nbytes();
    queue(comm, "all_gather", &[(x, Role::In), (out, Role::Out)], stream, |p| Launch {
        call: Call::AllGather,
        send: p[0],
        recv: p[1],
        count,
        dtype: BYTES,
        op: 0,
        rank: 0,
    })
}

pub(crate) fn reduce_scatter(
    comm: &Arc<NcclComm>,
    x: &Array,
    op: ReduceOp,
    out: &Array,
    stream: Option<&AnyStream>,
) -> Result<Work> {
    let (dtype, per, op) = reduction(comm.loaded.flavour.name(), comm.loaded.version, x.dtype(), op)?;
    let count = out.numel() * per;
    queue(comm, "reduce_scatter", &[(x, Role::In), (out, Role::Out)], stream, |p| Launch {
        call: Call::ReduceScatter,
        send: p[0],
        recv: p[1],
        count,
        dtype,
        op,
        rank: 0,
    })
}

pub(crate) fn all_to_all(comm: &Arc<NcclComm>, x: &Array, out: &Array, stream: Option<&AnyStream>) -> Result<Work> {
    // NCCL's count is one block's: what goes to each rank.
    let count = x.nbytes() / comm.size;
    queue(comm, "all_to_all", &[(x, Role::In), (out, Role::Out)], stream, |p| Launch {
        call: Call::AllToAll,
        send: p[0],
        recv: p[1],
        count,
        dtype: BYTES,
        op: 0,
        rank: 0,
    })
}

/// `send` (to `peer`) or `recv` (from it).
pub(crate) fn message(
    comm: &Arc<NcclComm>,
    send: bool,
    x: &Array,
    peer: usize,
    tag: u16,
    stream: Option<&AnyStream>,
) -> Result<Work> {
    let what = if send { "send" } else { "recv" };
    if tag != 0 {
        return Err(Error::EngineUnsupported {
            engine: comm.loaded.flavour.name(),
            what: format!(
                "{what} with tag {tag} (it matches messages between two ranks in the order they are issued: tag 0 only)"
            ),
        });
    }
    let (count, peer, role) = (x.nbytes(), rank_arg(peer)?, if send { Role::In } else { Role::Out });
    queue(comm, what, &[(x, role)], stream, |p| Launch {
        call: if send { Call::Send } else { Call::Recv },
        send: p[0],
        recv: p[0],
        count,
        dtype: BYTES,
        op: 0,
        rank: peer,
    })
}

fn rank_arg(rank: usize) -> Result<c_int> {
    c_int::try_from(rank).map_err(|_| Error::invalid_argument(format!("rank {rank} is past {}", c_int::MAX)))
}

/// Queues the collective `launch` builds from the arrays' device addresses on `stream` (the
/// rank's device's legacy default stream when `None`), after the arrays' pending work, and
/// hands it to the watchdog.
fn queue(
    comm: &Arc<NcclComm>,
    what: &'static str,
    arrays: &[(&Array, Role)],
    stream: Option<&AnyStream>,
    launch: impl FnOnce(&[u64]) -> Launch,
) -> Result<Work> {
    let engine = comm.loaded.flavour.name();
    let device = &comm.device;
    let owned;
    let stream = match stream {
        Some(s) => s,
        None => {
            owned = device.default_stream(DefaultStream::Legacy)?;
            &owned
        }
    };
    // Another vendor's handle, or another device's: the rank's collectives run on its own
    // device, whose stream and memory the engine is given.
    let on_device = |id: gpuport_core::DeviceId, thing: &str| -> Result<()> {
        if id != device.id() {
            return Err(Error::BackendMismatch {
                operation: what,
                expected: format!("{} ({engine} rank {} of {}'s device)", device.id(), comm.rank, comm.size),
                found: format!("{thing} on {id}"),
            });
        }
        Ok(())
    };
    on_device(stream.device_id(), "a stream")?;
    // NCCL resolves the per-thread default stream on the thread that launches, which for a
    // non-blocking communicator may be a thread of NCCL's own, whose stream is another.
    if comm.per_thread_stream.is_some_and(|h| h == stream.raw_handle()) {
        return Err(Error::invalid_argument(format!(
            "{what}: the per-thread default stream, with a non-blocking {engine} communicator (made by init_rank): \
             {engine} may launch it from a thread of its own, whose per-thread stream is another — pass a created \
             stream, or None for the legacy default stream"
        )));
    }
    check_arrays(engine, what, arrays)?;
    for (a, _) in arrays {
        on_device(a.device_id(), "an array")?;
        if a.buffer().is_host_accessible() && a.buffer().memory() != gpuport_core::MemoryKind::Managed {
            return Err(Error::invalid_argument(format!(
                "{what}: an array in host memory ({:?}): {engine} reads and writes device memory; copy it to {}",
                a.buffer().memory(),
                device.id()
            )));
        }
    }
    for (a, role) in arrays {
        let access = if *role == Role::In { Access::Read } else { Access::Write };
        a.wait_pending(stream, access)?;
    }
    let addresses =
        arrays.iter().map(|(a, _)| a.buffer().range_addr(a.byte_offset(), a.nbytes())).collect::<Result<Vec<_>>>()?;
    let launch = launch(&addresses);
    let event = device.create_event(EventFlags::DISABLE_TIMING)?;
    let grouped = group::join(comm.loaded)?;
    // SAFETY: the communicator is live while `with_live` holds it; the stream is the rank's
    // device's (checked above); the addresses are that device's memory, each range inside
    // its array's buffer, sized by the arrays the public layer checked against the
    // collective; the flight below keeps the buffers alive until the collective has ended.
    let started =
        comm.with_live(|handle| unsafe { calls::enqueue(comm.loaded, handle, stream.raw_handle(), &launch) })?;
    let buffers = arrays.iter().map(|(a, _)| a.buffer().clone()).collect();
    let flight = Flight::new(what, comm, event, buffers);
    // After the launch (at the group's end when grouped): the arrays' later users wait for
    // the stream, and the end event follows the collective.
    let after = {
        let (flight, stream, comm) = (flight.clone(), stream.clone(), comm.clone());
        let arrays: Vec<(Array, Role)> = arrays.iter().map(|(a, r)| ((*a).clone(), *r)).collect();
        // `launching`: whether a non-blocking communicator may still be launching it (a
        // grouped launch's end does not say which of its communicators are).
        move |ended: &Result<()>, launching: bool| {
            let recorded = ended.clone().and_then(|()| {
                if launching {
                    comm.settle(launch.call.name(), what)?;
                }
                for (a, role) in &arrays {
                    if *role != Role::Out {
                        a.record_access(&stream, Access::Read)?;
                    }
                    if *role != Role::In {
                        a.record_access(&stream, Access::Write)?;
                    }
                }
                stream.record(flight.event())
            });
            flight.launched(&recorded);
        }
    };
    if grouped {
        group::at_end(Box::new(move |ended| after(ended, true)));
    } else {
        after(&Ok(()), started == calls::Started::InProgress);
    }
    flight::follow(flight.clone());
    Ok(Work::new(what, flight))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Version = Version::new(2, 32, 3);

    #[test]
    fn dtypes_and_reductions_map_to_the_engines_values() {
        let sum = |dtype| reduction("NCCL", NOW, dtype, ReduceOp::Sum).map_err(|e| e.to_string());
        assert_eq!(sum(DType::F32), Ok((dtype::FLOAT32, 1, redop::SUM)));
        assert_eq!(sum(DType::I64), Ok((dtype::INT64, 1, redop::SUM)));
        assert_eq!(sum(DType::U8), Ok((dtype::UINT8, 1, redop::SUM)));
        assert_eq!(sum(DType::F16), Ok((dtype::FLOAT16, 1, redop::SUM)));
        assert_eq!(sum(DType::BF16), Ok((dtype::BFLOAT16, 1, redop::SUM)));
        assert_eq!(sum(DType::C64), Ok((dtype::FLOAT32, 2, redop::SUM)));
        assert_eq!(sum(DType::C128), Ok((dtype::FLOAT64, 2, redop::SUM)));
        for (op, code) in [
            (ReduceOp::Prod, redop::PROD),
            (ReduceOp::Max, redop::MAX),
            (ReduceOp::Min, redop::MIN),
            (ReduceOp::Avg, redop::AVG),
        ] {
            assert_eq!(reduction("NCCL", NOW, DType::F64, op).ok(), Some((dtype::FLOAT64, 1, code)), "{op:?}");
        }
        assert_eq!(reduction("NCCL", NOW, DType::BOOL, ReduceOp::Max).ok(), Some((dtype::UINT8, 1, redop::MAX)));
        assert_eq!(reduction("NCCL", NOW, DType::BOOL, ReduceOp::Min).ok(), Some((dtype::UINT8, 1, redop::MIN)));
    }

    #[test]
    fn what_the_engine_cannot_reduce_is_unsupported_and_named() {
        let refused = |v: Version, dtype: DType, op: ReduceOp| match reduction("RCCL", v, dtype, op) {
            Err(Error::EngineUnsupported { engine: "RCCL", what }) => what,
            other => panic!("{dtype} {op:?} on {v}: {other:?}"),
        };
        assert!(refused(NOW, DType::BOOL, ReduceOp::Sum).contains("Max for or"));
        assert!(refused(NOW, DType::C64, ReduceOp::Max).contains("Sum and Avg only"));
        assert!(refused(NOW, DType::I16, ReduceOp::Sum).contains("reductions of int16"));
        assert!(refused(NOW, DType::F8_E4M3FN, ReduceOp::Sum).contains("reductions of"));
        let old = Version::new(2, 9, 9);
        assert!(refused(old, DType::F32, ReduceOp::Avg).contains("from NCCL 2.10.0; RCCL 2.9.9 is loaded"));
        assert!(refused(old, DType::BF16, ReduceOp::Sum).contains("bfloat16"));
        assert!(reduction("RCCL", Version::new(2, 10, 0), DType::F32, ReduceOp::Avg).is_ok());
    }
}
