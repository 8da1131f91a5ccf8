//! The manifest: a JSON description of a run, so the file can be verified after the fact
//! (`atomio-lab verify FILE` reads `FILE.atomio.json` next to it, see `manifest_path_for`).
//!
//! ```json
//! {
//!   "version": 1,
//!   "file": "out.dat",
//!   "tag_key": 0,
//!   "writes": [
//!     { "writer": 0, "op": 1,
//!       "access": { "base": 0, "pattern": [ {"Bytes": {"len": 64}},
//!                   {"Vector": {"count": 1000, "blocklen": 1, "stride": 4096, "elem": 0}} ] } },
//!     { "writer": 1, "op": 1, "ranges": [[0, 4096], [8192, 9000]] }
//!   ],
//!   "reads": [
//!     { "reader": 2, "op": 7, "ranges": [[100, 200]], "data": { "hex": "00ff…" } },
//!     { "reader": 3, "op": 1, "access": { … }, "data": { "file": "reads.bin", "offset": 65536 } }
//!   ]
//! }
//! ```
//!
//! **Invariants and decisions:**
//! * `version` must be 1; unknown fields are errors (a typo must not silently drop a write).
//! * Every operation has exactly one of `access` (an `atomio_layout::Access`, validated on
//!   load: monotone, no overflow) or `ranges` (half-open `[start, end)` pairs, increasing and
//!   non-overlapping; touching pairs merge). A write's `(writer, op)` seeds its tags.
//! * A read's observed bytes, in data order (increasing file offset), are either
//!   `{"file": path, "offset": n}` — the preferred form, since reads can be hundreds of MiB
//!   and many reads can share one dump file — or `{"hex": "…"}` for small reads (hex rather
//!   than base64: no extra dependency, readable in diffs, and the 2× size only matters for
//!   data that belongs in a file anyway). Their length must equal the read's size.
//! * Relative paths are relative to the manifest's directory, so a run directory can be moved.
//! * `tag_key` defaults to 0 (`TagKey::DEFAULT`).
//! * The data file must start empty (or zero-filled): unwritten bytes are assumed to read as
//!   zero by concurrent reads.

use crate::error::Error;
use crate::op::{OpId, Ranges, Read, ReadId, Write, WriteId};
use crate::report::Report;
use crate::source::SubSource;
use crate::tag::TagKey;
use crate::Options;
use atomio_layout::{Access, ByteRange, RangeList};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const MANIFEST_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub version: u32,
    /// The data file, relative to the manifest's directory unless absolute.
    pub file: PathBuf,
    #[serde(default)]
    pub tag_key: u64,
    #[serde(default)]
    pub writes: Vec<WriteEntry>,
    #[serde(default)]
    pub reads: Vec<ReadEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteEntry {
    pub writer: u32,
    pub op: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges: Option<Vec<[u64; 2]>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadEntry {
    pub reader: u32,
    pub op: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges: Option<Vec<[u64; 2]>>,
    pub data: Observed,
}

/// Where a read's observed bytes are: a file (and offset in it) or inline hex.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observed {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Where `atomio-lab verify FILE` looks for the manifest of `FILE`: `FILE.atomio.json`.
pub fn manifest_path_for(data_file: &Path) -> PathBuf {
    let mut s = data_file.as_os_str().to_owned();
    s.push(".atomio.json");
    PathBuf::from(s)
}

/// Loads the manifest at `path` and verifies the run it describes.
pub fn verify_manifest(path: impl AsRef<Path>) -> Result<Report, Error> {
    let path = path.as_ref();
    let m = Manifest::load(path)?;
    m.verify(path.parent().unwrap_or(Path::new(".")))
}

fn ranges_of(
    op: OpId,
    access: &Option<Access>,
    ranges: &Option<Vec<[u64; 2]>>,
) -> Result<Ranges, Error> {
    match (access, ranges) {
        (Some(a), None) => Ok(Ranges::Access(a.clone())),
        (None, Some(r)) => {
            let list = r
                .iter()
                .map(|&[s, e]| ByteRange::new(s, e))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|v| RangeList::from_disjoint_sorted(&v))
                .map_err(|source| Error::Layout { op, source })?;
            Ok(Ranges::List(list))
        }
        _ => Err(Error::Manifest {
            what: format!("{op}: give exactly one of \"access\" and \"ranges\""),
        }),
    }
}

/// Encodes bytes as lowercase hex (for `Observed::hex`).
pub fn to_hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// Decodes hex (either case).
pub fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", b.len()));
    }
    let val = |i: usize| match b[i] {
        c @ b'0'..=b'9' => Ok(c - b'0'),
        c @ b'a'..=b'f' => Ok(c - b'a' + 10),
        c @ b'A'..=b'F' => Ok(c - b'A' + 10),
        c => Err(format!("not a hex digit at position {i}: {:?}", c as char)),
    };
    (0..b.len() / 2)
        .map(|i| Ok(val(2 * i)? << 4 | val(2 * i + 1)?))
        .collect()
}

impl Manifest {
    pub fn new(file: impl Into<PathBuf>) -> Self {
        Self {
            version: MANIFEST_VERSION,
            file: file.into(),
            tag_key: 0,
            writes: Vec::new(),
            reads: Vec::new(),
        }
    }

