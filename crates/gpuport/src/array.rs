//! [`Array`]: an allocation plus byte offset, dtype, layout, device, read-only flag and the
//! stream its pending work is on. Views share the allocation.

use std::fmt;

use gpuport_core::{Buffer, DType, DefaultStream, DeviceId, Element, Error, Layout, Result};

use crate::dynamic::{AnyDevice, AnyStream, DynDevice, DynStream};

/// An n-dimensional array on any device.
#[derive(Clone)]
pub struct Array {
    buffer: Buffer,
    offset: usize,
    dtype: DType,
    layout: Layout,
    device: AnyDevice,
    read_only: bool,
    pending: Option<AnyStream>,
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Array")
            .field("device", &self.device.id())
            .field("dtype", &self.dtype.to_string())
            .field("shape", &self.layout.shape())
            .field("strides", &self.layout.strides())
            .field("offset", &self.offset)
            .field("read_only", &self.read_only)
            .finish()
    }
}

fn nbytes(layout: &Layout, dtype: DType) -> Result<usize> {
    layout.numel().checked_mul(dtype.itemsize()?).ok_or_else(|| Error::invalid_layout("the byte size overflows"))
}

impl Array {
    /// An uninitialised-content (backend-defined) C-contiguous array on `device`.
    pub fn empty(device: &AnyDevice, shape: &[usize], dtype: DType) -> Result<Self> {
        let layout = Layout::contiguous(shape)?;
        let buffer = device.alloc(nbytes(&layout, dtype)?)?;
        Self::from_buffer(device, buffer, 0, dtype, layout)
    }

    /// A zero-filled C-contiguous array on `device`.
    pub fn zeros(device: &AnyDevice, shape: &[usize], dtype: DType) -> Result<Self> {
        let a = Self::empty(device, shape, dtype)?;
        device.memset(&a.buffer, 0, a.buffer.len(), 0)?;
        Ok(a)
    }

    /// A C-contiguous array on `device` holding `data` (row-major for `shape`).
    pub fn from_slice<T: Element>(device: &AnyDevice, data: &[T], shape: &[usize]) -> Result<Self> {
        let layout = Layout::contiguous(shape)?;
        if layout.numel() != data.len() {
            return Err(Error::invalid_argument(format!(
                "{} values for shape {shape:?} ({} elements)",
                data.len(),
                layout.numel()
            )));
        }
        let a = Self::empty(device, shape, T::DTYPE)?;
        a.default_stream()?.write(as_bytes(data), &a.buffer, 0)?;
        Ok(a)
    }

    /// An array over an existing buffer. The elements must fit inside it.
    pub fn from_buffer(
        device: &AnyDevice,
        buffer: Buffer,
        offset: usize,
        dtype: DType,
        layout: Layout,
    ) -> Result<Self> {
        if buffer.device() != device.id() {
            return Err(Error::invalid_argument(format!(
                "buffer of {} given for an array on {}",
                buffer.device(),
                device.id()
            )));
        }
        layout.check_fits(offset, dtype.itemsize()?, buffer.len())?;
        Ok(Array { buffer, offset, dtype, layout, device: device.clone(), read_only: false, pending: None })
    }

    /// The allocation.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }
    /// Byte offset of element `[0, …, 0]` in the buffer.
    pub fn byte_offset(&self) -> usize {
        self.offset
    }
    /// Address of element `[0, …, 0]`.
    pub fn data_addr(&self) -> u64 {
        self.buffer.addr() + self.offset as u64
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Shape and element strides.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// Extents.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }
    /// Element strides.
    pub fn strides(&self) -> &[isize] {
        self.layout.strides()
    }
    /// The device handle.
    pub fn device(&self) -> &AnyDevice {
        &self.device
    }
    /// The device id.
    pub fn device_id(&self) -> DeviceId {
        self.device.id()
    }
    /// True when writes through this array are refused.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
    /// Bytes of the elements (numel × itemsize).
    pub fn nbytes(&self) -> usize {
        // Checked at construction: the layout fits its buffer.
        self.layout.numel() * self.dtype.itemsize().unwrap_or(0)
    }
    /// The stream the array's pending work was queued on, if any.
    pub fn pending_stream(&self) -> Option<&AnyStream> {
        self.pending.as_ref()
    }

    /// Notes that work touching this array was queued on `stream` (readers must order
    /// after it).
    pub fn set_pending_stream(&mut self, stream: Option<AnyStream>) {
        self.pending = stream;
    }

    /// Waits for pending work, then forgets the stream.
    pub fn synchronize(&mut self) -> Result<()> {
        if let Some(stream) = self.pending.take() {
            stream.synchronize()?;
        }
        Ok(())
    }

    fn default_stream(&self) -> Result<AnyStream> {
        self.device.default_stream(DefaultStream::Legacy)
    }

    fn view(&self, layout: Layout, element_offset: isize) -> Result<Array> {
        let item = self.dtype.itemsize()? as isize;
        let offset = element_offset
            .checked_mul(item)
            .and_then(|b| (self.offset as isize).checked_add(b))
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| Error::invalid_layout("view offset out of range"))?;
        layout.check_fits(offset, item as usize, self.buffer.len())?;
        Ok(Array { layout, offset, ..self.clone() })
    }

