//! Element arithmetic for the reductions, per NCCL data type: each value read from bytes
//! (native order, unaligned), combined, and written back. Half-precision types (`float16`,
//! `bfloat16`) and the 8-bit floats are combined in `f32` and rounded back to nearest-even,
//! as NCCL's kernels accumulate them.

/// NCCL's data types, by `ncclDataType_t`'s numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)] // `ncclDataType_t`'s names
pub enum DType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float16,
    Float32,
    Float64,
    Bfloat16,
    Float8e4m3,
    Float8e5m2,
}

impl DType {
    /// The type `ncclDataType_t` value `raw` names.
    pub fn from_raw(raw: i32) -> Option<DType> {
        use DType::*;
        Some(match raw {
            0 => Int8,
            1 => Uint8,
            2 => Int32,
            3 => Uint32,
            4 => Int64,
            5 => Uint64,
            6 => Float16,
            7 => Float32,
            8 => Float64,
            9 => Bfloat16,
            10 => Float8e4m3,
            11 => Float8e5m2,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        use DType::*;
        match self {
            Int8 | Uint8 | Float8e4m3 | Float8e5m2 => 1,
            Float16 | Bfloat16 => 2,
            Int32 | Uint32 | Float32 => 4,
            Int64 | Uint64 | Float64 => 8,
        }
    }
}

/// NCCL's built-in reductions, by `ncclRedOp_t`'s numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedOp {
    /// The sum.
    Sum,
    /// The product.
    Prod,
    /// The largest.
    Max,
    /// The smallest.
    Min,
    /// The sum divided by the number of ranks (integers: truncated).
    Avg,
}

impl RedOp {
    /// The operation `ncclRedOp_t` value `raw` names (a user-made operation is not one).
    pub fn from_raw(raw: i32) -> Option<RedOp> {
        Some(match raw {
            0 => RedOp::Sum,
            1 => RedOp::Prod,
            2 => RedOp::Max,
            3 => RedOp::Min,
            4 => RedOp::Avg,
            _ => return None,
        })
    }
}

/// A value in the type it is combined in.
#[derive(Debug, Clone, Copy)]
enum Value {
    Signed(i64),
    Unsigned(u64),
    Float(f64),
}

fn read<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&bytes[..N]);
    a
}

fn get(dtype: DType, b: &[u8]) -> Value {
    use DType::*;
    match dtype {
        Int8 => Value::Signed(i8::from_ne_bytes(read(b)).into()),
        Uint8 => Value::Unsigned(b[0].into()),
        Int32 => Value::Signed(i32::from_ne_bytes(read(b)).into()),
        Uint32 => Value::Unsigned(u32::from_ne_bytes(read(b)).into()),
        Int64 => Value::Signed(i64::from_ne_bytes(read(b))),
        Uint64 => Value::Unsigned(u64::from_ne_bytes(read(b))),
        Float32 => Value::Float(f32::from_ne_bytes(read(b)).into()),
        Float64 => Value::Float(f64::from_ne_bytes(read(b))),
        Float16 => Value::Float(small_to_f32(u16::from_ne_bytes(read(b)).into(), HALF).into()),
        Bfloat16 => Value::Float(f32::from_bits(u32::from(u16::from_ne_bytes(read(b))) << 16).into()),
        Float8e4m3 => Value::Float(small_to_f32(b[0].into(), E4M3).into()),
        Float8e5m2 => Value::Float(small_to_f32(b[0].into(), E5M2).into()),
    }
}

