#!/usr/bin/env python3
"""The round trip of a dump through the ncclguard command's reader (cli/dump/dump.h).

usage: check_dumpread.py ECHO FILE...

ECHO is build/tests/unit/dumpread_echo, which prints what the reader read, with the
dump's member names. For each FILE, with both JSON backends (simdjson and jansson):
every member the reader gives back equals the file's own, as Python reads it (every
element of every array, in order), and the two backends give back the same.
A file whose name contains "bad" must be refused by both, with a reason (in the
words of each library).
Prints one line; exits 1 with the first difference.
"""
import json
import subprocess
import sys


def compare(mine, orig, where):
    if isinstance(mine, dict):
        if not isinstance(orig, dict):
            return f"{where}: an object, the file has {orig!r}"
        for k, v in mine.items():
            if k not in orig:
                if v in ([], None):  # an older schema's absent member, read as its default
                    continue
                return f"{where}.{k}: read, but the file has no such member"
            bad = compare(v, orig[k], f"{where}.{k}")
            if bad:
                return bad
        return None
    if isinstance(mine, list):
        if not isinstance(orig, list) or len(mine) != len(orig):
            return f"{where}: {len(mine)} elements read, the file has {orig!r:.80}"
        for i, (a, b) in enumerate(zip(mine, orig)):
            bad = compare(a, b, f"{where}[{i}]")
            if bad:
                return bad
        return None
    if mine != orig:
        return f"{where}: read {mine!r}, the file has {orig!r}"
    return None


def echo(tool, backend, files):
    args = [tool] + (["--jansson"] if backend == "jansson" else []) + files
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def main():
    tool, files = sys.argv[1], sys.argv[2:]
    fast, slow = echo(tool, "simdjson", files), echo(tool, "jansson", files)
    fields = 0
    for path, a, b in zip(files, fast, slow):
        if a != b and not ("error" in a and "error" in b):  # the reasons' words may differ
            print(f"check_dumpread: {path}: the backends differ: simdjson {str(a)[:200]} "
                  f"jansson {str(b)[:200]}")
            return 1
        if "bad" in path.rsplit("/", 1)[-1]:
            if "error" not in a:
                print(f"check_dumpread: {path}: a bad dump was read")
                return 1
            continue
        if "error" in a:
            print(f"check_dumpread: {path}: not read: {a['error']}")
            return 1
        with open(path, encoding="utf-8") as f:
            orig = json.load(f)
        bad = compare(a, orig, "dump")
        if bad:
            print(f"check_dumpread: {path}: {bad}")
            return 1
        fields += len(json.dumps(a))
    print(f"check_dumpread: {len(files)} files, both backends read every member as written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
