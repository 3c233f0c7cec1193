//! The header is the source of truth: the system C compiler compiles a program that
//! includes it and prints every struct's size, every field's offset and size and every
//! constant, and each must equal the Rust declaration's. A field added to one side only,
//! moved, or resized fails here.

use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use gpuport_plugin_abi::*;

/// One field: (C struct, field, Rust offset, Rust size).
type Field = (&'static str, &'static str, usize, usize);

fn size_of_field<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// The fields of one `#[repr(C)]` struct, as `(C name, field, offset, size)`.
macro_rules! fields {
    ($rust:ty, $c:literal, [$($f:ident),* $(,)?]) => {
        vec![$(($c, stringify!($f), offset_of!($rust, $f), size_of_field(|s: &$rust| &s.$f))),*]
    };
}

fn all_fields() -> Vec<Field> {
    let mut all = Vec::new();
    all.extend(fields!(
        DeviceInfo,
        "gpuport_device_info",
        [struct_size, name, total_memory, multiprocessors, compute_major, compute_minor, arch]
    ));
    all.extend(fields!(
        PointerAttributes,
        "gpuport_pointer_attributes",
        [
            struct_size,
            memory,
            device_ordinal,
            host_accessible,
            device_accessible,
            managed,
            reserved,
            allocation_base,
            allocation_len
        ]
    ));
    all.extend(fields!(
        KernelArg,
        "gpuport_kernel_arg",
        [kind, size, value, dtype_code, dtype_bits, dtype_lanes, reserved]
    ));
    all.extend(fields!(StreamProgress, "gpuport_stream_progress", [struct_size, submitted, completed, publishing]));
    all.extend(fields!(LaunchConfig, "gpuport_launch_config", [grid, block, shared_mem_bytes]));
    all.extend(fields!(
        PluginApi,
        "gpuport_plugin_api",
        [
            struct_size,
            abi_major,
            abi_minor,
            name,
            version,
            dlpack_device,
            dlpack_pinned_host,
            dlpack_managed,
            reserved,
            error_kind,
            error_message,
            error_destroy,
            initialize,
            device_count,
            device_open,
            device_close,
            device_info,
            can_access_peer,
            enable_peer_access,
            pointer_attributes,
            device_synchronize,
            stream_priority_range,
            stream_create,
            legacy_stream,
            per_thread_stream,
            stream_destroy,
            stream_query,
            stream_synchronize,
            stream_wait_event,
            stream_launch_host_func,
            event_create,
            event_destroy,
            event_record,
            event_query,
            event_synchronize,
            event_elapsed_ms,
            mem_alloc,
            mem_alloc_managed,
            mem_alloc_host,
            mem_alloc_async,
            mem_free_async,
            mem_free,
            mem_free_host,
            memcpy_async,
            memcpy_peer_async,
            memset_async,
            module_load,
            module_unload,
            module_function,
            launch_kernel,
            memcpy_2d_async,
            stream_progress,
        ]
    ));
    all
}

fn structs() -> Vec<(&'static str, usize)> {
    vec![
        ("gpuport_device_info", size_of::<DeviceInfo>()),
        ("gpuport_pointer_attributes", size_of::<PointerAttributes>()),
        ("gpuport_kernel_arg", size_of::<KernelArg>()),
        ("gpuport_launch_config", size_of::<LaunchConfig>()),
        ("gpuport_stream_progress", size_of::<StreamProgress>()),
        ("gpuport_plugin_api", size_of::<PluginApi>()),
        ("gpuport_stream", size_of::<Stream>()),
        ("gpuport_event", size_of::<Event>()),
    ]
}

