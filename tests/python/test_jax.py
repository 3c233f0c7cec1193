"""DLPack with JAX on the CPU, both directions."""

import os

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)  # 64-bit types stay 64-bit

import gpuport  # noqa: E402


def test_jax_to_gpuport():
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    g = gpuport.from_dlpack(x)
    assert g.shape == (3, 4) and g.dtype == "float32" and g.device == gpuport.device("host")
    assert g.tolist() == np.asarray(x).tolist()
    assert gpuport.from_dlpack(x, device="ext:0").to("host").tolist() == np.asarray(x).tolist()


def test_gpuport_to_jax():
    g = gpuport.asarray([[1, 2, 3], [4, 5, 6]], dtype="int32")
    x = jnp.from_dlpack(g)
    assert x.dtype == jnp.int32 and x.shape == (2, 3)
    assert np.asarray(x + 1).tolist() == [[2, 3, 4], [5, 6, 7]]
    y = jax.dlpack.from_dlpack(g[:, ::2].copy())
    assert np.asarray(y).tolist() == [[1, 3], [4, 6]]


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "bfloat16", "float32", "float64",
                                   "complex64"])
def test_dtypes_round_trip_through_jax(dtype):
    src = gpuport.zeros((4,), dtype=dtype)
    x = jnp.from_dlpack(src)
    assert str(x.dtype) == dtype
    back = gpuport.from_dlpack(x)
    assert back.dtype == dtype and back.shape == (4,)
