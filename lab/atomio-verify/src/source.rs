//! Where bytes come from: the file under test and the data reads observed.
//!
//! **Invariants and why:**
//! * `ByteSource::read_at` is positional (`pread`), never seeks, and returns fewer bytes than
//!   asked only at the end of the source, so short files are detected, not misread.
//! * The verifier touches each source in increasing offset order, so a `Window` (one
//!   read-ahead buffer per source) turns millions of small checks into a few large reads.
//!   Memory is one window per source in use, never the whole file.
//! * In-memory sources are read in place (`as_slice`), with no copy.

use crate::error::Error;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// A random-access byte source.
pub trait ByteSource {
    /// Reads bytes at `offset` into `buf`; returns how many. Fewer than `buf.len()` only at
    /// the end of the source (0 at or past it).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;

    /// The number of bytes in the source.
    fn size(&self) -> io::Result<u64>;

    /// The whole source, when it is already in memory.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
}

impl ByteSource for [u8] {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        let Some(src) = self.get(start..) else {
            return Ok(0);
        };
        let n = src.len().min(buf.len());
        buf[..n].copy_from_slice(&src[..n]);
        Ok(n)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl ByteSource for Vec<u8> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.as_slice().read_at(offset, buf)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl ByteSource for File {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let Some(at) = offset.checked_add(done as u64) else {
                break;
            };
            match FileExt::read_at(self, &mut buf[done..], at) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

impl<T: ByteSource + ?Sized> ByteSource for &T {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        (**self).read_at(offset, buf)
    }
    fn size(&self) -> io::Result<u64> {
        (**self).size()
    }
    fn as_slice(&self) -> Option<&[u8]> {
        (**self).as_slice()
    }
}

impl<T: ByteSource + ?Sized> ByteSource for Box<T> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        (**self).read_at(offset, buf)
    }
    fn size(&self) -> io::Result<u64> {
        (**self).size()
    }
    fn as_slice(&self) -> Option<&[u8]> {
        (**self).as_slice()
    }
}

impl<T: ByteSource + ?Sized> ByteSource for Arc<T> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        (**self).read_at(offset, buf)
    }
    fn size(&self) -> io::Result<u64> {
        (**self).size()
    }
    fn as_slice(&self) -> Option<&[u8]> {
        (**self).as_slice()
    }
}

/// `len` bytes of another source starting at `offset`: one read's observed data inside a
/// larger dump file shared by many reads.
#[derive(Clone, Debug)]
pub struct SubSource<S> {
    inner: S,
    offset: u64,
    len: u64,
}

impl<S: ByteSource> SubSource<S> {
    pub fn new(inner: S, offset: u64, len: u64) -> Self {
        Self { inner, offset, len }
    }
}

impl<S: ByteSource> ByteSource for SubSource<S> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if offset >= self.len {
            return Ok(0);
        }
        let n = usize::try_from(self.len - offset)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let Some(at) = self.offset.checked_add(offset) else {
            return Ok(0);
        };
        self.inner.read_at(at, &mut buf[..n])
    }
    fn size(&self) -> io::Result<u64> {
        let inner = self.inner.size()?;
        Ok(inner.saturating_sub(self.offset).min(self.len))
    }
    fn as_slice(&self) -> Option<&[u8]> {
        let s = self.inner.as_slice()?;
        let start = usize::try_from(self.offset).ok()?;
        let end = usize::try_from(self.offset.checked_add(self.len)?).ok()?;
        s.get(start..end.min(s.len()))
    }
}

/// A forward-moving read-ahead buffer over a source.
pub(crate) struct Window<'s, S: ?Sized> {
    src: &'s S,
    what: String,
    buf: Vec<u8>,
    cap: usize,
    start: u64,
    filled: usize,
}

impl<'s, S: ByteSource + ?Sized> Window<'s, S> {
    pub(crate) fn new(src: &'s S, cap: usize, what: impl Into<String>) -> Self {
        Self {
            src,
            what: what.into(),
            buf: Vec::new(),
            cap: cap.max(1),
            start: 0,
            filled: 0,
        }
    }

    /// The bytes `[offset, offset + len)`; `len` should not exceed the window capacity for
    /// the buffer to stay bounded (larger requests still work, with a larger buffer).
    pub(crate) fn get(&mut self, offset: u64, len: usize) -> Result<&[u8], Error> {
        let end = offset.saturating_add(len as u64);
        let src: &'s S = self.src;
        if let Some(s) = src.as_slice() {
            let got = s.get(usize::try_from(offset).unwrap_or(usize::MAX)..);
            return match got.and_then(|g| g.get(..len)) {
                Some(d) => Ok(d),
                None => Err(self.short(offset, end, got.map_or(0, <[u8]>::len) as u64)),
            };
        }
        let in_window = offset >= self.start && end <= self.start + self.filled as u64;
        if !in_window {
            let want = self.cap.max(len);
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let n = self
                .src
                .read_at(offset, &mut self.buf[..want])
                .map_err(|e| Error::io(format!("reading {} at offset {offset}", self.what), e))?;
            self.start = offset;
            // A source claiming more than it was asked for must not make us slice past the
            // buffer.
            let n = n.min(want);
            self.filled = n;
            if n < len {
                return Err(self.short(offset, end, n as u64));
            }
        }
        let at = (offset - self.start) as usize;
        Ok(&self.buf[at..at + len])
    }

    fn short(&self, offset: u64, end: u64, got: u64) -> Error {
        Error::ShortRead {
            what: self.what.clone(),
            offset,
            end,
            got,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_read_in_place_and_report_short() {
        let data: Vec<u8> = (0..100).collect();
        let mut w = Window::new(&data[..], 16, "test");
        assert_eq!(w.get(10, 3).unwrap(), &[10, 11, 12]);
        assert!(matches!(w.get(98, 5), Err(Error::ShortRead { got: 2, .. })));
        assert!(matches!(
            w.get(u64::MAX - 1, 5),
            Err(Error::ShortRead { .. })
        ));
    }

    #[test]
    fn sub_source_is_a_window_of_its_inner_source() {
        let data: Vec<u8> = (0..100).collect();
        let s = SubSource::new(&data[..], 10, 5);
        assert_eq!(s.size().unwrap(), 5);
        assert_eq!(s.as_slice().unwrap(), &[10, 11, 12, 13, 14]);
        let mut buf = [0u8; 8];
        assert_eq!(s.read_at(3, &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], &[13, 14]);
    }

    #[test]
    fn file_window_refills_moving_forward() {
        let path = std::env::temp_dir().join(format!("atomio-verify-src-{}", std::process::id()));
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        std::fs::write(&path, &data).unwrap();
        let f = File::open(&path).unwrap();
        let mut w = Window::new(&f, 64, "file");
        for off in (0..9_990u64).step_by(37) {
            assert_eq!(
                w.get(off, 10).unwrap(),
                &data[off as usize..off as usize + 10]
            );
        }
        assert!(matches!(
            w.get(9_995, 10),
            Err(Error::ShortRead { got: 5, .. })
        ));
        std::fs::remove_file(&path).unwrap();
    }
}
