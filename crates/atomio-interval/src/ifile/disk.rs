//! Interval files on disk: the metadata written at offset 0, the file's length set, logical
//! bytes stored at and read from their physical places, and an interval file opened for
//! reading with its header and metadata checked (`IntervalFile`).

use super::*;
use std::path::{Path, PathBuf};

/// Writes the header and metadata at offset 0.
pub fn write_metadata(file: &File, layout: &IntervalLayout) -> Result<()> {
    file.write_all_at(&layout.encode(), 0)
        .map_err(io("writing the interval file's metadata"))
}

/// Sets the file's length to the layout's (the data reads as zeros until written; the
/// space is not reserved: a sparse file on file systems that have them).
pub fn preallocate(file: &File, layout: &IntervalLayout) -> Result<()> {
    file.set_len(layout.file_len())
        .map_err(io("setting the interval file's length"))
}

/// Stores the logical bytes `data` at `offset` into their physical places; bytes in no
/// interval are skipped. Returns the bytes stored.
pub fn write_logical(
    file: &File,
    layout: &IntervalLayout,
    offset: u64,
    data: &[u8],
) -> Result<u64> {
    let end = offset
        .checked_add(data.len() as u64)
        .ok_or(IfileError::TooLarge("write beyond the largest offset"))?;
    let mut n = 0;
    for (r, phys) in layout.map(offset, end) {
        let buf = &data[(r.start - offset) as usize..(r.end - offset) as usize];
        file.write_all_at(buf, phys)
            .map_err(io("writing interval data"))?;
        n += r.len();
    }
    Ok(n)
}

/// Reads the logical bytes at `offset` into `buf`; bytes in no interval read as zeros.
/// Returns the bytes found in intervals.
pub fn read_logical(
    file: &File,
    layout: &IntervalLayout,
    offset: u64,
    buf: &mut [u8],
) -> Result<u64> {
    let end = offset
        .checked_add(buf.len() as u64)
        .ok_or(IfileError::TooLarge("read beyond the largest offset"))?;
    buf.fill(0);
    let mut n = 0;
    for (r, phys) in layout.map(offset, end) {
        let dst = &mut buf[(r.start - offset) as usize..(r.end - offset) as usize];
        file.read_exact_at(dst, phys)
            .map_err(io("reading interval data"))?;
        n += r.len();
    }
    Ok(n)
}

/// An interval file opened for reading: its layout (and interval set) rebuilt from the
/// metadata.
pub struct IntervalFile {
    path: PathBuf,
    file: File,
    layout: IntervalLayout,
    file_len: u64,
}

impl IntervalFile {
    /// Reads the header (one read) and the metadata (one read) and checks them.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(io(format!("opening {}", path.display())))?;
        let file_len = file
            .metadata()
            .map_err(io(format!("reading the length of {}", path.display())))?
            .len();
        if file_len < HEADER_LEN {
            return Err(IfileError::Truncated {
                what: "the header",
                need: HEADER_LEN,
                have: file_len,
            });
        }
        let mut hb = [0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut hb, 0)
            .map_err(io(format!("reading the header of {}", path.display())))?;
        let h = Header::decode(&hb)?;
        let meta_end = HEADER_LEN + h.meta_len;
        if file_len < meta_end {
            return Err(IfileError::Truncated {
                what: "the metadata",
                need: meta_end,
                have: file_len,
            });
        }
        if file_len < h.file_len() {
            return Err(IfileError::Truncated {
                what: "the interval data",
                need: h.file_len(),
                have: file_len,
            });
        }
        let mut meta = Vec::new();
        meta.try_reserve_exact(h.meta_len as usize)
            .map_err(|_| IfileError::TooLarge("metadata does not fit in memory"))?;
        meta.resize(h.meta_len as usize, 0);
        file.read_exact_at(&mut meta, HEADER_LEN)
            .map_err(io(format!("reading the metadata of {}", path.display())))?;
        let layout = IntervalLayout::decode(&h, &meta)?;
        Ok(IntervalFile {
            path,
            file,
            layout,
            file_len,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn layout(&self) -> &IntervalLayout {
        &self.layout
    }

    pub fn header(&self) -> &Header {
        self.layout.header()
    }

    pub fn set(&self) -> &IntervalSet {
        self.layout.set()
    }

    /// The length of the file on disk (≥ the layout's).
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Reads logical bytes (zeros outside the intervals).
    pub fn read_logical(&self, offset: u64, buf: &mut [u8]) -> Result<u64> {
        read_logical(&self.file, &self.layout, offset, buf)
    }
}
