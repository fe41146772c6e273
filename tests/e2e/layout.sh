#!/usr/bin/env bash
# The layout of shim/ (docs/architecture.md): includes go one way, no include
# cycles, every function declared in its own file's header. The checker is
# proved on copies of the tree with one planted violation each.
source "$(dirname "$0")/lib.sh"
GRAPH=$ROOT/scripts/include-graph

if out=$("$GRAPH" --check 2>&1); then
    pass "shim/ follows the layout rules"
else
    fail "layout rules" "$out"
fi

# plant NAME EXPECTED_TEXT: copies shim/, runs the edit in $edit, expects a failure
# that names EXPECTED_TEXT
plant() {
    local name=$1 expect=$2 tree=$TMP/$1
    mkdir -p "$tree" && cp -r "$ROOT/shim" "$tree/"
    (cd "$tree/shim" && eval "$edit")
    if out=$("$GRAPH" --root "$tree" --check 2>&1); then
        fail "planted $name is caught" "the checker passed"
    elif grep -qF -- "$expect" <<<"$out"; then
        pass "planted $name is caught"
    else
        fail "planted $name is caught" "got: $out"
    fi
}

edit='sed -i "0,/^#include \"base\/log.h\"/s//#include \"base\/log.h\"\n#include \"watch\/watchdog.h\"/" track/track.c'
plant upward-include 'track/track.c includes watch/watchdog.h: track/ may not include watch/'

edit='sed -i "0,/^#include \"base\/clock.h\"/s//#include \"base\/clock.h\"\n#include \"policy\/config.h\"/" track/ops.c'
plant track-reads-settings 'track/ops.c includes policy/config.h: track/ may not include policy/'

edit='echo "#include \"policy/config_load.h\"" >> policy/config.c'
plant cycle 'include cycle: policy/config -> policy/config_load'

edit='printf "void ncclguard_planted(void)\n{\n}\n" >> track/ops.c; echo "void ncclguard_planted(void);" >> track/lifecycle.h'
plant foreign-declaration 'ncclguard_planted is defined in track/ops.c but declared in track/lifecycle.h'

edit='printf "int ncclguard_orphan(int x)\n{\n    return x;\n}\n" >> watch/stats.c'
plant undeclared 'ncclguard_orphan is defined in watch/stats.c but declared nowhere'

if "$GRAPH" | grep -q '^track/ .* -> base ([0-9]*)$'; then
    pass "the graph shows track/ including base/ only"
else
    fail "graph output" "$("$GRAPH")"
fi
finish
