//! Big-endian field access shared by every format, and the macros that
//! turn a table of offsets into getters and setters.
//!
//! Reads index the buffer directly: a packet made with `new_checked` has
//! been length-checked against the highest offset its accessors touch, so
//! they stay in bounds; one made with `new_unchecked` may panic, as in
//! smoltcp.

/// An integer stored big-endian in `N` bytes.
pub(crate) trait BeInt: Copy {
    fn read(buf: &[u8], off: usize) -> Self;
    fn write(self, buf: &mut [u8], off: usize);
}

macro_rules! be_int {
    ($($ty:ty),*) => {$(
        impl BeInt for $ty {
            #[inline]
            fn read(buf: &[u8], off: usize) -> Self {
                const N: usize = core::mem::size_of::<$ty>();
                let mut raw = [0u8; N];
                raw.copy_from_slice(&buf[off..off + N]);
                <$ty>::from_be_bytes(raw)
            }
            #[inline]
            fn write(self, buf: &mut [u8], off: usize) {
                let raw = self.to_be_bytes();
                buf[off..off + raw.len()].copy_from_slice(&raw);
            }
        }
    )*};
}
be_int!(u8, u16, u32, u64);

/// IBA has several 24-bit fields (VendorID, ProducerType, round-trip
/// latency); they live in the low three bytes of a `u32`.
#[inline]
pub(crate) fn read_u24(buf: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([0, buf[off], buf[off + 1], buf[off + 2]])
}

#[inline]
pub(crate) fn write_u24(buf: &mut [u8], off: usize, value: u32) {
    let raw = value.to_be_bytes();
    buf[off..off + 3].copy_from_slice(&raw[1..]);
}

