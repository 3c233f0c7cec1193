//! `gpuport.RawModule` and `gpuport.RawKernel`: kernels compiled from source where they
//! run (NVRTC on CUDA devices, hiprtc on ROCm devices; `docs/kernels.md`), launched as
//! CuPy's are — `kernel(grid, block, args, shared_mem=0, stream=None)` — on gpuport arrays
//! and on any DLPack or CUDA Array Interface array (CuPy, PyTorch, Numba, JAX), with
//! scalars typed by NumPy scalar types (`np.float32(2)`) or as Python scalars are by CuPy
//! (`int` → int64, `float` → float64, `bool` → bool, `complex` → complex128).
//!
//! A module is compiled on first use on each device (and kept for it; gpuport's caches
//! make a second `RawModule` of the same source cheap). The launch orders after the
//! arrays' pending work and is recorded as their writer (`gpuport::launch_on_arrays`).

use std::collections::HashMap;
use std::sync::Mutex;

use gpuport::dynamic::{AnyDevice, AnyStream};
use gpuport::{
    launch_on_arrays, CompileOptions, DType, DefaultStream, DeviceId, Error, KernelSource, LaunchArg, LaunchConfig,
    Module, Scalar,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyInt, PyTuple};

use crate::device::{parse_device, PyStream};
use crate::errors::IntoPy;

pyo3::create_exception!(
    gpuport,
    CompileError,
    PyRuntimeError,
    "A kernel did not compile; `.log` is the compiler's whole log (file, line, message)."
);

/// The Python exception for an error of compiling or launching: a compile error is
/// `gpuport.CompileError` with its log, anything else as elsewhere.
fn compile_error(e: Error) -> PyErr {
    match e {
        Error::Compile { ref log, .. } => {
            let log = log.clone();
            let err = CompileError::new_err(e.to_string());
            Python::attach(|py| {
                let _ = err.value(py).setattr("log", log);
            });
            err
        }
        other => crate::errors::to_py(other, crate::errors::Context::General),
    }
}

/// Source, options and the modules compiled from them, per device.
struct Program {
    source: KernelSource,
    options: CompileOptions,
    modules: Mutex<HashMap<DeviceId, Module>>,
}

impl Program {
    fn new(code: String, options: Vec<String>, name_expressions: Vec<String>, name: String) -> Program {
        let options = CompileOptions { extra: options, name_expressions, ..Default::default() };
        Program { source: KernelSource::new(code).named(name), options, modules: Mutex::default() }
    }

    /// The module for `device`, compiled on first use.
    fn module(&self, py: Python<'_>, device: &AnyDevice) -> PyResult<Module> {
        let id = device.id();
        if let Some(m) = self.modules.lock().unwrap_or_else(|p| p.into_inner()).get(&id) {
            return Ok(m.clone());
        }
        let module = py.detach(|| device.compile(&self.source, &self.options)).map_err(compile_error)?;
        self.modules.lock().unwrap_or_else(|p| p.into_inner()).insert(id, module.clone());
        Ok(module)
    }
}

/// `gpuport.RawModule(code, options=(), name_expressions=(), name="kernel.cu")`.
#[pyclass(name = "RawModule", module = "gpuport", frozen)]
pub struct PyRawModule {
    program: std::sync::Arc<Program>,
}

#[pymethods]
impl PyRawModule {
    #[new]
    #[pyo3(signature = (code, options = None, name_expressions = None, name = None))]
    fn new(
        code: String,
        options: Option<Vec<String>>,
        name_expressions: Option<Vec<String>>,
        name: Option<String>,
    ) -> Self {
        let name = name.unwrap_or_else(|| "kernel.cu".to_owned());
        let program = Program::new(code, options.unwrap_or_default(), name_expressions.unwrap_or_default(), name);
        PyRawModule { program: std::sync::Arc::new(program) }
    }

    /// Compiles for `device` now (a compile error raises here rather than at the first
    /// launch).
    #[pyo3(signature = (device))]
    fn compile(&self, py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<()> {
        self.program.module(py, &parse_device(device)?).map(|_| ())
    }

    /// The kernel `name` (a plain name, or a name expression given at construction).
    fn get_function(&self, name: String) -> PyRawKernel {
        PyRawKernel { program: self.program.clone(), name, device: None }
    }
}

/// `gpuport.RawKernel(code, name, options=(), name_expressions=(), device=None)`.
#[pyclass(name = "RawKernel", module = "gpuport", frozen)]
pub struct PyRawKernel {
    program: std::sync::Arc<Program>,
    name: String,
    /// Where to launch when no array or stream says (and where it was compiled eagerly).
    device: Option<AnyDevice>,
}

#[pymethods]
impl PyRawKernel {
    #[new]
    #[pyo3(signature = (code, name, options = None, name_expressions = None, device = None))]
    fn new(
        py: Python<'_>,
        code: String,
        name: String,
        options: Option<Vec<String>>,
        name_expressions: Option<Vec<String>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let (options, name_expressions) = (options.unwrap_or_default(), name_expressions.unwrap_or_default());
        let program = std::sync::Arc::new(Program::new(code, options, name_expressions, format!("{name}.cu")));
        let device = device.filter(|d| !d.is_none()).map(parse_device).transpose()?;
        if let Some(d) = &device {
            let module = program.module(py, d)?;
            d.kernel(&module, &name).py()?;
        }
        Ok(PyRawKernel { program, name, device })
    }

