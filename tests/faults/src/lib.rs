//! Fault-injection tests of the CUDA and ROCm backends (`tests/faults.rs`): each runs one
//! scenario in a process of its own, against a driver double told to fail one call
//! (`GPUPORT_DOUBLE_FAULTS`), and checks the typed error, that nothing else is lost, and
//! that the process exits cleanly. `cargo xtask test --backend cuda|rocm --double` runs
//! them; without a double they are skipped, with the reason.
