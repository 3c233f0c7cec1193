"""The type stubs ship in the wheel (gpuport/__init__.pyi and py.typed) and name every
public function, class and class member of the module."""

import ast
import importlib.util
import pathlib
import types

import gpuport


def stub_tree():
    package = pathlib.Path(importlib.util.find_spec("gpuport").origin).parent
    assert (package / "py.typed").exists()
    return ast.parse((package / "__init__.pyi").read_text())


def test_stubs_name_everything_public():
    tree = stub_tree()
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    top |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
    public = {n for n in dir(gpuport) if not n.startswith("_")
              and not isinstance(getattr(gpuport, n), types.ModuleType)}  # the native submodule
    assert public - top == set()
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for name, node in classes.items():
        members = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
        members |= {m.target.id for m in node.body if isinstance(m, ast.AnnAssign)}
        actual = {m for m in dir(getattr(gpuport, name)) if not m.startswith("_") or m.startswith("__dlpack")
                  or m in ("__cuda_array_interface__", "__array_interface__", "__c_dlpack_exchange_api__")}
        actual -= set(dir(RuntimeError)) if name in ("BackendUnavailable", "CompileError") else set()
        assert actual - members == set(), name


def test_stubtest_finds_no_difference_but_the_listed_ones():
    """mypy's stubtest compares the stubs with the module as built: every signature,
    default, class and member. What it may still report is listed, each with its reason,
    in stubtest-allowlist.txt."""
    import subprocess
    import sys

    import pytest

    # Pinned in requirements.txt; an interpreter without it (a GPU machine's) skips.
    pytest.importorskip("mypy.stubtest")
    allowlist = pathlib.Path(__file__).with_name("stubtest-allowlist.txt")
    run = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "gpuport", "--allowlist", str(allowlist)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
