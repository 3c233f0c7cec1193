//! gpuport's HIP declarations against the C headers of a HIP release, where hip-sys's
//! bindings (ROCm 5) cannot speak for it: `cargo xtask rocm-sid-check` compiles a probe
//! (`xtask/src/hip_headers.rs`) against HIP 7.2's headers (Debian experimental's
//! `libamdhip64-dev`), writes what they say — struct sizes and offsets, status and enum
//! values, the special stream handles — one `NAME VALUE` line each, and runs this test
//! with `GPUPORT_HIP_HEADER_FACTS` naming that file. Every fact is checked, and every
//! declaration listed here must be in the file.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};

use crate::sys;
use gpuport_core::{EventFlags, HostAllocFlags};

/// What gpuport declares, by the name the probe prints.
fn ours() -> Vec<(&'static str, i64)> {
    use sys::hipPointerAttribute_t as P;
    use sys::memory_type_v6 as m;
    vec![
        ("sizeof hipPointerAttribute_t", size_of::<P>() as i64),
        ("offsetof hipPointerAttribute_t.type", offset_of!(P, memoryType) as i64),
        ("offsetof hipPointerAttribute_t.device", offset_of!(P, device) as i64),
        ("offsetof hipPointerAttribute_t.devicePointer", offset_of!(P, devicePointer) as i64),
        ("offsetof hipPointerAttribute_t.hostPointer", offset_of!(P, hostPointer) as i64),
        ("offsetof hipPointerAttribute_t.isManaged", offset_of!(P, isManaged) as i64),
        ("offsetof hipPointerAttribute_t.allocationFlags", offset_of!(P, allocationFlags) as i64),
        ("sizeof hipUUID", size_of::<sys::hipUUID>() as i64),
        ("offsetof hipDeviceProp_tR0600.gcnArchName", sys::GCN_ARCH_NAME_OFFSET_R0600 as i64),
        ("offsetof hipDeviceProp_tR0000.gcnArchName", sys::GCN_ARCH_NAME_OFFSET_R0000 as i64),
        ("hipSuccess", i64::from(sys::SUCCESS)),
        ("hipErrorInvalidValue", i64::from(sys::ERROR_INVALID_VALUE)),
        ("hipErrorOutOfMemory", i64::from(sys::ERROR_OUT_OF_MEMORY)),
        ("hipErrorInvalidConfiguration", i64::from(sys::ERROR_INVALID_CONFIGURATION)),
        ("hipErrorNoDevice", i64::from(sys::ERROR_NO_DEVICE)),
        ("hipErrorInvalidDevice", i64::from(sys::ERROR_INVALID_DEVICE)),
        ("hipErrorNotFound", i64::from(sys::ERROR_NOT_FOUND)),
        ("hipErrorNotReady", i64::from(sys::ERROR_NOT_READY)),
        ("hipErrorPeerAccessAlreadyEnabled", i64::from(sys::ERROR_PEER_ACCESS_ALREADY_ENABLED)),
        ("hipMemcpyDefault", i64::from(sys::MEMCPY_DEFAULT)),
        ("hipStreamNonBlocking", i64::from(sys::STREAM_NON_BLOCKING)),
        ("hipMemAttachGlobal", i64::from(sys::MEM_ATTACH_GLOBAL)),
        ("hipStreamLegacy", sys::STREAM_LEGACY as i64),
        ("hipStreamPerThread", sys::STREAM_PER_THREAD as i64),
        ("hipDeviceAttributeComputeCapabilityMajor", i64::from(sys::ATTR_COMPUTE_CAPABILITY_MAJOR)),
        ("hipDeviceAttributeComputeCapabilityMinor", i64::from(sys::ATTR_COMPUTE_CAPABILITY_MINOR)),
        ("hipDeviceAttributeMultiprocessorCount", i64::from(sys::ATTR_MULTIPROCESSOR_COUNT)),
        ("hipMemoryTypeUnregistered", i64::from(m::UNREGISTERED)),
        ("hipMemoryTypeHost", i64::from(m::HOST)),
        ("hipMemoryTypeDevice", i64::from(m::DEVICE)),
        ("hipMemoryTypeManaged", i64::from(m::MANAGED)),
        ("hipMemoryTypeArray", i64::from(m::ARRAY)),
        ("hipMemoryTypeUnified", i64::from(m::UNIFIED)),
        ("hipEventBlockingSync", i64::from(EventFlags::BLOCKING_SYNC.bits())),
        ("hipEventDisableTiming", i64::from(EventFlags::DISABLE_TIMING.bits())),
        ("hipEventInterprocess", i64::from(EventFlags::INTERPROCESS.bits())),
        ("hipHostMallocPortable", i64::from(HostAllocFlags::PORTABLE.bits())),
        ("hipHostMallocMapped", i64::from(HostAllocFlags::DEVICE_MAP.bits())),
        ("hipHostMallocWriteCombined", i64::from(HostAllocFlags::WRITE_COMBINED.bits())),
        ("hipHostRegisterPortable", i64::from(sys::HOST_REGISTER_PORTABLE)),
    ]
}

