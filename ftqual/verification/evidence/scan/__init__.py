"""The evidence readers' fast paths (numpy, `bytes.find` over blocks of whole lines).

The evidence readers' fast paths: numpy and `bytes.find` over a block of whole lines, never a Python step
per line.

Each finds what the domain reader's line-by-line path (the reference, kept in the domain module) would find,
and hands it the lines it must read:

- `canonical`: Megatron's iteration lines parsed a block at a time (shapes proven once, digits read as
  matrices);
- `keywords`: where a block's lines hold any of a set of keywords (one pass of aligned words for the long
  ones), the gaps between the lines already proven;
- `train_blocks`: a training log's block: its iteration lines in bulk, the ranks that printed, where the
  other keyword lines start (`train_log._Collector` reads those);
- `launcher_blocks`: a launcher.log block: the lines holding a needle, and those that may change the year
  (`launcher_log._Collector` reads those).

The parity tests (`tests/unit/verification/evidence/test_fast_paths.py`, `test_block_scans.py`,
`test_launcher_blocks.py`,
`tests/unit/bench/`) compare them with the reference readers.
"""
