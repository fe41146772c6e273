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

# plant NAME EXPECTED_TEXT: a copy of shim/ with the edit in $edit (run in shim/)
graph_check() { "$GRAPH" --check "$@"; }
plant() { edit="cd shim && $edit" planted "$1" "$2" graph_check shim; }

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
