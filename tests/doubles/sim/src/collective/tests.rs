//! The meeting of ranks and each collective's data movement, with threads standing in for
//! the ranks' stream threads and plain vectors for their buffers — in memory, as ranks of
//! one process meet, and through files, as ranks in separate processes do (the same
//! threads standing in for the processes).

use std::sync::Mutex;
use std::thread;

use super::*;

/// Two cliques of `ranks` ranks: one meeting in memory, one through files.
fn both(ranks: usize, limit: Duration) -> [Arc<Clique>; 2] {
    static N: AtomicU64 = AtomicU64::new(0);
    let shared = Clique::new(ranks, limit);
    let id = format!("collective tests {} {}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    shared.share(Folder::of(id.as_bytes(), 0));
    [Clique::new(ranks, limit), shared]
}

/// Every rank of `clique` leaves (a shared one's folder goes).
fn leave(clique: &Clique) {
    (0..clique.ranks()).for_each(|r| clique.leave(r));
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn as_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect()
}

/// The reports made: each misuse's kind and what happened.
type Reports = Vec<(String, String)>;

/// Runs collective `seq` with one thread per rank: rank `r` sends `sends[r]` and receives
/// into a buffer of `recv_len`; returns each rank's outcome and receive buffer, and the
/// reports made.
fn meet(
    clique: &Clique,
    seq: u64,
    specs: &[Spec],
    sends: &[Vec<u8>],
    recv_len: usize,
) -> (Vec<(Outcome, Vec<u8>)>, Reports) {
    let reports = Mutex::new(Vec::new());
    let results = thread::scope(|s| {
        let handles: Vec<_> = (0..specs.len())
            .map(|r| {
                let reports = &reports;
                s.spawn(move || {
                    let mut recv = vec![0u8; recv_len];
                    let part = Part { spec: specs[r], send: sends[r].as_ptr(), recv: recv.as_mut_ptr() };
                    let outcome = clique.arrive(seq, r, part, &|kind, why| lock(reports).push((kind.to_owned(), why)));
                    (outcome, recv)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    (results, reports.into_inner().unwrap())
}

fn spec(kind: Kind, count: usize) -> Spec {
    Spec { kind, dtype: DType::Float32, count }
}

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn every_collective_moves_what_nccl_documents() {
    for clique in both(3, LIMIT) {
        every_collective_on(&clique);
        leave(&clique);
    }
}

fn every_collective_on(clique: &Clique) {
    let sends: Vec<Vec<u8>> = (0..3).map(|r| f32s(&[r as f32, 10.0 * r as f32, 1.0, 2.0, 3.0, 4.0])).collect();
    let cases: [(Kind, usize, usize, Vec<Vec<f32>>); 5] = [
        (Kind::AllReduce(RedOp::Sum), 2, 8, vec![vec![3.0, 30.0]; 3]),
        (Kind::AllGather, 1, 12, vec![vec![0.0, 1.0, 2.0]; 3]),
        (Kind::ReduceScatter(RedOp::Max), 1, 4, vec![vec![2.0], vec![20.0], vec![1.0]]),
        (
            Kind::AllToAll,
            2,
            24,
            // Rank j receives block j (elements 2j, 2j+1) of every rank, in rank order.
            vec![
                vec![0.0, 0.0, 1.0, 10.0, 2.0, 20.0],
                vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0],
                vec![3.0, 4.0, 3.0, 4.0, 3.0, 4.0],
            ],
        ),
        (Kind::Broadcast { root: 2 }, 2, 8, vec![vec![2.0, 20.0]; 3]),
    ];
    for (seq, (kind, count, recv_len, want)) in cases.into_iter().enumerate() {
        let (got, reports) = meet(clique, seq as u64, &[spec(kind, count); 3], &sends, recv_len);
        assert!(reports.is_empty(), "{kind:?}: {reports:?}");
        for (r, (outcome, recv)) in got.iter().enumerate() {
            assert_eq!(*outcome, Outcome::Done, "{kind:?}");
            assert_eq!(as_f32s(recv), want[r], "{kind:?} on rank {r}");
        }
    }
    // A reduction writes the root alone.
    let (got, _) = meet(clique, 9, &[spec(Kind::Reduce { op: RedOp::Prod, root: 1 }, 2); 3], &sends, 8);
    assert_eq!(as_f32s(&got[1].1), [0.0, 0.0]);
    let sends: Vec<Vec<u8>> = (1..4).map(|r| f32s(&[r as f32, 1.0])).collect();
    let (got, _) = meet(clique, 10, &[spec(Kind::Reduce { op: RedOp::Prod, root: 1 }, 2); 3], &sends, 8);
    assert_eq!((as_f32s(&got[0].1), as_f32s(&got[1].1)), (vec![0.0, 0.0], vec![6.0, 1.0]));
}

#[test]
fn in_place_collectives_read_what_was_sent() {
    // Each rank's send and receive buffers are one buffer.
    for clique in both(2, LIMIT) {
        in_place_on(&clique);
        leave(&clique);
    }
}

fn in_place_on(clique: &Clique) {
    let report = |_: &str, why: String| panic!("{why}");
    thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|r| {
                let report = &report;
                s.spawn(move || {
                    let mut buf = f32s(&[r as f32 + 1.0, 0.0, 0.0, 0.0]);
                    let p = buf.as_mut_ptr();
                    let gather =
                        Part { spec: spec(Kind::AllGather, 1), send: p.cast_const().wrapping_add(4 * r), recv: p };
                    // Rank r's element sits at block r already, as NCCL's in-place all-gather wants.
                    buf.copy_within(0..4, 4 * r);
                    assert_eq!(clique.arrive(0, r, gather, report), Outcome::Done);
                    let sum = Part { spec: spec(Kind::AllReduce(RedOp::Sum), 2), send: p, recv: p };
                    assert_eq!(clique.arrive(1, r, sum, report), Outcome::Done);
                    as_f32s(&buf)
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap()[..2], [2.0, 4.0]);
        }
    });
}

#[test]
fn ranks_that_disagree_are_reported_and_every_rank_fails_with_nothing_moved() {
    // In memory the meeting reports once; through files each rank (process) reports.
    for (clique, reported) in both(2, LIMIT).into_iter().zip([1, 2]) {
        disagreement_on(&clique, reported);
        leave(&clique);
    }
}

fn disagreement_on(clique: &Clique, reported: usize) {
    let sends = vec![f32s(&[1.0, 2.0]), f32s(&[3.0, 4.0])];
    for (a, b) in [
        (spec(Kind::AllReduce(RedOp::Sum), 2), spec(Kind::AllReduce(RedOp::Sum), 1)),
        (spec(Kind::AllReduce(RedOp::Sum), 2), spec(Kind::AllReduce(RedOp::Max), 2)),
        (spec(Kind::Broadcast { root: 0 }, 2), spec(Kind::Broadcast { root: 1 }, 2)),
        (spec(Kind::AllReduce(RedOp::Sum), 2), Spec { dtype: DType::Int32, ..spec(Kind::AllReduce(RedOp::Sum), 2) }),
        (spec(Kind::AllGather, 1), spec(Kind::AllReduce(RedOp::Sum), 1)),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, pair)| (i as u64, pair))
    .map(|(i, (a, b))| ((i, a), b))
    {
        let (seq, a) = a;
        let (got, reports) = meet(clique, seq, &[a, b], &sends, 8);
        assert_eq!(reports.len(), reported, "{a:?} / {b:?}: {reports:?}");
        assert!(reports.iter().all(|(kind, _)| kind == "collective-mismatch"), "{reports:?}");
        assert!(reports[0].1.contains("rank 0") && reports[0].1.contains("rank 1"), "{reports:?}");
        for (outcome, recv) in got {
            assert!(matches!(outcome, Outcome::Failed(_)), "{a:?} / {b:?}");
            assert_eq!(recv, vec![0u8; 8], "nothing moved");
        }
    }
}

#[test]
fn a_rank_that_never_arrives_fails_the_collective_after_the_limit_and_is_reported() {
    for clique in both(3, Duration::from_millis(200)) {
        never_arrives_on(&clique);
        leave(&clique);
    }
}

fn never_arrives_on(clique: &Clique) {
    let sends = vec![f32s(&[1.0]); 2];
    let reports = Mutex::new(Vec::new());
    thread::scope(|s| {
        for r in 0..2 {
            let (sends, reports) = (&sends, &reports);
            s.spawn(move || {
                let mut recv = [0u8; 4];
                let part = Part {
                    spec: spec(Kind::AllReduce(RedOp::Sum), 1),
                    send: sends[r].as_ptr(),
                    recv: recv.as_mut_ptr(),
                };
                let outcome = clique.arrive(0, r, part, &|kind, why| lock(reports).push((kind.to_owned(), why)));
                assert!(matches!(&outcome, Outcome::Failed(why) if why.contains("[2]")), "{outcome:?}");
            });
        }
    });
    let reports = reports.into_inner().unwrap();
    assert!(!reports.is_empty() && reports.iter().all(|(k, _)| k == "rank-never-arrived"), "{reports:?}");
}

#[test]
fn an_abort_releases_the_waiting_ranks_and_fails_later_collectives() {
    let clique = Clique::new(2, LIMIT);
    let send = f32s(&[1.0]);
    thread::scope(|s| {
        let waiting = s.spawn(|| {
            let mut recv = [0u8; 4];
            let part =
                Part { spec: spec(Kind::AllReduce(RedOp::Sum), 1), send: send.as_ptr(), recv: recv.as_mut_ptr() };
            clique.arrive(0, 0, part, &|_, why| panic!("{why}"))
        });
        // The abort comes while rank 0 waits or before it arrives: either way it fails.
        clique.abort();
        assert!(matches!(waiting.join().unwrap(), Outcome::Failed(why) if why.contains("aborted")));
    });
    let mut recv = [0u8; 4];
    let part = Part { spec: spec(Kind::AllReduce(RedOp::Sum), 1), send: send.as_ptr(), recv: recv.as_mut_ptr() };
    assert!(matches!(clique.arrive(1, 1, part, &|_, why| panic!("{why}")), Outcome::Failed(_)));
}

#[test]
fn buffer_sizes_follow_each_kind() {
    let s = |kind| Spec { kind, dtype: DType::Float64, count: 3 };
    assert_eq!(s(Kind::AllReduce(RedOp::Sum)).bytes(0, 4), (24, 24));
    assert_eq!(s(Kind::AllGather).bytes(1, 4), (24, 96));
    assert_eq!(s(Kind::ReduceScatter(RedOp::Sum)).bytes(1, 4), (96, 24));
    assert_eq!(s(Kind::AllToAll).bytes(1, 4), (96, 96));
    assert_eq!(s(Kind::Broadcast { root: 2 }).bytes(1, 4), (0, 24));
    assert_eq!(s(Kind::Broadcast { root: 2 }).bytes(2, 4), (24, 24));
    assert_eq!(s(Kind::Reduce { op: RedOp::Min, root: 0 }).bytes(3, 4), (24, 0));
}

/// Rank `rank`'s side of a message of `count` f32 with `peer`, over `buf`.
fn side(peer: usize, n: u64, count: usize, buf: *mut u8) -> Side {
    Side { peer, n, dtype: DType::Float32, count, buf }
}

#[test]
fn messages_around_a_ring_each_meet_their_other_side() {
    // Each rank sends its value to the next and receives the previous rank's, in one
    // exchange (as a group fuses them): no rank waits for a send before its receive.
    for clique in both(3, LIMIT) {
        ring_on(&clique);
        leave(&clique);
    }
}

fn ring_on(clique: &Clique) {
    let got: Vec<Vec<f32>> = thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|r| {
                s.spawn(move || {
                    let mut out = f32s(&[r as f32 * 10.0, r as f32 * 10.0 + 1.0]);
                    let mut inbox = vec![0u8; 8];
                    let sends = [side((r + 1) % 3, 0, 2, out.as_mut_ptr())];
                    let recvs = [side((r + 2) % 3, 0, 2, inbox.as_mut_ptr())];
                    let outcome = clique.exchange(r, &sends, &recvs, &|_, why| panic!("{why}"));
                    assert_eq!(outcome, Outcome::Done);
                    as_f32s(&inbox)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got, [vec![20.0, 21.0], vec![0.0, 1.0], vec![10.0, 11.0]]);
    // A rank's message to itself.
    let mut data = f32s(&[5.0]);
    let mut back = vec![0u8; 4];
    let outcome =
        clique.exchange(1, &[side(1, 0, 1, data.as_mut_ptr())], &[side(1, 0, 1, back.as_mut_ptr())], &|_, w| {
            panic!("{w}")
        });
    assert_eq!((outcome, as_f32s(&back)), (Outcome::Done, vec![5.0]));
}

#[test]
fn sides_that_disagree_or_never_meet_are_reported() {
    for clique in both(2, Duration::from_millis(200)) {
        sides_on(&clique);
        leave(&clique);
    }
}

fn sides_on(clique: &Clique) {
    let reports = Mutex::new(Vec::new());
    let report = |kind: &str, why: String| lock(&reports).push((kind.to_owned(), why));
    thread::scope(|s| {
        let report = &report;
        s.spawn(move || {
            let mut out = f32s(&[1.0, 2.0]);
            let outcome = clique.exchange(0, &[side(1, 0, 2, out.as_mut_ptr())], &[], report);
            assert!(matches!(outcome, Outcome::Failed(_)));
        });
        s.spawn(move || {
            let mut inbox = vec![0u8; 4];
            let outcome = clique.exchange(1, &[], &[side(0, 0, 1, inbox.as_mut_ptr())], report);
            assert!(matches!(outcome, Outcome::Failed(_)));
            assert_eq!(inbox, vec![0u8; 4], "nothing moved");
        });
    });
    // A receive no rank sends to.
    let mut inbox = vec![0u8; 4];
    let outcome = clique.exchange(1, &[], &[side(0, 1, 1, inbox.as_mut_ptr())], &report);
    assert!(matches!(outcome, Outcome::Failed(_)));
    let kinds: Vec<String> = reports.into_inner().unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, ["p2p-mismatch", "rank-never-arrived"]);
}
