"""Device plugins in Python: the C plugin of examples/c-plugin, built here with the system C
compiler, is named by a tiny installed package in the `gpuport.plugins` entry-point group
(or by GPUPORT_PLUGINS), and a fresh interpreter that imports gpuport lists its devices
and exchanges arrays with NumPy through them — with no rebuild of gpuport."""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = ROOT / "examples" / "c-plugin" / "c_plugin.c"
INCLUDE = ROOT / "crates" / "plugin-abi" / "include"
CC = os.environ.get("CC") or shutil.which("cc")
pytestmark = [
    pytest.mark.skipif(CC is None, reason="no C compiler to build the C plugin"),
    pytest.mark.skipif(not SOURCE.exists(), reason=f"the C plugin's source is not here ({SOURCE})"),
]

# Run in a fresh interpreter: discovery happens once, at import.
EXCHANGE = textwrap.dedent(
    """
    import warnings
    warnings.simplefilter("error")  # an entry point gpuport cannot use must only warn
    try:
        import gpuport
    except Exception as e:
        raise SystemExit(f"import failed: {e!r}")
    """
)


@pytest.fixture(scope="module")
def plugin_library(tmp_path_factory):
    out = tmp_path_factory.mktemp("c-plugin") / "libgpuport_c_plugin.so"
    cmd = [CC, "-std=c11", "-O1", "-fPIC", "-shared", "-I", str(INCLUDE), str(SOURCE), "-o", str(out), "-lpthread"]
    # `cargo xtask sanitize address` builds the plugin instrumented too, so its side of
    # the boundary is checked with gpuport's.
    cmd[1:1] = os.environ.get("GPUPORT_PLUGIN_TEST_CFLAGS", "").split()
    subprocess.run(cmd, check=True)
    return out


def install_package(site, library, extra_entry=""):
    """A plugin package as pip would leave it: the module, and its dist-info with the
    entry point naming a function that returns the library's path."""
    pkg = site / "gpuport_cplugin_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"LIBRARY = {str(library)!r}\n\ndef library():\n    return LIBRARY\n")
    info = site / "gpuport_cplugin_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpuport-cplugin-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[gpuport.plugins]\ncplugin = gpuport_cplugin_pkg:library\n{extra_entry}")
    return site


def run_python(code, **env_extra):
    env = dict(os.environ)
    env.pop("GPUPORT_PLUGINS", None)
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False, timeout=300)


CHECK_EXCHANGE = textwrap.dedent(
    """
    import numpy as np
    found = [b for b in gpuport.backends() if b.name == "cplugin"]
    assert found and found[0].available, [(b.name, b.reason) for b in gpuport.backends()]
    assert found[0].devices == ["cplugin:0", "cplugin:1"], found[0].devices
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = gpuport.asarray(x, device="cplugin:1")        # NumPy -> the plugin's device
    assert str(a.device) == "cplugin:1", a.device
    assert a.__dlpack_device__() == (12, 1), a.__dlpack_device__()  # kDLExtDev, as declared
    b = a.to("cplugin:0")                              # between the plugin's devices
    y = np.from_dlpack(b.to("host"))                   # back to NumPy through DLPack
    assert (y == x).all(), y
    z = gpuport.from_dlpack(x, device="cplugin:0")     # NumPy's DLPack, placed on the plugin
    assert (np.from_dlpack(z.to("host")) == x).all()
    print("exchanged")
    """
)


