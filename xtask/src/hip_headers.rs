//! The probe behind `gpuport-rocm`'s header check: a C program compiled against a HIP
//! release's headers that prints what they declare — struct sizes and offsets, status and
//! enum values, the special stream handles — one `NAME VALUE` line each. gpuport's own
//! declarations are compared with its output by `declarations_match_the_hip_headers`.
//! Only the host compiler and the headers are needed: nothing is linked or loaded.

use std::path::Path;
use std::process::Command;

/// The probe's source. Every name printed here is one the comparison looks up.
const PROBE: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <hip/hip_runtime_api.h>
#include <hip/hip_deprecated.h>
#define V(name, expr) printf("%s %lld\n", name, (long long)(expr))
#define OFF(type, field) V("offsetof " #type "." #field, offsetof(type, field))
#define E(name) V(#name, name)
int main(void) {
  E(HIP_VERSION_MAJOR);
  V("sizeof hipPointerAttribute_t", sizeof(hipPointerAttribute_t));
  OFF(hipPointerAttribute_t, type);
  OFF(hipPointerAttribute_t, device);
  OFF(hipPointerAttribute_t, devicePointer);
  OFF(hipPointerAttribute_t, hostPointer);
  OFF(hipPointerAttribute_t, isManaged);
  OFF(hipPointerAttribute_t, allocationFlags);
  V("sizeof hipUUID", sizeof(hipUUID));
  OFF(hipDeviceProp_tR0600, gcnArchName);
  V("sizeof hipDeviceProp_tR0600", sizeof(hipDeviceProp_tR0600));
  OFF(hipDeviceProp_tR0000, gcnArchName);
  E(hipSuccess); E(hipErrorInvalidValue); E(hipErrorOutOfMemory); E(hipErrorInvalidConfiguration);
  E(hipErrorNoDevice); E(hipErrorInvalidDevice); E(hipErrorNotFound); E(hipErrorNotReady);
  E(hipErrorPeerAccessAlreadyEnabled);
  E(hipMemcpyDefault); E(hipStreamNonBlocking); E(hipMemAttachGlobal);
  V("hipStreamLegacy", (uintptr_t)hipStreamLegacy);
  V("hipStreamPerThread", (uintptr_t)hipStreamPerThread);
  E(hipDeviceAttributeComputeCapabilityMajor); E(hipDeviceAttributeComputeCapabilityMinor);
  E(hipDeviceAttributeMultiprocessorCount);
  E(hipMemoryTypeUnregistered); E(hipMemoryTypeHost); E(hipMemoryTypeDevice); E(hipMemoryTypeManaged);
  E(hipMemoryTypeArray); E(hipMemoryTypeUnified);
  E(hipEventBlockingSync); E(hipEventDisableTiming); E(hipEventInterprocess);
  E(hipHostMallocPortable); E(hipHostMallocMapped); E(hipHostMallocWriteCombined);
  E(hipHostRegisterPortable);
  return 0;
}
"#;

/// Compiles the probe against the headers under `include` (the folder holding `hip/`),
/// runs it and writes its output to `out`.
pub fn write_facts(include: &Path, out: &Path) -> Result<(), String> {
    let dir = out.parent().ok_or("the facts file has no folder")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let source = dir.join("hip-header-probe.c");
    let exe = dir.join("hip-header-probe");
    std::fs::write(&source, PROBE).map_err(|e| format!("writing {}: {e}", source.display()))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut compile = Command::new(&cc);
    compile.args(["-std=c11", "-D__HIP_PLATFORM_AMD__", "-I"]).arg(include).arg(&source).arg("-o").arg(&exe);
    eprintln!("xtask: running {compile:?}");
    let status = compile.status().map_err(|e| format!("could not start {cc}: {e}"))?;
    if !status.success() {
        return Err(format!("the HIP header probe did not compile against {} ({status})", include.display()));
    }
    let output = Command::new(&exe).output().map_err(|e| format!("running the probe: {e}"))?;
    if !output.status.success() {
        return Err(format!("the HIP header probe failed ({})", output.status));
    }
    std::fs::write(out, &output.stdout).map_err(|e| format!("writing {}: {e}", out.display()))
}