    /// A strided slice along `axis` (`step` may be negative; see [`Layout::slice`]).
    pub fn slice(&self, axis: usize, start: usize, stop: usize, step: isize) -> Result<Array> {
        let (layout, first) = self.layout.slice(axis, start, stop, step)?;
        self.view(layout, first)
    }

    /// The array with its axes reordered.
    pub fn permute(&self, axes: &[usize]) -> Result<Array> {
        self.view(self.layout.permute(axes)?, 0)
    }

    /// The same elements with another shape; the array must be C-contiguous.
    pub fn reshape(&self, shape: &[usize]) -> Result<Array> {
        let layout = Layout::contiguous(shape)?;
        if layout.numel() != self.numel() {
            return Err(Error::invalid_argument(format!("cannot reshape {} elements into {shape:?}", self.numel())));
        }
        if !self.layout.is_c_contiguous() {
            return Err(Error::invalid_layout("reshape needs a C-contiguous array"));
        }
        self.view(layout, 0)
    }

    /// A read-only view.
    pub fn to_read_only(&self) -> Array {
        Array { read_only: true, ..self.clone() }
    }

    /// Copies the elements to the host in row-major order (gathering strided layouts),
    /// after waiting for pending work.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_dtype::<T>()?;
        if let Some(stream) = &self.pending {
            stream.synchronize()?;
        }
        let item = std::mem::size_of::<T>();
        let span = self.layout.span(item)?;
        let mut bytes = vec![0u8; span.len()];
        if !bytes.is_empty() {
            let start = (self.offset as isize + span.start) as usize;
            self.default_stream()?.read(&self.buffer, start, &mut bytes)?;
        }
        let mut out = Vec::with_capacity(self.numel());
        self.layout.for_each_offset(|o| {
            let at = (o * item as isize - span.start) as usize;
            // SAFETY: `at..at + item` lies within `bytes` (the span covers every element);
            // `T: Element` is plain old data, read unaligned.
            out.push(unsafe { std::ptr::read_unaligned(bytes.as_ptr().add(at).cast::<T>()) });
        });
        Ok(out)
    }

    /// Overwrites the elements from `data` (row-major). The array must be C-contiguous
    /// and writable.
    pub fn copy_from_slice<T: Element>(&mut self, data: &[T]) -> Result<()> {
        self.check_dtype::<T>()?;
        if self.read_only {
            return Err(Error::invalid_argument("the array is read-only"));
        }
        if data.len() != self.numel() {
            return Err(Error::invalid_argument(format!(
                "{} values for an array of {} elements",
                data.len(),
                self.numel()
            )));
        }
        if !self.layout.is_c_contiguous() {
            return Err(Error::invalid_layout("copy_from_slice needs a C-contiguous array"));
        }
        self.synchronize()?;
        self.default_stream()?.write(as_bytes(data), &self.buffer, self.offset)
    }

    fn check_dtype<T: Element>(&self) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid_argument(format!("array holds {} but {} was asked for", self.dtype, T::DTYPE)));
        }
        Ok(())
    }
}

/// The bytes of a slice of plain-old-data elements.
pub fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `T: Element` is plain old data without padding; the byte slice covers exactly
    // the same memory and lifetime.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Runtime;

    fn host() -> AnyDevice {
        Runtime::discover_with(&Default::default()).device("host").unwrap()
    }

    #[test]
    fn round_trip_and_views() {
        let dev = host();
        let data: Vec<i32> = (0..20).collect();
        let a = Array::from_slice(&dev, &data, &[4, 5]).unwrap();
        assert_eq!(a.to_vec::<i32>().unwrap(), data);
        let t = a.permute(&[1, 0]).unwrap();
        assert_eq!(t.shape(), &[5, 4]);
        assert_eq!(&t.to_vec::<i32>().unwrap()[..4], &[0, 5, 10, 15]);
        let rev = a.slice(1, 4, 0, -2).unwrap();
        assert_eq!(rev.to_vec::<i32>().unwrap(), vec![4, 2, 9, 7, 14, 12, 19, 17]);
        assert!(rev.buffer().same_allocation(a.buffer()));
        let r = a.reshape(&[2, 10]).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), data);
        assert!(t.reshape(&[20]).is_err());
        assert!(a.to_vec::<f32>().is_err());
        assert!(Array::from_slice(&dev, &data, &[3, 5]).is_err());
    }

    #[test]
    fn writes_respect_read_only_and_layout() {
        let dev = host();
        let mut a = Array::zeros(&dev, &[3], DType::F64).unwrap();
        a.copy_from_slice(&[1.0f64, 2.0, 3.0]).unwrap();
        assert_eq!(a.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0]);
        let mut ro = a.to_read_only();
        assert!(ro.copy_from_slice(&[0.0f64; 3]).is_err());
        let empty = Array::zeros(&dev, &[0, 4], DType::F32).unwrap();
        assert_eq!(empty.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    }
}
