//! What a file lives on, and whether the processes that open it share its cached pages.
//!
//! Direct placement moves the user's bytes with the file system's own I/O, so which data
//! paths are safe depends on how the file system's clients cache:
//!
//! * **Shared** — one page cache for every process on the host (ext4, xfs, btrfs, tmpfs, …):
//!   a store through a `MAP_SHARED` mapping lands in the same page every other process reads,
//!   so many small pieces may go through a mapping.
//! * **Coherent** — each client caches, and the file system keeps the caches coherent under
//!   its own locks (Lustre, GPFS, the CephFS kernel client, OrangeFS): a `pwrite` that
//!   returned is what any later `pread` on any node sees, but a mapping on one client writes
//!   back whole pages under that client's cache, so no mapping.
//! * **Private** — each client caches without coherence (NFS, every FUSE file system —
//!   GlusterFS, ceph-fuse, s3fs, … —, BeeGFS's buffered mode, SMB, anything unknown): bytes
//!   reach other clients only when flushed, and a client's cached pages and file size may be
//!   stale. Writes are flushed (`fdatasync`) before their lock is released, cached pages of
//!   the locked bytes are dropped and the size is fetched from the file system after it is
//!   acquired, and nothing is mapped (a mapped page is written back whole — another client's
//!   bytes in it with it — and a mapping past the size this client believes ends in
//!   `SIGBUS`).
//!
//! Detection reads the file system's magic number (`fstatfs`) and, for FUSE, the daemon's
//! name from `/proc/self/mountinfo` (`fuse.glusterfs`). A file system this module does not
//! know is Private: slow and correct rather than fast and wrong. One override,
//! `ATOMIO_FS_CACHES=shared|coherent|private` (the MPI library also takes the hint
//! `atomio_fs_caches`), wins over detection.
//!
//! **Invariants:** detection never fails an open (what cannot be read is Private); the
//! override is the only way to get a weaker data path than detection gives.

use nix::sys::statfs::fstatfs;
use std::fmt;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

/// How the clients of a file system cache a file's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Caches {
    /// One page cache for every process that opens the file (local file systems).
    Shared,
    /// Per-client caches that the file system keeps coherent.
    Coherent,
    /// Per-client caches without coherence: flush, drop, never map.
    Private,
}

impl Caches {
    /// The override's spelling (`shared`, `coherent`, `private`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "shared" => Some(Self::Shared),
            "coherent" => Some(Self::Coherent),
            "private" => Some(Self::Private),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::Coherent => "coherent",
            Self::Private => "private",
        }
    }
}

impl fmt::Display for Caches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a file was found to live on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsInfo {
    /// The file system's name: mountinfo's type (`ext4`, `nfs4`, `fuse.glusterfs`), else the
    /// name of its magic number.
    pub name: String,
    /// `statfs`'s `f_type`.
    pub magic: u64,
    pub caches: Caches,
    /// Whether `caches` came from the override rather than detection.
    pub overridden: bool,
}

impl fmt::Display for FsInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (caches {}", self.name, self.caches)?;
        if self.overridden {
            f.write_str(", set by ATOMIO_FS_CACHES")?;
        }
        f.write_str(")")
    }
}

/// The environment variable that overrides detection.
pub const OVERRIDE_ENV: &str = "ATOMIO_FS_CACHES";

/// Known magic numbers: (magic, name, caches). Everything else is Private.
const KNOWN: &[(u64, &str, Caches)] = &[
    (0xEF53, "ext4", Caches::Shared),
    (0x5846_5342, "xfs", Caches::Shared),
    (0x9123_683E, "btrfs", Caches::Shared),
    (0x0102_1994, "tmpfs", Caches::Shared),
    (0x8584_58F6, "ramfs", Caches::Shared),
    (0x794C_7630, "overlay", Caches::Shared),
    (0x2FC1_2FC1, "zfs", Caches::Shared),
    (0xF2F5_2010, "f2fs", Caches::Shared),
    (0xCA45_1A4E, "bcachefs", Caches::Shared),
    (0x3153_464A, "jfs", Caches::Shared),
    (0x5265_4973, "reiserfs", Caches::Shared),
    (0x0BD0_0BD0, "lustre", Caches::Coherent),
    (0x4750_4653, "gpfs", Caches::Coherent),
    (0x00C3_6400, "ceph", Caches::Coherent),
    (0x2003_0528, "orangefs", Caches::Coherent),
    (0x6969, "nfs", Caches::Private),
    (0x1983_0326, "beegfs", Caches::Private),
    (0x6573_5546, "fuse", Caches::Private),
    (0xFE53_4D42, "smb2", Caches::Private),
    (0xFF53_4D42, "cifs", Caches::Private),
    (0x0102_1997, "9p", Caches::Private),
];

/// What the file system's magic number says, before any override.
pub fn classify(magic: u64) -> (&'static str, Caches) {
    KNOWN
        .iter()
        .find(|(m, _, _)| *m == magic)
        .map_or(("unknown", Caches::Private), |&(_, n, c)| (n, c))
}

