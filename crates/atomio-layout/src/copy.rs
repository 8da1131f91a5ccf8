//! Copies between a pattern's bytes and packed data, a group of equal runs at a time.
//!
//! Packing a memory datatype (MPI_Pack's job) or extracting a read's pieces from a window
//! is one copy per run; for ROMIO noncontig's 4-byte elements a `memcpy` call and a step
//! of the run iterator per element cost more than the bytes. Here the runs come as groups
//! (`Runs::next_group`) and a group of small runs is copied by fixed-size moves in one
//! loop: ~1 ns a run instead of ~15.
//!
//! **Invariants:** the bytes copied and their order are exactly those of copying every run
//! of the pattern in typemap order (`Pattern::runs`) into or out of consecutive packed
//! bytes; a run past either buffer's end is an error before anything is copied there
//! (never a panic), checked per group.

use crate::pattern::Pattern;
use crate::runs::Group;

/// A group's runs and packed bytes do not fit the buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds {
    /// The pattern's byte the group reaches (one past its last).
    pub reach: u64,
    /// The packed byte it reaches.
    pub packed: u64,
}

/// Copies group `g`'s runs from `src` (offsets as in `g`) into `dst` at `at` onward, run
/// `i` to `at + i * g.len`.
pub fn gather_group(src: &[u8], g: Group, dst: &mut [u8], at: usize) -> Result<(), OutOfBounds> {
    let (s, d) = bounds(src.len(), dst.len(), g, at)?;
    let (src, dst) = (&src[s], &mut dst[d]);
    let (len, stride) = (g.len as usize, g.stride as usize);
    if g.count == 1 {
        dst.copy_from_slice(src);
        return Ok(());
    }
    if stride < len {
        // Overlapping runs (memory types may overlap): run by run.
        for (i, d) in dst.chunks_exact_mut(len).enumerate() {
            d.copy_from_slice(&src[i * stride..i * stride + len]);
        }
        return Ok(());
    }
    match len {
        1 => gather_fixed::<1>(src, stride, dst),
        2 => gather_fixed::<2>(src, stride, dst),
        4 => gather_fixed::<4>(src, stride, dst),
        8 => gather_fixed::<8>(src, stride, dst),
        16 => gather_fixed::<16>(src, stride, dst),
        _ => {
            for (d, s) in dst.chunks_exact_mut(len).zip(src.chunks(stride)) {
                d.copy_from_slice(&s[..len]);
            }
        }
    }
    Ok(())
}

/// Copies `src[at..]` into group `g`'s runs of `dst` (offsets as in `g`), run `i` from
/// `at + i * g.len`.
pub fn scatter_group(src: &[u8], at: usize, dst: &mut [u8], g: Group) -> Result<(), OutOfBounds> {
    let (d, s) = bounds(dst.len(), src.len(), g, at)?;
    let (src, dst) = (&src[s], &mut dst[d]);
    let (len, stride) = (g.len as usize, g.stride as usize);
    if g.count == 1 {
        dst.copy_from_slice(src);
        return Ok(());
    }
    if stride < len {
        for (i, s) in src.chunks_exact(len).enumerate() {
            dst[i * stride..i * stride + len].copy_from_slice(s);
        }
        return Ok(());
    }
    match len {
        1 => scatter_fixed::<1>(src, stride, dst),
        2 => scatter_fixed::<2>(src, stride, dst),
        4 => scatter_fixed::<4>(src, stride, dst),
        8 => scatter_fixed::<8>(src, stride, dst),
        16 => scatter_fixed::<16>(src, stride, dst),
        _ => {
            for (s, d) in src.chunks_exact(len).zip(dst.chunks_mut(stride)) {
                d[..len].copy_from_slice(s);
            }
        }
    }
    Ok(())
}

/// Packs the pattern's bytes (placed at 0 in `src`) into `dst`, in typemap order.
pub fn gather(pattern: &Pattern, src: &[u8], dst: &mut [u8]) -> Result<(), OutOfBounds> {
    let mut runs = pattern.runs(0);
    let mut at = 0usize;
    while let Some(g) = runs.next_group() {
        gather_group(src, g, dst, at)?;
        at += g.bytes() as usize;
    }
    Ok(())
}

/// Unpacks `src` into the pattern's bytes (placed at 0 in `dst`), in typemap order.
pub fn scatter(pattern: &Pattern, src: &[u8], dst: &mut [u8]) -> Result<(), OutOfBounds> {
    let mut runs = pattern.runs(0);
    let mut at = 0usize;
    while let Some(g) = runs.next_group() {
        scatter_group(src, at, dst, g)?;
        at += g.bytes() as usize;
    }
    Ok(())
}

/// The group's span in the pattern-side buffer and its packed span, both checked.
fn bounds(
    side: usize,
    packed: usize,
    g: Group,
    at: usize,
) -> Result<(std::ops::Range<usize>, std::ops::Range<usize>), OutOfBounds> {
    let reach = g.start.checked_add(
        (g.count - 1)
            .checked_mul(g.stride)
            .and_then(|x| x.checked_add(g.len))
            .unwrap_or(u64::MAX),
    );
    let bytes = g.count.checked_mul(g.len);
    let pend = bytes.and_then(|b| (at as u64).checked_add(b));
    match (reach, pend) {
        (Some(r), Some(p)) if r <= side as u64 && p <= packed as u64 => {
            Ok((g.start as usize..r as usize, at..p as usize))
        }
        _ => Err(OutOfBounds {
            reach: reach.unwrap_or(u64::MAX),
            packed: pend.unwrap_or(u64::MAX),
        }),
    }
}

#[inline]
fn gather_fixed<const L: usize>(src: &[u8], stride: usize, dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(L).zip(src.chunks(stride)) {
        d.copy_from_slice(&s[..L]);
    }
}

#[inline]
fn scatter_fixed<const L: usize>(src: &[u8], stride: usize, dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(L).zip(dst.chunks_mut(stride)) {
        d[..L].copy_from_slice(s);
    }
}
