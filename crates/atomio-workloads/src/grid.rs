//! Process-grid factorizations and block partitions shared by the structured workloads.
//!
//! **Invariants:** `near_square(n)` returns `(a, b)` with `a·b = n` and `a ≥ b`;
//! `near_cube(n)` returns `[a, b, c]` with `a·b·c = n` and `a ≥ b ≥ c` — the shapes
//! `MPI_Dims_create` produces (most balanced; ties broken toward the smaller largest factor).
//! `block(n, p, i)` is part `i` of `n` items split into `p` contiguous parts whose sizes
//! differ by at most one, the larger ones first; the parts tile `0..n` in order.

/// The most balanced `a × b = n` with `a ≥ b` (for `n = 0`, `(0, 0)`).
pub fn near_square(n: u32) -> (u32, u32) {
    let mut best = (n, 1);
    let mut b = 1u32;
    while u64::from(b) * u64::from(b) <= u64::from(n) {
        if n.is_multiple_of(b) {
            best = (n / b, b);
        }
        b += 1;
    }
    if n == 0 {
        (0, 0)
    } else {
        best
    }
}

/// The most balanced `a × b × c = n` with `a ≥ b ≥ c`: smallest `a − c`, then smallest `a`.
pub fn near_cube(n: u32) -> [u32; 3] {
    if n == 0 {
        return [0, 0, 0];
    }
    let mut best = [n, 1, 1];
    let mut c = 1u32;
    while u64::from(c).pow(3) <= u64::from(n) {
        if n.is_multiple_of(c) {
            let (a, b) = near_square(n / c);
            if b >= c {
                let key = |t: [u32; 3]| (t[0] - t[2], t[0]);
                if key([a, b, c]) < key(best) {
                    best = [a, b, c];
                }
            }
        }
        c += 1;
    }
    best
}

/// Part `i` of `n` items in `p` balanced contiguous parts: `(start, len)`.
/// Callers guarantee `p ≥ 1` and `i < p`.
pub fn block(n: u64, p: u64, i: u64) -> (u64, u64) {
    let base = n / p;
    let extra = n % p;
    let start = i * base + i.min(extra);
    (start, base + u64::from(i < extra))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factorizations_match_mpi_dims_create_shapes() {
        assert_eq!(near_square(1), (1, 1));
        assert_eq!(near_square(4), (2, 2));
        assert_eq!(near_square(6), (3, 2));
        assert_eq!(near_square(7), (7, 1));
        assert_eq!(near_square(12), (4, 3));
        assert_eq!(near_square(16), (4, 4));
        assert_eq!(near_cube(1), [1, 1, 1]);
        assert_eq!(near_cube(2), [2, 1, 1]);
        assert_eq!(near_cube(6), [3, 2, 1]);
        assert_eq!(near_cube(8), [2, 2, 2]);
        assert_eq!(near_cube(12), [3, 2, 2]);
        assert_eq!(near_cube(16), [4, 2, 2]);
        assert_eq!(near_cube(36), [4, 3, 3]);
        assert_eq!(near_cube(64), [4, 4, 4]);
        for n in 1..=300 {
            let (a, b) = near_square(n);
            assert!(a * b == n && a >= b);
            let [a, b, c] = near_cube(n);
            assert!(a * b * c == n && a >= b && b >= c, "{n}");
        }
    }

    #[test]
    fn blocks_tile_the_range_in_order() {
        for n in 0..40u64 {
            for p in 1..9u64 {
                let mut next = 0;
                for i in 0..p {
                    let (s, l) = block(n, p, i);
                    assert_eq!(s, next);
                    assert!(l == n / p || l == n / p + 1);
                    next = s + l;
                }
                assert_eq!(next, n);
            }
        }
    }
}