/// Detects what `file` lives on; `override_` (the override's value, if any) wins.
pub fn detect(file: &std::fs::File, override_: Option<&str>) -> FsInfo {
    let magic = fstatfs(file.as_fd())
        .map(|s| s.filesystem_type().0 as u64)
        .unwrap_or(0);
    let (magic_name, mut caches) = classify(magic);
    let name = file
        .metadata()
        .ok()
        .and_then(|m| mount_type(m.dev()))
        .unwrap_or_else(|| magic_name.to_string());
    let forced = override_.and_then(Caches::parse);
    if let Some(c) = forced {
        caches = c;
    }
    FsInfo {
        name,
        magic,
        caches,
        overridden: forced.is_some(),
    }
}

/// Like `detect`, with the override read from the environment.
pub fn detect_env(file: &std::fs::File) -> FsInfo {
    detect(file, std::env::var(OVERRIDE_ENV).ok().as_deref())
}

/// Forgets this client's clean cached pages of `file` that hold any byte of
/// `[start, start + len)` (`len` 0: to the end) and fetches its size from the file system (`statx` with
/// `AT_STATX_FORCE_SYNC`: NFS and FUSE then ask their server, and the kernel's idea of the
/// size, which bounds every later `pread`, is brought up to date); returns that size. What a
/// reader on a file system whose clients cache privately does before trusting its reads.
pub fn forget_cached(file: &std::fs::File, start: u64, len: u64) -> std::io::Result<u64> {
    // The kernel drops only pages wholly inside the range: widen it to whole pages, or the
    // pages at its ends (shared with bytes outside it) keep what another client overwrote.
    let page = rustix::param::page_size() as u64;
    let from = start / page * page;
    let len = if len == 0 {
        0
    } else {
        (start + len).div_ceil(page) * page - from
    };
    nix::fcntl::posix_fadvise(
        std::os::fd::AsRawFd::as_raw_fd(file),
        from as i64,
        len as i64,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )?;
    fresh_size(file)
}

/// The file's size as the file system has it now, not as this client cached it.
pub fn fresh_size(file: &std::fs::File) -> std::io::Result<u64> {
    let s = rustix::fs::statx(
        file,
        "",
        rustix::fs::AtFlags::EMPTY_PATH | rustix::fs::AtFlags::STATX_FORCE_SYNC,
        rustix::fs::StatxFlags::SIZE,
    )?;
    Ok(s.stx_size)
}

/// The file system type of the mount whose device is `dev` (`/proc/self/mountinfo`).
fn mount_type(dev: u64) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = format!(
        "{}:{}",
        nix::sys::stat::major(dev),
        nix::sys::stat::minor(dev)
    );
    mountinfo_type(&text, &want)
}

/// In mountinfo `text`, the type of the first mount of device `major:minor`: the field
/// after the ` - ` separator (`36 35 0:39 / /mnt rw - fuse.glusterfs host:/vol rw`).
fn mountinfo_type(text: &str, dev: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut fields = line.split(' ');
        if fields.nth(2)? != dev {
            return None;
        }
        let (_, after) = line.split_once(" - ")?;
        after.split(' ').next().map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers_map_to_what_their_caches_do() {
        assert_eq!(classify(0xEF53), ("ext4", Caches::Shared));
        assert_eq!(classify(0x0102_1994), ("tmpfs", Caches::Shared));
        assert_eq!(classify(0x0BD0_0BD0), ("lustre", Caches::Coherent));
        assert_eq!(classify(0x6969), ("nfs", Caches::Private));
        assert_eq!(classify(0x6573_5546), ("fuse", Caches::Private));
        // Unknown: the safe paths.
        assert_eq!(classify(0x1234_5678), ("unknown", Caches::Private));
    }

    #[test]
    fn mountinfo_names_the_fuse_daemon() {
        let text = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    36 35 0:39 / /run/bed/client-1 rw,relatime shared:20 - fuse.glusterfs vm:/v rw,user_id=0\n";
        assert_eq!(
            mountinfo_type(text, "0:39").as_deref(),
            Some("fuse.glusterfs")
        );
        assert_eq!(mountinfo_type(text, "254:0").as_deref(), Some("ext4"));
        assert_eq!(mountinfo_type(text, "0:40"), None);
    }

    #[test]
    fn the_override_wins_and_says_so() {
        let dir = std::env::temp_dir().join(format!("atomio-fs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        let f = std::fs::File::create(&p).unwrap();
        let detected = detect(&f, None);
        assert!(!detected.overridden);
        let forced = detect(&f, Some("private"));
        assert_eq!(forced.caches, Caches::Private);
        assert!(forced.overridden);
        assert_eq!(forced.name, detected.name);
        // A malformed override is no override.
        assert_eq!(detect(&f, Some("sometimes")).caches, detected.caches);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
