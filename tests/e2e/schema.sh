#!/usr/bin/env bash
# One schema (shim/evidence/dump_format.h): the writer, the reader (cli/dump/,
# which trace and analyze use) and the benchmark's dump generator take the keys
# from its lists. A key renamed there is renamed in the writer, and the reader
# and the generator no longer build until they are told how to read and write it.
source "$(dirname "$0")/lib.sh"

# The generator's dumps are the writer's layout: the strict schema check.
if [ -x "$ROOT/$B/bench/gendumps" ]; then
    for cause in none missing crash; do
        d=$TMP/gen-$cause && mkdir -p "$d"
        args=() && [ $cause != none ] && args=(--culprit 1 --cause $cause)
        "$ROOT/$B/bench/gendumps" -o "$d" -n 4 -r 40 -t 2 "${args[@]}" >/dev/null
        if out=$($CHECK schema "$d"/ncclguard-*.json 2>&1); then
            pass "gendumps ($cause) writes the writer's schema"
        else
            fail "gendumps ($cause) writes the writer's schema" "$(head -n 3 <<<"$out")"
        fi
    done
else
    skip "gendumps' dumps" "$B/bench/gendumps not built"
fi

# rename LIST OLD NEW: a copy of dump_format.h with key OLD of LIST renamed, in
# $TMP/inc-NEW/evidence/ (first on the include path of the builds below)
rename() {
    local inc=$TMP/inc-$3
    mkdir -p "$inc/evidence"
    python3 - "$ROOT/shim/evidence/dump_format.h" "$1" "$2" "$3" >"$inc/evidence/dump_format.h" <<'PY'
import re, sys
text, lst, old, new = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4]
start = text.index("#define " + lst + "(X)")
end = text.index("\n\n", start)
body, n = re.subn(r"X\(" + old + ",", "X(" + new + ",", text[start:end])
assert n == 1, (lst, old, n)
sys.stdout.write(text[:start] + body + text[end:])
PY
    echo "$inc"
}
# build INC TARGET: builds TARGET (under $TMP/b) with INC first on the include path
build() { make -s --no-print-directory B="$TMP/b" CC="${CC:-cc} -I$1" "$TMP/b/$2" 2>&1; }

# list, old key, new key, the reader's object and what it then lacks, what gendumps lacks
for case in "NG_DUMP_OP_FIELDS seq sequence cli/dump/map.o OP_sequence OP_sequence" \
            "NG_DUMP_TOP_FIELDS host hostname cli/dump/read.o T_host TOP_hostname" \
            "NG_DUMP_FRAME_FIELDS module object cli/dump/stack.o K_frame_module FRAME_object"; do
    read -r list old new reader missing gen_missing <<<"$case"
    inc=$(rename "$list" "$old" "$new")
    rm -rf "$TMP/b"
    if out=$(build "$inc" shim/evidence/dump_body.o) &&
        grep -qa "\"$new\":" "$TMP/b/shim/evidence/dump_body.o" &&
        ! grep -qa "\"$old\":" "$TMP/b/shim/evidence/dump_body.o"; then
        pass "$old renamed $new: the writer writes \"$new\""
    else
        fail "$old renamed $new: the writer writes \"$new\"" "$(head -n 3 <<<"$out")"
    fi
    if out=$(build "$inc" "$reader"); then
        fail "$old renamed $new: the reader no longer builds" "$reader built"
    elif grep -q "$missing" <<<"$out"; then
        pass "$old renamed $new: the reader no longer builds ($missing)"
    else
        fail "$old renamed $new: the reader no longer builds" "$(head -n 3 <<<"$out")"
    fi
    if out=$(build "$inc" bench/gendumps); then
        fail "$old renamed $new: gendumps no longer builds" "it built"
    elif grep -q "$gen_missing" <<<"$out"; then
        pass "$old renamed $new: gendumps no longer builds ($gen_missing)"
    else
        fail "$old renamed $new: gendumps no longer builds" "$(head -n 3 <<<"$out")"
    fi
done
# and without a rename, the same builds pass (the failures above are the rename's)
rm -rf "$TMP/b"
if out=$(build "$TMP/none" cli/dump/map.o) && out=$(build "$TMP/none" bench/gendumps); then
    pass "the reader and gendumps build with the schema as it is"
else
    fail "the reader and gendumps build with the schema as it is" "$(head -n 3 <<<"$out")"
fi
finish
