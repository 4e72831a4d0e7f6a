"""Linear algebra primitives: matmul, matrix functions (solve, inv, det, ...), decompositions
(eigh, svd, qr) and the pseudo-inverse family."""
