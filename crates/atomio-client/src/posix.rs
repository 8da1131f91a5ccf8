//! The baseline users have today: one ordinary POSIX file, atomicity by `fcntl(F_SETLKW)`
//! over the bounding extent of each call, one `pwrite`/`pread` per contiguous piece —
//! ROMIO's UFS atomic path without MPI.
//!
//! `fcntl` locks belong to the *process*: two handles in one process never exclude each
//! other. Use one `PosixFile` per process (the benchmarks run clients as processes).

use atomio_layout::{Access, ByteRange};
use atomio_proto::{ErrorCode, WireError};
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub struct PosixFile {
    file: File,
    atomic: bool,
}

fn io(what: &str, e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::Io, format!("{what}: {e}"))
}

impl PosixFile {
    pub fn open(path: &Path, create: bool) -> Result<Self, WireError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| io(&format!("opening {}", path.display()), e))?;
        Ok(Self {
            file,
            atomic: false,
        })
    }

    pub fn set_atomic(&mut self, atomic: bool) {
        self.atomic = atomic;
    }

    /// Blocks until the byte-range lock is granted (`F_SETLKW`), or releases it.
    fn lock(&self, kind: libc::c_int, r: ByteRange) -> Result<(), WireError> {
        // SAFETY-free: nix wraps the call; the struct is plain data.
        let fl = libc::flock {
            l_type: kind as libc::c_short,
            l_whence: libc::SEEK_SET as libc::c_short,
            l_start: r.start as libc::off_t,
            l_len: r.len() as libc::off_t,
            l_pid: 0,
        };
        loop {
            match fcntl(self.file.as_raw_fd(), FcntlArg::F_SETLKW(&fl)) {
                Ok(_) => return Ok(()),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(io("fcntl", e)),
            }
        }
    }

    fn locked<T>(
        &self,
        kind: libc::c_int,
        access: &Access,
        f: impl FnOnce() -> Result<T, WireError>,
    ) -> Result<T, WireError> {
        let hull = match (self.atomic, access.hull()) {
            (true, Some(h)) => h,
            _ => return f(),
        };
        self.lock(kind, hull)?;
        let result = f();
        let unlocked = self.lock(libc::F_UNLCK, hull);
        let v = result?;
        unlocked?;
        Ok(v)
    }

    pub fn write(&self, access: &Access, data: &[u8]) -> Result<(), WireError> {
        crate::check_len("write", data.len(), access.size())?;
        self.locked(libc::F_WRLCK, access, || {
            let mut at = 0usize;
            for r in access.ranges() {
                let len = r.len() as usize;
                self.file
                    .write_all_at(&data[at..at + len], r.start)
                    .map_err(|e| io("pwrite", e))?;
                at += len;
            }
            Ok(())
        })
    }

    pub fn read(&self, access: &Access, out: &mut [u8]) -> Result<(), WireError> {
        crate::check_len("read", out.len(), access.size())?;
        self.locked(libc::F_RDLCK, access, || {
            let mut at = 0usize;
            for r in access.ranges() {
                let len = r.len() as usize;
                self.file
                    .read_exact_at(&mut out[at..at + len], r.start)
                    .map_err(|e| io("pread", e))?;
                at += len;
            }
            Ok(())
        })
    }

    pub fn sync(&self) -> Result<(), WireError> {
        self.file.sync_data().map_err(|e| io("fsync", e))
    }
}
