//! The simulation's accesses: random monotone noncontiguous byte patterns (contiguous
//! runs, vectors, indexed blocks, subarrays in either order) inside the shared region.

use atomio_layout::{Access, Block, Order, Pattern};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A random monotone access inside `[0, span)`.
pub(super) fn random_access(rng: &mut ChaCha8Rng, span: u64) -> Access {
    loop {
        let base = rng.gen_range(0..span / 2);
        let room = span - base;
        let one = Pattern::bytes(1).expect("valid");
        let p = match rng.gen_range(0..4) {
            0 => Pattern::bytes(rng.gen_range(1..=room.min(700))),
            1 => {
                let blocklen = rng.gen_range(1..=8u64);
                let stride = blocklen + rng.gen_range(0..40u64);
                let count = rng.gen_range(1..=(room / stride).clamp(1, 40));
                Pattern::hvector(count, blocklen, stride, &one)
            }
            2 => {
                let mut at = 0u64;
                let mut blocks = Vec::new();
                for _ in 0..rng.gen_range(1..12) {
                    at += rng.gen_range(0..60u64);
                    let len = rng.gen_range(1..30u64);
                    if at + len > room {
                        break;
                    }
                    blocks.push(Block {
                        disp: at,
                        blocklen: len,
                    });
                    at += len;
                }
                if blocks.is_empty() {
                    continue;
                }
                Pattern::hindexed(blocks, &one)
            }
            _ => {
                let (rows, cols) = (rng.gen_range(2..12u64), rng.gen_range(2..64u64));
                let (sr, sc) = (rng.gen_range(1..=rows), rng.gen_range(1..=cols));
                let (r0, c0) = (rng.gen_range(0..=rows - sr), rng.gen_range(0..=cols - sc));
                let order = if rng.gen_bool(0.5) {
                    Order::C
                } else {
                    Order::Fortran
                };
                Pattern::subarray(&[rows, cols], &[sr, sc], &[r0, c0], order, &one)
            }
        };
        let Ok(p) = p else { continue };
        if let Ok(a) = Access::new(base, p) {
            if a.hull().is_some_and(|h| h.end <= span) {
                return a;
            }
        }
    }
}
