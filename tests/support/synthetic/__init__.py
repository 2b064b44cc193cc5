"""Synthetic run directories in the recorded H200 formats (deterministic for a seed, standard library only):
the verifier's tests plant defects in them, and the benchmarks (bench/) grow them to any size."""
