#!/usr/bin/env python3
"""Series of a real run for `promtool test rules` (tests/e2e/metrics_rules.sh).

  prom_series.py snap DIR OUT PERIOD   until SIGTERM, every PERIOD seconds, copies the
                                       *.prom files of DIR into OUT/NNNN/ (one snapshot:
                                       what a scrape of node_exporter would have served)
  prom_series.py series OUT NAME...    the input_series of the snapshots in OUT, as YAML
                                       lines (indented for a test's input_series:), of
                                       the families NAME...; one value per snapshot, "_"
                                       where a series is missing
  prom_series.py value OUT K METRIC    the lines of METRIC in snapshot K (from 0; -1: the
                                       last), "LABELS VALUE" each, for the test to pick
                                       its expectations from
"""
import os
import shutil
import signal
import sys
import time


def snap(d, out, period):
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    k = 0
    while not stop:
        names = [n for n in os.listdir(d) if n.endswith(".prom")] if os.path.isdir(d) else []
        if names:
            dst = os.path.join(out, "%04d" % k)
            os.makedirs(dst)
            for n in names:
                try:
                    shutil.copyfile(os.path.join(d, n), os.path.join(dst, n))
                except OSError:
                    pass  # removed at exit meanwhile
            k += 1
        time.sleep(period)


def samples(path):
    """{series: value} of one snapshot directory."""
    got = {}
    for n in sorted(os.listdir(path)):
        with open(os.path.join(path, n)) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                key, value = line.rstrip("\n").rsplit(" ", 1)
                got[key] = value
    return got


def snapshots(out):
    return [samples(os.path.join(out, k)) for k in sorted(os.listdir(out))]


def series(out, names):
    snaps = snapshots(out)
    keys = sorted({k for s in snaps for k in s if k.split("{", 1)[0] in names})
    for key in keys:
        values = " ".join(s.get(key, "_") for s in snaps)
        print("      - series: '%s'" % key)
        print("        values: '%s'" % values)


def value(out, k, metric):
    snaps = snapshots(out)
    for key, v in sorted(snaps[int(k)].items()):
        if key.split("{", 1)[0] == metric:
            print("%s %s" % (key[len(metric):], v))


def main():
    cmd = sys.argv[1]
    if cmd == "snap":
        snap(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif cmd == "series":
        series(sys.argv[2], set(sys.argv[3:]))
    elif cmd == "value":
        value(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
