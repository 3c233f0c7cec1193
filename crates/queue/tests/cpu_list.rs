//! `GPUPORT_WORKER_CPUS`'s list, as `parse_cpu_list` reads it: single CPUs, ranges (one
//! CPU wide included), and what is refused rather than half-read.

use gpuport_queue::affinity::parse_cpu_list;

#[test]
fn cpus_and_ranges_are_read_in_order() {
    assert_eq!(parse_cpu_list("0"), Some(vec![0]));
    assert_eq!(parse_cpu_list("1,3"), Some(vec![1, 3]));
    assert_eq!(parse_cpu_list(" 2-5 , 7 "), Some(vec![2, 3, 4, 5, 7]));
    // A range one CPU wide is that CPU.
    assert_eq!(parse_cpu_list("3-3"), Some(vec![3]));
    assert_eq!(parse_cpu_list("1023"), Some(vec![1023]));
    assert_eq!(parse_cpu_list("1020-1023"), Some(vec![1020, 1021, 1022, 1023]));
}

#[test]
fn a_malformed_reversed_or_out_of_range_list_is_refused_whole() {
    for bad in ["", " , ", "x", "1,x", "5-2", "0-1024", "1024", "2-", "-3", "1-2-3"] {
        assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
    }
}
