#!/usr/bin/env python3
"""Turn a run directory brought back from the GPU machine into a test fixture.

    python tools/gpu/trim_fixture.py SRC_RUN_DIR DEST_DIR [--replace OLD=NEW ...]

Copies the run directory without checkpoint payloads (`*.distcp`, `*.pt`) and without `__pycache__`,
leaves out empty folders (git keeps none, so the tests on a clean clone would see another run),
rewrites the machine's absolute paths in text files (OLD=NEW pairs, longest first), and in binary files
(`.metadata` pickles) only where NEW can be padded to OLD's length, so the pickle stays loadable.
The launcher's checkpoint record (`checkpoint_record/`) keeps every file's length: its copies are rewritten
only in place (the padded binary rewrite), and record.json's sha256 of each rewritten copy is updated, so the
record still vouches for its copies once the checkpoint directory is gone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

SKIP_SUFFIXES = (".distcp", ".pt")
RECORD_DIR = "checkpoint_record"  # files whose sha256 its record.json holds: rewritten in place only
RECORD_FILE = "record.json"


def rewrite_text(data: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in pairs:
        data = data.replace(old, new)
    return data


def rewrite_binary(data: bytes, pairs: list[tuple[str, str]]) -> bytes:
    for old, new in pairs:
        old_b, new_b = old.encode(), new.encode()
        if len(new_b) > len(old_b):
            continue
        # pad inside the path with '/' repeats ("a//b" names the same place) to keep the length
        padded = new_b.rstrip(b"/") + b"/" * (len(old_b) - len(new_b.rstrip(b"/")))
        data = data.replace(old_b, padded)
    return data


def trim(src: Path, dest: Path, pairs: list[tuple[str, str]]) -> int:
    count = 0
    rehashed: dict[Path, dict[str, str]] = {}
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts or path.name.endswith(SKIP_SUFFIXES):
            continue
        target = dest / rel
        if path.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.readlink().name)  # fixtures keep `.current` as a plain file
        elif path.is_dir():
            continue  # folders come with their files: git keeps no empty folder, so a clone would differ
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            raw = path.read_bytes()
            if RECORD_DIR in rel.parts[:-1] and path.name != RECORD_FILE:
                new = rewrite_binary(raw, pairs)
                target.write_bytes(new)
                if new != raw:
                    record = dest.joinpath(*rel.parts[: rel.parts.index(RECORD_DIR) + 1])
                    inner = rel.relative_to(record.relative_to(dest)).as_posix()
                    rehashed.setdefault(record, {})[inner] = hashlib.sha256(new).hexdigest()
            else:
                try:
                    target.write_text(rewrite_text(raw.decode(), pairs))
                except UnicodeDecodeError:
                    target.write_bytes(rewrite_binary(raw, pairs))
            shutil.copystat(path, target)
            count += 1
    for record, hashes in rehashed.items():
        _update_record(record / RECORD_FILE, hashes)
    return count


def _update_record(record_json: Path, hashes: dict[str, str]) -> None:
    """record.json with the sha256 of each copy the path rewrite changed (its mtime kept)."""
    stat = record_json.stat()
    doc = json.loads(record_json.read_text(encoding="utf-8"))
    for entry in doc.get("entries", []):
        if entry.get("path") in hashes:
            entry["sha256"] = hashes[entry["path"]]
    record_json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.utime(record_json, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--replace", action="append", default=[], metavar="OLD=NEW")
    args = parser.parse_args(argv)
    pairs = sorted((tuple(p.split("=", 1)) for p in args.replace), key=lambda p: -len(p[0]))
    if args.dest.exists():
        print(f"trim_fixture: {args.dest} exists; choose a new destination", file=sys.stderr)
        return 2
    print(f"trim_fixture: {trim(args.src, args.dest, pairs)} files -> {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