fn put(dtype: DType, v: Value, out: &mut [u8]) {
    use DType::*;
    let (i, u, f) = match v {
        Value::Signed(i) => (i, i as u64, i as f64),
        Value::Unsigned(u) => (u as i64, u, u as f64),
        Value::Float(f) => (f as i64, f as u64, f),
    };
    match dtype {
        Int8 => out[..1].copy_from_slice(&(i as i8).to_ne_bytes()),
        Uint8 => out[0] = u as u8,
        Int32 => out[..4].copy_from_slice(&(i as i32).to_ne_bytes()),
        Uint32 => out[..4].copy_from_slice(&(u as u32).to_ne_bytes()),
        Int64 => out[..8].copy_from_slice(&i.to_ne_bytes()),
        Uint64 => out[..8].copy_from_slice(&u.to_ne_bytes()),
        Float32 => out[..4].copy_from_slice(&(f as f32).to_ne_bytes()),
        Float64 => out[..8].copy_from_slice(&f.to_ne_bytes()),
        Float16 => out[..2].copy_from_slice(&(f32_to_small(f as f32, HALF) as u16).to_ne_bytes()),
        Bfloat16 => out[..2].copy_from_slice(&(round_bits(f as f32, 16) as u16).to_ne_bytes()),
        Float8e4m3 => out[0] = f32_to_small(f as f32, E4M3) as u8,
        Float8e5m2 => out[0] = f32_to_small(f as f32, E5M2) as u8,
    }
}

/// A small float format: exponent and mantissa bits, and whether it has infinities (e4m3
/// has none: its all-ones exponent holds numbers and only `S.1111.111` is NaN — the "fn"
/// variant NCCL uses).
#[derive(Clone, Copy)]
struct Small {
    exp: u32,
    man: u32,
    infinities: bool,
}

const HALF: Small = Small { exp: 5, man: 10, infinities: true };
const E4M3: Small = Small { exp: 4, man: 3, infinities: false };
const E5M2: Small = Small { exp: 5, man: 2, infinities: true };

impl Small {
    fn bias(self) -> i32 {
        (1 << (self.exp - 1)) - 1
    }
    fn all_ones(self) -> u32 {
        (1 << self.exp) - 1
    }
    fn man_ones(self) -> u32 {
        (1 << self.man) - 1
    }
}

fn small_to_f32(bits: u32, f: Small) -> f32 {
    let sign = if (bits >> (f.exp + f.man)) & 1 == 1 { -1.0f32 } else { 1.0 };
    let e = (bits >> f.man) & f.all_ones();
    let m = bits & f.man_ones();
    if e == f.all_ones() && (f.infinities || m == f.man_ones()) {
        return if f.infinities && m == 0 { sign * f32::INFINITY } else { f32::NAN };
    }
    let (e, lead) = if e == 0 { (1, 0.0) } else { (e as i32, 1.0) };
    sign * (lead + m as f32 / (1u32 << f.man) as f32) * 2f32.powi(e - f.bias())
}

/// `x` in format `f`, rounded to nearest-even; past the largest finite value, infinity
/// where the format has one, else the largest value (the saturating conversion CUDA's e4m3
/// types use).
fn f32_to_small(x: f32, f: Small) -> u32 {
    let sign_bit = 1u32 << (f.exp + f.man);
    if x.is_nan() {
        let quiet = if f.infinities { 1 << (f.man - 1) } else { f.man_ones() };
        return (f.all_ones() << f.man) | quiet;
    }
    let sign = if x.is_sign_negative() { sign_bit } else { 0 };
    let largest = if f.infinities {
        ((f.all_ones() - 1) << f.man) | f.man_ones()
    } else {
        (f.all_ones() << f.man) | (f.man_ones() - 1)
    };
    let overflow = sign | if f.infinities { f.all_ones() << f.man } else { largest };
    if x.is_infinite() {
        return overflow;
    }
    let a = f64::from(x.abs());
    // The exponent of the smallest normal number; below it the spacing stays the same
    // (subnormals).
    let min_exp = 1 - f.bias();
    let exp = if a == 0.0 { min_exp } else { (a.log2().floor() as i32).max(min_exp) };
    let steps = (a / 2f64.powi(exp - f.man as i32)).round_ties_even() as u64;
    // Units of the spacing at `exp`: below 2^man only as a subnormal; 2^(man+1) (rounding
    // up into the next binade) carries into the exponent by the same sum.
    let encoded = if exp == min_exp && steps < 1 << f.man {
        steps
    } else {
        (((exp + f.bias()) as u64) << f.man) + steps - (1 << f.man)
    };
    if encoded > u64::from(largest) {
        return overflow;
    }
    sign | encoded as u32
}

