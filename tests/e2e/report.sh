#!/usr/bin/env bash
# `ncclguard report`: the HTML page of a hang, in a real headless Chromium (Debian's
# chromium; the browser cases skip where it is not installed): the page fetches
# nothing, its verdict and a picture per communicator are in the browser's DOM, and
# its screenshot is not blank. At 4,096 ranks the picture stays a few rows: identical
# ranks are one bar, the culprit another.
source "$(dirname "$0")/lib.sh"
GEN=$ROOT/$B/bench/gendumps
if [ ! -x "$NG" ] || [ ! -x "$GEN" ]; then
    skip "report" "ncclguard or bench/gendumps not built"; finish; exit
fi
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
# browser ARGS...: headless Chromium, as root too, with no network and a fresh profile
browser() {
    timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$TMP/profile" --proxy-server=127.0.0.1:9 "$@" 2>>"$TMP/browser.err"
}

# page NAME N RECORDS: N synthetic ranks, rank 37 % N never calls the last AllReduce;
# the report in $TMP/NAME.html
page() {
    "$GEN" -o "$TMP/$1" -n "$2" -r "$3" -t 8 --culprit $((37 % $2)) --cause missing &&
        "$NG" report "$TMP/$1" -o "$TMP/$1.html" >"$TMP/$1.out" 2>&1
    rc=$?
}

page small 64 256
if [ $rc = 1 ] && [ -s "$TMP/small.html" ] && grep -q 'culprit: rank 37 ' "$TMP/small.html"; then
    pass "report of 64 ranks: written, exit 1 (a culprit), the verdict in it"
else
    fail "report of 64 ranks" "rc=$rc $(cat "$TMP/small.out")"
fi
# Self-contained: nothing for a browser to fetch, no script.
if ! grep -Eiq '(src|href)=|https?://|<script|<link|@import|url\(' "$TMP/small.html"; then
    pass "the page references nothing outside itself and has no script"
else
    fail "self-contained page" "$(grep -Eio '(src|href)=[^ ]*|https?://[^ ]*|<script|<link|@import|url\(' \
        "$TMP/small.html" | head -n 3)"
fi

page large 4096 16
rows=$(python3 - "$TMP/large.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
svg = re.search(r"<svg.*?</svg>", html, re.S).group(0)    # the world communicator's
print(len(re.findall(r"<g class=", svg)), "culprit" in svg, len(html))
PY
)
read -r nrows culprit size <<<"$rows"
if [ $rc = 1 ] && [ "$nrows" -le 4 ] && [ "$culprit" = True ] && [ "$size" -lt 2000000 ]; then
    pass "4096 ranks: the world communicator is $nrows bars, the culprit's apart; page $((size / 1024)) KiB"
else
    fail "4096 ranks readable" "rc=$rc rows=$nrows culprit=$culprit size=$size"
fi

if [ -z "$CHROMIUM" ]; then
    skip "report in Chromium" "chromium is not installed (scripts/install-deps installs it as root)"
    finish; exit
fi
# The DOM as the browser built it: the verdict and the pictures are there.
browser --dump-dom "file://$TMP/small.html" >"$TMP/dom.html"
nsvg=$(grep -o '<svg' "$TMP/dom.html" | wc -l)
if grep -q 'id="verdict"' "$TMP/dom.html" && grep -q 'culprit: rank 37 (host gen-0004' "$TMP/dom.html" &&
    [ "$nsvg" -ge 2 ] && grep -q '<rect' "$TMP/dom.html"; then
    pass "Chromium's DOM holds the verdict and $nsvg pictures"
else
    fail "Chromium's DOM" "svg=$nsvg $(head -c 300 "$TMP/dom.html") $(tail -n 3 "$TMP/browser.err")"
fi
# The screenshot is not blank: a good share of its pixels are not white.
browser --screenshot="$TMP/shot.png" --window-size=1200,1400 "file://$TMP/small.html" >/dev/null
if out=$(python3 - "$TMP/shot.png" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), (depth, ctype)
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride, prev, inked, red = w * bpp, bytearray(w * bpp), 0, 0
for y in range(h):   # undo the PNG filters, row by row
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        r, g, bl = line[x], line[x + 1], line[x + 2]
        inked += (r, g, bl) != (255, 255, 255)
        red += r > 150 and g < 80 and bl < 80
    prev = line
share = inked / (w * h)
assert share > 0.03, f"only {share:.1%} of the pixels are not white"
print(f"{w}x{h}, {share:.0%} of the pixels not white, {red} red ones (the culprit)")
PY
); then
    pass "screenshot: $out"
else
    fail "screenshot not blank" "$out $(tail -n 3 "$TMP/browser.err")"
fi
finish