    pub fn load(path: &Path) -> Result<Self, Error> {
        let f = File::open(path)
            .map_err(|e| Error::io(format!("opening manifest {}", path.display()), e))?;
        let m: Manifest =
            serde_json::from_reader(BufReader::new(f)).map_err(|source| Error::Json {
                path: path.to_owned(),
                source,
            })?;
        if m.version != MANIFEST_VERSION {
            return Err(Error::Manifest {
                what: format!(
                    "version {} is not supported (expected {MANIFEST_VERSION})",
                    m.version
                ),
            });
        }
        Ok(m)
    }

    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let io = |e| Error::io(format!("writing manifest {}", path.display()), e);
        let f = File::create(path).map_err(io)?;
        let mut w = BufWriter::new(f);
        serde_json::to_writer_pretty(&mut w, self).map_err(|source| Error::Json {
            path: path.to_owned(),
            source,
        })?;
        w.write_all(b"\n").map_err(io)?;
        w.flush().map_err(io)
    }

    /// Adds a write described by `ranges`.
    pub fn add_write(&mut self, id: WriteId, ranges: &Ranges) {
        let (access, ranges) = entry_ranges(ranges);
        self.writes.push(WriteEntry {
            writer: id.writer,
            op: id.op,
            access,
            ranges,
        });
    }

    /// Adds a read described by `ranges` whose observed bytes are at `data`.
    pub fn add_read(&mut self, id: ReadId, ranges: &Ranges, data: Observed) {
        let (access, ranges) = entry_ranges(ranges);
        self.reads.push(ReadEntry {
            reader: id.reader,
            op: id.op,
            access,
            ranges,
            data,
        });
    }

    /// The writes, validated.
    pub fn writes(&self) -> Result<Vec<Write>, Error> {
        self.writes
            .iter()
            .map(|w| {
                let id = WriteId::new(w.writer, w.op);
                Ok(Write {
                    id,
                    ranges: ranges_of(OpId::Write(id), &w.access, &w.ranges)?,
                })
            })
            .collect()
    }

    /// The reads with their observed data opened (files relative to `base_dir`).
    pub fn reads(&self, base_dir: &Path) -> Result<Vec<Read<'static>>, Error> {
        let mut files: HashMap<PathBuf, Arc<File>> = HashMap::new();
        let mut out = Vec::with_capacity(self.reads.len());
        for r in &self.reads {
            let id = ReadId::new(r.reader, r.op);
            let op = OpId::Read(id);
            let ranges = ranges_of(op, &r.access, &r.ranges)?;
            let size = ranges.size();
            let observed: Box<dyn crate::ByteSource> = match (&r.data.file, &r.data.hex) {
                (Some(p), None) => {
                    let path = base_dir.join(p);
                    let f = match files.get(&path) {
                        Some(f) => f.clone(),
                        None => {
                            let f = File::open(&path).map_err(|e| {
                                Error::io(format!("{op}: opening {}", path.display()), e)
                            })?;
                            let f = Arc::new(f);
                            files.insert(path, f.clone());
                            f
                        }
                    };
                    Box::new(SubSource::new(f, r.data.offset, size))
                }
                (None, Some(h)) if r.data.offset == 0 => {
                    Box::new(from_hex(h).map_err(|e| Error::Manifest {
                        what: format!("{op}: data.hex: {e}"),
                    })?)
                }
                _ => {
                    return Err(Error::Manifest {
                        what: format!(
                            "{op}: data needs exactly one of \"file\" (with an optional \
                             \"offset\") and \"hex\""
                        ),
                    })
                }
            };
            out.push(Read {
                id,
                ranges,
                observed,
            });
        }
        Ok(out)
    }

    /// Verifies the run; relative paths are resolved against `base_dir`.
    pub fn verify(&self, base_dir: &Path) -> Result<Report, Error> {
        let writes = self.writes()?;
        let reads = self.reads(base_dir)?;
        let path = base_dir.join(&self.file);
        let file = File::open(&path)
            .map_err(|e| Error::io(format!("opening data file {}", path.display()), e))?;
        let opts = Options {
            key: TagKey(self.tag_key),
            ..Options::default()
        };
        crate::verify_with(&opts, &file, &writes, &reads)
    }
}

fn entry_ranges(r: &Ranges) -> (Option<Access>, Option<Vec<[u64; 2]>>) {
    match r {
        Ranges::Access(a) => (Some(a.clone()), None),
        Ranges::List(l) => (
            None,
            Some(l.as_slice().iter().map(|r| [r.start, r.end]).collect()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_garbage() {
        let b: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&b)).unwrap(), b);
        assert_eq!(from_hex("0aFf").unwrap(), vec![0x0a, 0xff]);
        assert!(from_hex("abc").is_err());
        assert!(from_hex("zz").is_err());
    }

    #[test]
    fn ranges_must_be_sorted_and_disjoint_and_exactly_one_form() {
        let op = OpId::Initial;
        assert!(ranges_of(op, &None, &Some(vec![[10, 20], [15, 30]])).is_err());
        assert!(ranges_of(op, &None, &Some(vec![[10, 5]])).is_err());
        assert!(ranges_of(op, &None, &None).is_err());
        let r = ranges_of(op, &None, &Some(vec![[0, 5], [5, 8]])).unwrap();
        assert_eq!(r.size(), 8);
    }

    #[test]
    fn unknown_fields_and_versions_are_rejected() {
        let dir = std::env::temp_dir().join(format!("atomio-verify-m-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("m.json");
        std::fs::write(
            &p,
            r#"{"version":1,"file":"x","writes":[{"writer":0,"op":0,"acess":{}}]}"#,
        )
        .unwrap();
        assert!(matches!(Manifest::load(&p), Err(Error::Json { .. })));
        std::fs::write(&p, r#"{"version":2,"file":"x"}"#).unwrap();
        assert!(matches!(Manifest::load(&p), Err(Error::Manifest { .. })));
        std::fs::write(&p, r#"{"version":1,"file":"x","writes":[{"writer":0,"op":0,"access":{"base":0,"pattern":[{"Vector":{"count":2,"blocklen":1,"stride":1,"elem":0}}]}}]}"#)
            .unwrap();
        assert!(matches!(Manifest::load(&p), Err(Error::Json { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