/// Parses the probe's `NAME VALUE` lines (the name may hold spaces; the value is last).
fn parse(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|line| {
            let (name, value) = line.trim().rsplit_once(' ')?;
            Some((name.trim().to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// Every declaration against the headers' word; the mismatches and missing facts.
fn compare(facts: &BTreeMap<String, i64>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, value) in ours() {
        match facts.get(name) {
            Some(&theirs) if theirs == value => {}
            Some(&theirs) => wrong.push(format!("{name}: gpuport declares {value}, the headers say {theirs}")),
            None => wrong.push(format!("{name}: not in the probe's output")),
        }
    }
    if let Some(&size) = facts.get("sizeof hipDeviceProp_tR0600") {
        if size as usize > sys::DEVICE_PROP_BUFFER {
            wrong.push(format!(
                "hipDeviceProp_tR0600 is {size} bytes, more than the {} reserved",
                sys::DEVICE_PROP_BUFFER
            ));
        }
    } else {
        wrong.push("sizeof hipDeviceProp_tR0600: not in the probe's output".into());
    }
    wrong
}

#[test]
#[ignore = "needs GPUPORT_HIP_HEADER_FACTS (set by cargo xtask rocm-sid-check)"]
fn declarations_match_the_hip_headers() {
    let path = std::env::var_os("GPUPORT_HIP_HEADER_FACTS").expect("GPUPORT_HIP_HEADER_FACTS names the probe's output");
    let text = std::fs::read_to_string(&path).expect("the probe's output");
    let facts = parse(&text);
    let wrong = compare(&facts);
    assert!(wrong.is_empty(), "gpuport's HIP declarations differ from the headers:\n{}", wrong.join("\n"));
    println!("{} declarations match HIP {}'s headers", ours().len() + 1, facts.get("HIP_VERSION_MAJOR").unwrap_or(&0));
}

#[test]
fn a_difference_or_a_missing_fact_is_named() {
    let mut facts: BTreeMap<String, i64> = ours().into_iter().map(|(n, v)| (n.to_owned(), v)).collect();
    facts.insert("sizeof hipDeviceProp_tR0600".into(), 1472);
    assert!(compare(&facts).is_empty());
    facts.insert("hipStreamLegacy".into(), 0);
    facts.remove("hipErrorNotReady");
    facts.insert("sizeof hipDeviceProp_tR0600".into(), 8192);
    let wrong = compare(&facts);
    assert_eq!(wrong.len(), 3, "{wrong:?}");
    assert!(
        wrong[0].contains("hipErrorNotReady")
            || wrong.iter().any(|w| w.contains("hipStreamLegacy: gpuport declares 1"))
    );
    assert_eq!(parse("offsetof hipPointerAttribute_t.type 0\nbad line\n").len(), 1);
}
