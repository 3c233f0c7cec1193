"""Shared helpers for gpuport's Python tests (run by `cargo xtask test`, or
`.venv/bin/python -m pytest tests/python` after `cargo xtask python-wheel`)."""

import atexit
import ctypes
import gc
import os
import sys

import pytest

# The ext test device (a second device with memory of its own, for cross-device paths
# without a GPU) is in gpuport's device lists only when asked for; these tests ask, before
# gpuport is imported, and the interpreters they start inherit it.
os.environ.setdefault("GPUPORT_EXT", "1")

import gpuport  # noqa: E402


def has_cuda() -> bool:
    return any(b.name == "cuda" and b.available for b in gpuport.backends())


requires_cuda = pytest.mark.skipif(not has_cuda(), reason="no CUDA device (gpuport reports cuda unavailable)")


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", VERSIONED_DELETER),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]


class DLManagedTensor(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", LEGACY_DELETER),
]

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]


def capsule_name(capsule) -> str:
    return _capsule_get_name(capsule).decode()


def versioned_of(capsule) -> DLManagedTensorVersioned:
    """The managed tensor inside an unused `dltensor_versioned` capsule (not taken)."""
    ptr = _capsule_get_pointer(capsule, b"dltensor_versioned")
    return ctypes.cast(ptr, ctypes.POINTER(DLManagedTensorVersioned)).contents


def legacy_of(capsule) -> DLManagedTensor:
    ptr = _capsule_get_pointer(capsule, b"dltensor")
    return ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor)).contents


class ForeignTensor:
    """A managed tensor made here with ctypes, whose deleter counts its calls: for checking
    that gpuport calls a producer's deleter exactly once on every path."""

    def __init__(self, values=(1.0, 2.0, 3.0), *, versioned=True, version=(1, 3), ndim=None,
                 null_data=False, null_deleter=False, flags=0, shape=None, stride=1):
        self.deleted = 0
        self.buffer = (ctypes.c_float * max(len(values), 1))(*values)
        n = len(values) if shape is None else shape[0]
        self.shape = (ctypes.c_int64 * 1)(n)
        self.strides = (ctypes.c_int64 * 1)(stride)
        tensor = DLTensor(
            data=None if null_data else ctypes.addressof(self.buffer),
            device=DLDevice(1, 0),
            ndim=1 if ndim is None else ndim,
            dtype=DLDataType(2, 32, 1),
            shape=self.shape,
            strides=self.strides,
            byte_offset=0,
        )
        if versioned:
            self.deleter = VERSIONED_DELETER(self._delete)
            self.managed = DLManagedTensorVersioned(
                version=DLPackVersion(*version), manager_ctx=None,
                deleter=VERSIONED_DELETER() if null_deleter else self.deleter,
                flags=flags, dl_tensor=tensor)
            self.name = b"dltensor_versioned"
        else:
            self.deleter = LEGACY_DELETER(self._delete)
            self.managed = DLManagedTensor(
                dl_tensor=tensor, manager_ctx=None,
                deleter=LEGACY_DELETER() if null_deleter else self.deleter)
            self.name = b"dltensor"

    def _delete(self, _ptr):
        self.deleted += 1

    def capsule(self):
        return _capsule_new(ctypes.addressof(self.managed), self.name, None)


# Set when the tests run against the module built with AddressSanitizer (its runtime is
# preloaded into the interpreter).
UNDER_ADDRESS_SANITIZER = "libasan" in os.environ.get("LD_PRELOAD", "")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def collect():
    for _ in range(3):
        gc.collect()


# Under AddressSanitizer (`cargo xtask sanitize address`, which sets this variable), the
# leak check runs once, when the interpreter starts to exit: after every test and after
# pytest's own frames are gone, but before Python tears its objects down. Neither end
# works: LeakSanitizer's own check at exit sees Python's objects, which it never frees on
# purpose, and a check while pytest still runs sees the locals of the frames still running,
# which CPython keeps on a stack it maps itself, outside the memory the checker scans. A
# leak (memory nothing reaches any more) ends the process with status 1.
def _leak_check_at_exit():
    gc.collect()
    if ctypes.CDLL(None).__lsan_do_recoverable_leak_check() != 0:
        sys.stdout.flush()
        sys.stderr.write("LeakSanitizer: memory nothing reaches any more (the report is above)\n")
        sys.stderr.flush()
        os._exit(1)


if os.environ.get("GPUPORT_LSAN_AT_EXIT") == "1":
    atexit.register(_leak_check_at_exit)