/// The upper `16` bits of `x`'s `f32` encoding, rounded to nearest-even (`bfloat16`).
fn round_bits(x: f32, keep: u32) -> u32 {
    let bits = x.to_bits();
    if x.is_nan() {
        return (bits >> (32 - keep)) | 0x40;
    }
    let drop = 32 - keep;
    let half = 1u32 << (drop - 1);
    let rest = bits & ((1 << drop) - 1);
    let up = rest > half || (rest == half && (bits >> drop) & 1 == 1);
    (bits >> drop) + u32::from(up)
}

fn combine(op: RedOp, a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Signed(a), Value::Signed(b)) => Value::Signed(match op {
            RedOp::Sum | RedOp::Avg => a.wrapping_add(b),
            RedOp::Prod => a.wrapping_mul(b),
            RedOp::Max => a.max(b),
            RedOp::Min => a.min(b),
        }),
        (Value::Unsigned(a), Value::Unsigned(b)) => Value::Unsigned(match op {
            RedOp::Sum | RedOp::Avg => a.wrapping_add(b),
            RedOp::Prod => a.wrapping_mul(b),
            RedOp::Max => a.max(b),
            RedOp::Min => a.min(b),
        }),
        (Value::Float(a), Value::Float(b)) => Value::Float(match op {
            RedOp::Sum | RedOp::Avg => a + b,
            RedOp::Prod => a * b,
            RedOp::Max => a.max(b),
            RedOp::Min => a.min(b),
        }),
        // One dtype per collective: the kinds always match.
        (a, _) => a,
    }
}