fn constants() -> Vec<(&'static str, i64)> {
    vec![
        ("GPUPORT_PLUGIN_ABI_MAJOR", ABI_MAJOR.into()),
        ("GPUPORT_PLUGIN_ABI_MINOR", ABI_MINOR.into()),
        ("GPUPORT_ERROR_INVALID_ARGUMENT", error_kind::INVALID_ARGUMENT.into()),
        ("GPUPORT_ERROR_OUT_OF_MEMORY", error_kind::OUT_OF_MEMORY.into()),
        ("GPUPORT_ERROR_UNSUPPORTED", error_kind::UNSUPPORTED.into()),
        ("GPUPORT_ERROR_NOT_READY", error_kind::NOT_READY.into()),
        ("GPUPORT_ERROR_INVALID_HANDLE", error_kind::INVALID_HANDLE.into()),
        ("GPUPORT_ERROR_NO_DEVICE", error_kind::NO_DEVICE.into()),
        ("GPUPORT_ERROR_DEVICE_NOT_FOUND", error_kind::DEVICE_NOT_FOUND.into()),
        ("GPUPORT_ERROR_WOULD_DEADLOCK", error_kind::WOULD_DEADLOCK.into()),
        ("GPUPORT_ERROR_FAILED", error_kind::FAILED.into()),
        ("GPUPORT_STREAM_NON_BLOCKING", stream_flags::NON_BLOCKING.into()),
        ("GPUPORT_EVENT_BLOCKING_SYNC", event_flags::BLOCKING_SYNC.into()),
        ("GPUPORT_EVENT_DISABLE_TIMING", event_flags::DISABLE_TIMING.into()),
        ("GPUPORT_HOST_ALLOC_PORTABLE", host_alloc_flags::PORTABLE.into()),
        ("GPUPORT_HOST_ALLOC_DEVICE_MAP", host_alloc_flags::DEVICE_MAP.into()),
        ("GPUPORT_HOST_ALLOC_WRITE_COMBINED", host_alloc_flags::WRITE_COMBINED.into()),
        ("GPUPORT_MEMORY_UNREGISTERED", memory_kind::UNREGISTERED.into()),
        ("GPUPORT_MEMORY_DEVICE", memory_kind::DEVICE.into()),
        ("GPUPORT_MEMORY_PINNED_HOST", memory_kind::PINNED_HOST.into()),
        ("GPUPORT_MEMORY_MANAGED", memory_kind::MANAGED.into()),
        ("GPUPORT_MEMORY_HOST", memory_kind::HOST.into()),
        ("GPUPORT_KERNEL_ARG_ADDRESS", kernel_arg_kind::ADDRESS.into()),
        ("GPUPORT_KERNEL_ARG_SCALAR", kernel_arg_kind::SCALAR.into()),
    ]
}

/// The C program printing what the compiler makes of the header, one fact per line.
fn program() -> String {
    let mut c =
        String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"gpuport_plugin.h\"\nint main(void) {\n");
    for (s, f, _, _) in all_fields() {
        c.push_str(&format!(
            "  printf(\"field {s}.{f} %zu %zu\\n\", offsetof(struct {s}, {f}), sizeof(((struct {s} *)0)->{f}));\n"
        ));
    }
    for (s, _) in structs() {
        let ty = if s.starts_with("gpuport_stream") || s.starts_with("gpuport_event") {
            s.to_owned()
        } else {
            format!("struct {s}")
        };
        c.push_str(&format!("  printf(\"size {s} %zu\\n\", sizeof({ty}));\n"));
    }
    for (name, _) in constants() {
        c.push_str(&format!("  printf(\"const {name} %lld\\n\", (long long)({name}));\n"));
    }
    c.push_str("  printf(\"entry %s\\n\", GPUPORT_PLUGIN_ENTRY_SYMBOL);\n  return 0;\n}\n");
    c
}

#[test]
fn the_rust_declarations_match_the_header() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-abi-header");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, program()).unwrap();
    let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-pedantic", "-I"])
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("the C compiler `{cc}` did not start: {e}"));
    assert!(out.status.success(), "the header does not compile:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let facts = String::from_utf8(run.stdout).unwrap();
    let c = |key: &str| -> String {
        facts
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("the C program printed nothing for {key}"))
            .to_owned()
    };
    let mut wrong = Vec::new();
    for (s, f, offset, size) in all_fields() {
        let got = c(&format!("field {s}.{f}"));
        if got != format!("{offset} {size}") {
            wrong.push(format!("{s}.{f}: C offset and size {got}, Rust {offset} {size}"));
        }
    }
    for (s, size) in structs() {
        let got = c(&format!("size {s}"));
        if got != size.to_string() {
            wrong.push(format!("sizeof {s}: C {got}, Rust {size}"));
        }
    }
    for (name, value) in constants() {
        let got = c(&format!("const {name}"));
        if got != value.to_string() {
            wrong.push(format!("{name}: C {got}, Rust {value}"));
        }
    }
    let entry = c("entry");
    if entry.as_bytes() != &ENTRY_SYMBOL[..ENTRY_SYMBOL.len() - 1] {
        wrong.push(format!("the entry symbol: C {entry}"));
    }
    assert!(wrong.is_empty(), "the Rust declarations differ from gpuport_plugin.h:\n  {}", wrong.join("\n  "));
}

/// Every function pointer of the table in the header is declared in Rust: the header's
/// `(*name)(` declarations inside the table, against the Rust fields.
#[test]
fn every_function_of_the_header_table_is_declared() {
    let table = HEADER.split("typedef struct gpuport_plugin_api {").nth(1).unwrap();
    let table = table.split("} gpuport_plugin_api;").next().unwrap();
    let in_header: Vec<&str> =
        table.split("(*").skip(1).filter_map(|rest| rest.split(')').next()).map(str::trim).collect();
    let in_rust: Vec<&str> = all_fields().iter().filter(|f| f.0 == "gpuport_plugin_api").map(|f| f.1).collect();
    let missing: Vec<&&str> = in_header.iter().filter(|f| !in_rust.contains(f)).collect();
    assert!(missing.is_empty(), "functions of the header's table with no Rust field: {missing:?}");
    assert!(in_header.len() >= 40, "only {} functions read from the header", in_header.len());
}
