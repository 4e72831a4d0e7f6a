"""Linear algebra primitives, one module per concept, each record with all its rules and its
``op.<name>`` methods.

matmul.py (matmul), solve.py (solve, inv), determinants.py (det, slogdet), cholesky.py,
norm.py (the 2-norm), eigh.py, svd.py, qr.py (decompositions, with their result tuples),
pseudo.py (pinv, lstsq), matrix_power.py. Shared: matrices.py (rule pieces such as
``swap_last`` and argument checks), decomposition.py (what eigh, svd and qr share: one
primitive with several parts, fixed signs), samplers.py (the check cases' inputs).
"""
