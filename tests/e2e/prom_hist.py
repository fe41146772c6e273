#!/usr/bin/env python3
"""Checks the GPU-duration histograms of metrics files against the counters beside them
(tests/e2e/metrics.sh): per communicator, the histograms' samples of collectives (_count)
are the timed collectives (ncclguard_timed_collectives_total) and their _sum is the GPU
time (ncclguard_timed_gpu_seconds_total); the buckets are cumulative, the +Inf bucket is
_count, and each histogram's mean lies within its lowest and highest non-empty buckets.
Prints one line per problem and "histograms: N checked" last; exit 1 on a problem.

usage: prom_hist.py FILE..."""
import re
import sys

P2P = {"Send", "Recv"}
LINE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')


def labels(text):
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def check(path):
    problems, hists = [], {}
    timed, timed_s = {}, {}
    for line in open(path):
        m = LINE.match(line.strip())
        if not m:
            continue
        name, lab, value = m.group(1), labels(m.group(2)), float(m.group(3))
        if name == "ncclguard_timed_collectives_total":
            timed[lab["comm"]] = value
        elif name == "ncclguard_timed_gpu_seconds_total":
            timed_s[lab["comm"]] = value
        elif name.startswith("ncclguard_op_gpu_duration_seconds_"):
            key = (lab["comm"], lab["op"], lab["size"])
            h = hists.setdefault(key, {"buckets": []})
            part = name.rsplit("_", 1)[1]
            if part == "bucket":
                h["buckets"].append((float(lab["le"]), value))
            else:
                h[part] = value
    count, total = {}, {}
    for (comm, op, size), h in hists.items():
        b = h["buckets"]
        if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            problems.append("%s %s/%s %s: buckets not cumulative" % (path, comm, op, size))
        if not b or b[-1][0] != float("inf") or b[-1][1] != h.get("count"):
            problems.append("%s %s/%s %s: +Inf bucket is not _count" % (path, comm, op, size))
        n = h.get("count", 0)
        if n:
            lows = [0.0] + [le for le, _ in b]
            nonempty = [i for i in range(len(b)) if b[i][1] > (b[i - 1][1] if i else 0)]
            lo, hi = lows[nonempty[0]], b[nonempty[-1]][0]
            mean = h.get("sum", 0) / n
            if not (lo <= mean <= hi):
                problems.append("%s %s/%s %s: mean %g outside its buckets [%g, %g]"
                                % (path, comm, op, size, mean, lo, hi))
        if op not in P2P:
            count[comm] = count.get(comm, 0) + n
            total[comm] = total.get(comm, 0) + h.get("sum", 0)
    for comm, n in timed.items():
        if count.get(comm, 0) != n:
            problems.append("%s %s: %d timed collectives, %d in the histograms"
                            % (path, comm, n, count.get(comm, 0)))
        if abs(total.get(comm, 0) - timed_s.get(comm, 0)) > 1e-6 * max(1, n):
            problems.append("%s %s: %g s of GPU time, %g s in the histograms"
                            % (path, comm, timed_s.get(comm, 0), total.get(comm, 0)))
    return problems, len(hists)


def main():
    problems, n = [], 0
    for path in sys.argv[1:]:
        p, k = check(path)
        problems += p
        n += k
    for p in problems:
        print(p)
    print("histograms: %d checked" % n)
    sys.exit(1 if problems or not n else 0)


if __name__ == "__main__":
    main()