def test_an_installed_plugin_package_adds_its_devices(plugin_library, tmp_path):
    site = install_package(tmp_path / "site", plugin_library)
    done = run_python(EXCHANGE + CHECK_EXCHANGE, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    assert done.returncode == 0 and "exchanged" in done.stdout, done.stdout + done.stderr


def test_gpuport_plugins_names_a_library(plugin_library):
    done = run_python(EXCHANGE + CHECK_EXCHANGE, GPUPORT_PLUGINS=str(plugin_library))
    assert done.returncode == 0 and "exchanged" in done.stdout, done.stdout + done.stderr


def test_a_broken_entry_point_is_a_warning_and_a_missing_library_a_reason(plugin_library, tmp_path):
    site = install_package(tmp_path / "site", plugin_library, extra_entry="broken = gpuport_cplugin_pkg:no_such_name\n")
    code = textwrap.dedent(
        """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import gpuport
        assert any("broken" in str(w.message) for w in caught), [str(w.message) for w in caught]
        gone = [b for b in gpuport.backends() if b.name == "libgone.so"]
        assert gone and not gone[0].available and "cannot be loaded" in gone[0].reason, gone
        assert any(b.name == "cplugin" and b.available for b in gpuport.backends())
        print("reported")
        """
    )
    done = run_python(
        code,
        PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        GPUPORT_PLUGINS="/nonexistent/libgone.so",
    )
    assert done.returncode == 0 and "reported" in done.stdout, done.stdout + done.stderr


def test_jax_and_tvm_ffi_exchange_with_a_plugin_device(plugin_library):
    pytest.importorskip("jax")
    pytest.importorskip("tvm_ffi")
    code = textwrap.dedent(
        """
        import numpy as np
        import jax, jax.numpy as jnp
        import tvm_ffi
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        a = gpuport.asarray(x, device="cplugin:1")
        # tvm-ffi holds any device's tensor: the plugin's memory goes to it and comes back
        # as the plugin's, though the ext device declares the same DLPack type.
        t = tvm_ffi.from_dlpack(a)
        assert str(t.device) == "ext_dev:1", t.device
        back = gpuport.from_dlpack(t)
        assert str(back.device) == "cplugin:1", back.device
        assert (np.from_dlpack(back.to("host")) == x).all()
        # JAX (on the CPU here) to the plugin's device and back, through DLPack both ways.
        j = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
        g = gpuport.from_dlpack(j, device="cplugin:0")
        assert str(g.device) == "cplugin:0", g.device
        h = jax.dlpack.from_dlpack(g.to("host"))
        assert (np.asarray(h) == np.asarray(j)).all()
        print("exchanged")
        """
    )
    done = run_python(EXCHANGE + code, GPUPORT_PLUGINS=str(plugin_library), JAX_PLATFORMS="cpu")
    assert done.returncode == 0 and "exchanged" in done.stdout, done.stdout + done.stderr


def build_variant(tmp_path_factory, macro, name):
    """The C plugin built with one `BREACH_*` macro, under a backend name of its own."""
    out = tmp_path_factory.mktemp(name) / f"lib{name}.so"
    cmd = [CC, "-std=c11", "-O1", "-fPIC", "-shared", "-I", str(INCLUDE), f"-D{macro}", f'-DPLUGIN_NAME="{name}"',
           str(SOURCE), "-o", str(out), "-lpthread"]
    cmd[1:1] = os.environ.get("GPUPORT_PLUGIN_TEST_CFLAGS", "").split()
    subprocess.run(cmd, check=True)
    return out


def test_the_plugins_arrays_are_checked_against_their_allocation(plugin_library):
    code = textwrap.dedent(
        """
        import numpy as np
        a = gpuport.asarray(np.arange(16, dtype=np.uint8), device="cplugin:0")
        for shape, at in [((4096,), 0), ((1 << 28,), 0), ((17,), 0), ((16,), 8)]:
            desc = {"shape": shape, "typestr": "|u1", "data": (a.data_ptr + at, False), "version": 3}
            try:
                gpuport.from_cuda_array_interface(desc, owner=a)
            except ValueError as e:
                assert "outside their allocation" in str(e), e
            else:
                raise SystemExit(f"{shape} at +{at} was imported")
        inside = gpuport.from_cuda_array_interface(
            {"shape": (8,), "typestr": "|u1", "data": (a.data_ptr + 8, False), "version": 3}, owner=a)
        assert inside.to("host").tolist() == list(range(8, 16))
        print("bounded")
        """
    )
    done = run_python(EXCHANGE + code, GPUPORT_PLUGINS=str(plugin_library))
    assert done.returncode == 0 and "bounded" in done.stdout, done.stdout + done.stderr


def test_a_plugin_running_host_functions_twice_is_reported_not_a_use_after_free(tmp_path_factory):
    # Copies through the plugin park their buffers behind host functions, which this
    # variant runs twice: the second run must find nothing (its slot is disarmed, and never
    # freed), and a synchronize reports it. Under AddressSanitizer a use of freed memory
    # would end the process here.
    library = build_variant(tmp_path_factory, "BREACH_HOST_FUNC_TWICE", "cplugin_twice")
    code = textwrap.dedent(
        """
        import numpy as np
        x = np.arange(1 << 14, dtype=np.float32)
        reported = []
        for _ in range(20):
            try:
                a = gpuport.asarray(x, device="cplugin_twice:0")
                assert (np.from_dlpack(a.to("host")) == x).all()
                gpuport.device("cplugin_twice:0").synchronize()
            except RuntimeError as e:
                reported.append(str(e))
        assert reported and all("broke its contract" in r for r in reported), reported
        print("survived", len(reported))
        """
    )
    done = run_python(EXCHANGE + code, GPUPORT_PLUGINS=str(library))
    assert done.returncode == 0 and "survived" in done.stdout, done.stdout + done.stderr


def test_gpuport_plugins_naming_a_fifo_is_a_reason_not_a_hang(tmp_path, plugin_library):
    fifo = tmp_path / "plugin.so"
    os.mkfifo(fifo)
    code = textwrap.dedent(
        """
        fifo = [b for b in gpuport.backends() if b.name.endswith("plugin.so")]
        assert fifo and not fifo[0].available and "not a regular file (a FIFO)" in fifo[0].reason, fifo
        assert any(b.name == "cplugin" and b.available for b in gpuport.backends())
        print("listed")
        """
    )
    done = run_python(EXCHANGE + code, GPUPORT_PLUGINS=f"{fifo}:{plugin_library}")
    assert done.returncode == 0 and "listed" in done.stdout, done.stdout + done.stderr