/// `inputs` (one slice per rank, each `count` elements of `dtype`) reduced elementwise
/// with `op`, in rank order, into `out`.
pub fn reduce(dtype: DType, op: RedOp, inputs: &[&[u8]], out: &mut [u8]) {
    let size = dtype.size();
    let ranks = inputs.len();
    for (i, slot) in out.chunks_exact_mut(size).enumerate() {
        let at = i * size..(i + 1) * size;
        let mut acc = get(dtype, &inputs[0][at.clone()]);
        for input in &inputs[1..] {
            acc = combine(op, acc, get(dtype, &input[at.clone()]));
        }
        if op == RedOp::Avg {
            // The sum wraps at the element's width, as the device's does, before the
            // division.
            put(dtype, acc, slot);
            acc = match get(dtype, slot) {
                Value::Signed(s) => Value::Signed(s / ranks as i64),
                Value::Unsigned(u) => Value::Unsigned(u / ranks as u64),
                Value::Float(f) => Value::Float(f / ranks as f64),
            };
        }
        put(dtype, acc, slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|v| to(*v)).collect()
    }

    #[test]
    fn integers_reduce_with_every_operation_and_wrap_as_the_hardware_does() {
        let a = bytes(&[1i32, -5, 7, i32::MAX], i32::to_ne_bytes);
        let b = bytes(&[2i32, 3, -7, 1], i32::to_ne_bytes);
        let mut out = vec![0u8; a.len()];
        let cases: [(RedOp, [i32; 4]); 5] = [
            (RedOp::Sum, [3, -2, 0, i32::MIN]),
            (RedOp::Prod, [2, -15, -49, i32::MAX]),
            (RedOp::Max, [2, 3, 7, i32::MAX]),
            (RedOp::Min, [1, -5, -7, 1]),
            (RedOp::Avg, [1, -1, 0, i32::MIN / 2]),
        ];
        for (op, want) in cases {
            reduce(DType::Int32, op, &[&a, &b], &mut out);
            let got: Vec<i32> = out.chunks(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap())).collect();
            assert_eq!(got, want, "{op:?}");
        }
        let u = bytes(&[250u8, 3], |v| [v]);
        let mut out = [0u8; 2];
        reduce(DType::Uint8, RedOp::Sum, &[&u, &u], &mut out);
        assert_eq!(out, [244, 6]);
    }

    #[test]
    fn floats_reduce_in_their_precision() {
        let a = bytes(&[1.5f64, -2.0], f64::to_ne_bytes);
        let b = bytes(&[0.25f64, 8.0], f64::to_ne_bytes);
        let c = bytes(&[1.0f64, 1.0], f64::to_ne_bytes);
        let mut out = vec![0u8; 16];
        reduce(DType::Float64, RedOp::Avg, &[&a, &b, &c], &mut out);
        let got: Vec<f64> = out.chunks(8).map(|c| f64::from_ne_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, [2.75 / 3.0, 7.0 / 3.0]);
    }

    #[test]
    fn half_precision_types_round_trip_and_round_to_nearest_even() {
        // float16: 1.0 = 0x3c00, 65504 (largest) = 0x7bff, smallest subnormal 0x0001.
        for (bits, value) in [(0x3c00u32, 1.0f32), (0x7bff, 65504.0), (0x0001, 2f32.powi(-24)), (0xc000, -2.0)] {
            assert_eq!(small_to_f32(bits, HALF), value, "{bits:#x}");
            assert_eq!(f32_to_small(value, HALF), bits, "{value}");
        }
        // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to even (1.0).
        assert_eq!(f32_to_small(1.0 + 2f32.powi(-11), HALF), 0x3c00);
        assert_eq!(f32_to_small(1.0 + 3.0 * 2f32.powi(-11), HALF), 0x3c02);
        assert_eq!(f32_to_small(70000.0, HALF), 0x7c00, "past the largest: infinity");
        assert!(small_to_f32(f32_to_small(f32::NAN, HALF), HALF).is_nan());
        // bfloat16: the upper half of f32, rounded.
        assert_eq!(round_bits(1.0, 16), 0x3f80);
        assert_eq!(round_bits(f32::from_bits(0x3f80_8000), 16), 0x3f80, "halfway to even");
        assert_eq!(round_bits(f32::from_bits(0x3f81_8000), 16), 0x3f82, "halfway to even, up");
        // e4m3 (no infinities, saturating): 448 largest = 0x7e, NaN 0x7f; e5m2 like float16.
        assert_eq!(small_to_f32(0x7e, E4M3), 448.0);
        assert_eq!(f32_to_small(1000.0, E4M3), 0x7e);
        assert!(small_to_f32(0x7f, E4M3).is_nan());
        assert_eq!(f32_to_small(1.0, E4M3), 0x38);
        assert_eq!(f32_to_small(57344.0, E5M2), 0x7b);
        assert_eq!(small_to_f32(0x7c, E5M2), f32::INFINITY);
        // Every e4m3 and e5m2 number survives the trip.
        for bits in 0..256u32 {
            for f in [E4M3, E5M2] {
                let v = small_to_f32(bits, f);
                if !v.is_nan() {
                    assert_eq!(small_to_f32(f32_to_small(v, f), f), v, "{bits:#x}");
                }
            }
        }
    }

    #[test]
    fn half_sums_accumulate_in_f32_and_round_once() {
        let a = bytes(&[0x3c00u16], u16::to_ne_bytes); // 1.0
        let b = bytes(&[0x1400u16], u16::to_ne_bytes); // 2^-10
        let mut out = [0u8; 2];
        reduce(DType::Float16, RedOp::Sum, &[&a, &b, &b], &mut out);
        assert_eq!(u16::from_ne_bytes(out), 0x3c02, "1 + 2 * 2^-10");
        assert_eq!(DType::from_raw(9), Some(DType::Bfloat16));
        assert_eq!(DType::from_raw(12), None);
        assert_eq!(RedOp::from_raw(5), None);
    }
}