    /// The kernel's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Launches the kernel: `grid` and `block` are ints or tuples of up to three; `args`
    /// a tuple of arrays (gpuport's, DLPack or CUDA Array Interface producers) and scalars.
    #[pyo3(signature = (grid, block, args, *, shared_mem = 0, stream = None))]
    fn __call__(
        &self,
        py: Python<'_>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        shared_mem: u32,
        stream: Option<PyRef<'_, PyStream>>,
    ) -> PyResult<()> {
        let config =
            LaunchConfig { grid: dims(grid, "grid")?, block: dims(block, "block")?, shared_mem_bytes: shared_mem };
        let mut launch_args = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            launch_args.push(argument(py, i, &arg)?);
        }
        let first_array = launch_args.iter().find_map(|a| match a {
            LaunchArg::Array(a) => Some(a.device().clone()),
            LaunchArg::Scalar(_) => None,
        });
        // The stream's device, else the kernel's, else the first array's.
        let (device, stream): (AnyDevice, AnyStream) = match (stream, self.device.clone(), first_array) {
            (Some(s), _, _) => (s.device.clone(), s.inner.clone()),
            (None, Some(d), _) | (None, None, Some(d)) => {
                let s = d.default_stream(DefaultStream::Legacy).py()?;
                (d.clone(), s)
            }
            (None, None, None) => {
                return Err(PyValueError::new_err(format!(
                    "{}: no array argument, stream= or device= says where to launch",
                    self.name
                )))
            }
        };
        let module = self.program.module(py, &device)?;
        let kernel = device.kernel(&module, &self.name).py()?;
        py.detach(|| launch_on_arrays(&stream, &kernel, &config, &launch_args)).py()
    }
}

/// A grid or block: an int, or a tuple of one to three positive ints.
fn dims(arg: &Bound<'_, PyAny>, what: &str) -> PyResult<[u32; 3]> {
    let values: Vec<u32> = if let Ok(n) = arg.extract::<u32>() {
        vec![n]
    } else if let Ok(t) = arg.extract::<Vec<u32>>() {
        t
    } else {
        return Err(PyTypeError::new_err(format!("{what} must be an int or a tuple of up to three ints")));
    };
    if values.is_empty() || values.len() > 3 || values.contains(&0) {
        return Err(PyValueError::new_err(format!("{what} must have one to three positive sizes, not {values:?}")));
    }
    let mut out = [1u32; 3];
    out[..values.len()].copy_from_slice(&values);
    Ok(out)
}

/// One launch argument from Python.
fn argument(py: Python<'_>, i: usize, arg: &Bound<'_, PyAny>) -> PyResult<LaunchArg> {
    if let Some(a) = crate::creation::array_operand(py, arg)? {
        return Ok(LaunchArg::Array(a));
    }
    let typed = |dtype: DType, bytes: &[u8]| Scalar::from_raw(dtype, bytes).py().map(LaunchArg::Scalar);
    // Python scalars, as CuPy passes them. `bool` before `int`: it is one.
    if arg.is_instance_of::<PyBool>() {
        return typed(DType::BOOL, &[u8::from(arg.extract::<bool>()?)]);
    }
    if arg.is_instance_of::<PyInt>() {
        let v: i64 =
            arg.extract().map_err(|_| PyValueError::new_err(format!("argument {i}: the int does not fit int64")))?;
        return typed(DType::I64, &v.to_ne_bytes());
    }
    if arg.is_instance_of::<PyFloat>() {
        return typed(DType::F64, &arg.extract::<f64>()?.to_ne_bytes());
    }
    if let Ok(c) = arg.cast::<PyComplex>() {
        let mut bytes = c.real().to_ne_bytes().to_vec();
        bytes.extend_from_slice(&c.imag().to_ne_bytes());
        return typed(DType::C128, &bytes);
    }
    // A NumPy scalar: its own type and bytes.
    if arg.hasattr("dtype")? && arg.hasattr("tobytes")? && arg.getattr("shape").is_ok_and(|s| s.len().ok() == Some(0)) {
        let dtype = crate::dtype::parse(Some(&arg.getattr("dtype")?), DType::F64)?;
        let bytes: Vec<u8> = arg.call_method0("tobytes")?.extract()?;
        return typed(dtype, &bytes);
    }
    Err(PyTypeError::new_err(format!(
        "kernel argument {i} is a {}: pass an array (gpuport, DLPack or CUDA Array Interface) or a scalar (a NumPy scalar, int, float, bool or complex)",
        arg.get_type().name()?
    )))
}
