#!/usr/bin/env python3
"""A reader of a metrics directory in a loop, as node_exporter's textfile collector reads it,
for tests/e2e/metrics.sh: until SIGTERM it reads every *.prom file of DIR again and again, and
counts the reads that are not a whole file. A whole file ends with a newline and holds every
family the shim writes (each has its # TYPE line whatever the job did), its last family among
them. At the end it writes "READS BAD WRITES" to OUT: the reads, the partial ones, and the
distinct files seen (by their ncclguard_metrics_written_timestamp_seconds line and rank).

usage: prom_reader.py DIR OUT"""
import os
import re
import signal
import sys

# every family of shim/watch/metrics.c, each written with its # TYPE line in every file: the
# names its family() calls give, read from the source so that a family added there is
# expected here too
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shim", "watch",
                      "metrics.c")
FAMILIES = set(re.findall(r'family\(\s*"([a-z_]+)"', open(SOURCE).read()))


def whole(text):
    if not text.endswith("\n"):
        return False
    types = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    return types == FAMILIES


def main():
    d, out = sys.argv[1], sys.argv[2]
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    reads = bad = 0
    seen = set()
    while not stop:
        try:
            names = [n for n in os.listdir(d) if n.endswith(".prom")]
        except OSError:
            names = []
        for n in names:
            try:
                with open(os.path.join(d, n)) as f:
                    text = f.read()
            except OSError:  # removed between the listing and the open
                continue
            reads += 1
            if not whole(text):
                bad += 1
                sys.stderr.write("partial read of %s (%d bytes)\n" % (n, len(text)))
                continue
            for line in text.splitlines():
                if line.startswith("ncclguard_metrics_written_timestamp_seconds{"):
                    seen.add((n, line))
    with open(out, "w") as f:
        f.write("%d %d %d\n" % (reads, bad, len(seen)))


if __name__ == "__main__":
    main()