/// Fails unless `buf` holds at least `need` bytes.
#[inline]
pub(crate) fn check_len(buf: &[u8], need: usize) -> crate::Result<()> {
    if buf.len() < need {
        Err(crate::Error::Truncated {
            need,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Defines `struct $P<T> { buffer: T }` with the constructors and length
/// check every format shares.
macro_rules! packet {
    ($(#[$m:meta])* $P:ident, $len:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $P<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $P<T> {
            /// Wraps `buffer` without checking its length: accessors may
            /// panic if it is too short. Use [`Self::new_checked`] on
            /// bytes from the wire.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps `buffer` after checking that every field is in bounds.
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let packet = Self::new_unchecked(buffer);
                packet.check_len()?;
                Ok(packet)
            }

            /// Fails with [`Error::Truncated`]($crate::Error::Truncated)
            /// when the buffer is shorter than the format.
            pub fn check_len(&self) -> $crate::Result<()> {
                $crate::field::check_len(self.buffer.as_ref(), $len)
            }

            /// Gives the buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The whole underlying buffer.
            pub fn as_bytes(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    };
}
pub(crate) use packet;

/// Getters (for `T: AsRef<[u8]>`) and setters (for `T: AsMut<[u8]>` too)
/// from a table of `name, set_name: KIND @ OFFSET [=> bits SHIFT, WIDTH |
/// => bit N];` lines. KIND is `u8`/`u16`/`u32`/`u64`, `u24`, or `bool`
/// (with `=> bit N`). Setters drop value bits beyond the field's width.
macro_rules! fields {
    ($P:ident; $(
        $(#[$m:meta])*
        $get:ident, $set:ident : $kind:tt @ $off:expr $(=> $how:ident $($arg:literal),+)? ;
    )*) => {
        $( $crate::field::fields!(@one $P, [$(#[$m])*], $get, $set, $kind, $off $(, $how $($arg),+)?); )*
    };

    (@one $P:ident, [$(#[$m:meta])*], $get:ident, $set:ident, u24, $off:expr) => {
        impl<T: AsRef<[u8]>> $P<T> {
            $(#[$m])*
            #[inline]
            pub fn $get(&self) -> u32 {
                $crate::field::read_u24(self.buffer.as_ref(), $off)
            }
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> $P<T> {
            #[doc = concat!("Sets [`Self::", stringify!($get), "`] (24 bits).")]
            #[inline]
            pub fn $set(&mut self, value: u32) {
                $crate::field::write_u24(self.buffer.as_mut(), $off, value)
            }
        }
    };

    (@one $P:ident, [$(#[$m:meta])*], $get:ident, $set:ident, bool, $off:expr, bit $bit:literal) => {
        impl<T: AsRef<[u8]>> $P<T> {
            $(#[$m])*
            #[inline]
            pub fn $get(&self) -> bool {
                self.buffer.as_ref()[$off] & (1u8 << $bit) != 0
            }
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> $P<T> {
            #[doc = concat!("Sets [`Self::", stringify!($get), "`].")]
            #[inline]
            pub fn $set(&mut self, value: bool) {
                let byte = &mut self.buffer.as_mut()[$off];
                *byte = (*byte & !(1u8 << $bit)) | (u8::from(value) << $bit);
            }
        }
    };

    (@one $P:ident, [$(#[$m:meta])*], $get:ident, $set:ident, $ty:ident, $off:expr, bits $shift:literal, $width:literal) => {
        impl<T: AsRef<[u8]>> $P<T> {
            $(#[$m])*
            #[inline]
            pub fn $get(&self) -> $ty {
                let raw = <$ty as $crate::field::BeInt>::read(self.buffer.as_ref(), $off);
                (raw >> $shift) & ((1 << $width) - 1)
            }
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> $P<T> {
            #[doc = concat!("Sets [`Self::", stringify!($get), "`] (", stringify!($width), " bits).")]
            #[inline]
            pub fn $set(&mut self, value: $ty) {
                let mask: $ty = ((1 << $width) - 1) << $shift;
                let buf = self.buffer.as_mut();
                let raw = <$ty as $crate::field::BeInt>::read(buf, $off);
                let raw = (raw & !mask) | ((value << $shift) & mask);
                $crate::field::BeInt::write(raw, buf, $off);
            }
        }
    };

    (@one $P:ident, [$(#[$m:meta])*], $get:ident, $set:ident, $ty:ident, $off:expr) => {
        impl<T: AsRef<[u8]>> $P<T> {
            $(#[$m])*
            #[inline]
            pub fn $get(&self) -> $ty {
                <$ty as $crate::field::BeInt>::read(self.buffer.as_ref(), $off)
            }
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> $P<T> {
            #[doc = concat!("Sets [`Self::", stringify!($get), "`].")]
            #[inline]
            pub fn $set(&mut self, value: $ty) {
                $crate::field::BeInt::write(value, self.buffer.as_mut(), $off)
            }
        }
    };
}
pub(crate) use fields;

/// Fails with `BadValue` naming `field`: for enum-valued fields whose
/// reserved encodings an SM must not act on.
pub(crate) fn bad(field: &'static str, value: impl Into<u64>) -> crate::Error {
    crate::Error::BadValue {
        field,
        value: value.into(),
    }
}

/// Indexed accessors for a block of same-width big-endian integers (a
/// table block inside a record) from `name, set_name: KIND @ OFFSET;`
/// lines: `name(i)` reads element `i` at `OFFSET + i · size`, and
/// `set_name(i, value)` writes it. KIND is `u8`/`u16`/`u32`/`u64`.
macro_rules! elements {
    ($P:ident; $(
        $(#[$m:meta])*
        $get:ident, $set:ident : $ty:ident @ $off:expr ;
    )*) => {$(
        impl<T: AsRef<[u8]>> $P<T> {
            $(#[$m])*
            #[inline]
            pub fn $get(&self, i: usize) -> $ty {
                let off = $off + core::mem::size_of::<$ty>() * i;
                <$ty as $crate::field::BeInt>::read(self.buffer.as_ref(), off)
            }
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> $P<T> {
            #[doc = concat!("Sets element `i` of [`Self::", stringify!($get), "`].")]
            #[inline]
            pub fn $set(&mut self, i: usize, value: $ty) {
                let off = $off + core::mem::size_of::<$ty>() * i;
                $crate::field::BeInt::write(value, self.buffer.as_mut(), off)
            }
        }
    )*};
}
pub(crate) use elements;

/// Views of formats nested in a record (a NodeInfo in NodeRecord, ...)
/// from `name, name_mut: INNER @ RANGE;` lines: `name()` and `name_mut()`
/// wrap bytes RANGE of the record, unchecked, as the record's own length
/// check covers them.
macro_rules! nested {
    ($P:ident; $(
        $(#[$m:meta])*
        $get:ident, $get_mut:ident : $Inner:ident @ $range:expr ;
    )*) => {$(
        impl<T: AsRef<[u8]>> $P<T> {
            $(#[$m])*
            #[inline]
            pub fn $get(&self) -> $Inner<&[u8]> {
                $Inner::new_unchecked(&self.buffer.as_ref()[$range])
            }
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> $P<T> {
            #[doc = concat!("[`Self::", stringify!($get), "`], writable.")]
            #[inline]
            pub fn $get_mut(&mut self) -> $Inner<&mut [u8]> {
                $Inner::new_unchecked(&mut self.buffer.as_mut()[$range])
            }
        }
    )*};
}
pub(crate) use nested;
