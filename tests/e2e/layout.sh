#!/usr/bin/env bash
# The layout of shim/ and cli/ (docs/architecture.md): includes go one way, no
# include cycles, every function declared in its own file's header, and in cli/
# every function named with its folder's prefix. The checker is proved on copies
# of the trees with one planted violation each.
source "$(dirname "$0")/lib.sh"
GRAPH=$ROOT/scripts/include-graph

if out=$("$GRAPH" --check 2>&1); then
    pass "shim/ and cli/ follow the layout rules"
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

# cli/: the same rules, a shim folder it may include, and the prefixes
cplant() { edit="cd cli && $edit" planted "$1" "$2" graph_check shim cli; }

edit='sed -i "0,/^#include \"json\/json.h\"/s//#include \"json\/json.h\"\n#include \"dump\/dump.h\"/" json/json.c'
cplant cli-upward-include 'cli/json/json.c includes dump/dump.h: json/ may not include dump/'

edit='echo "#include \"policy/config.h\"" >> analyze/fold.c'
cplant cli-reads-settings 'cli/analyze/fold.c includes shim/policy/config.h: analyze/ may not include shim/policy/'

edit='printf "int dr_misplaced(void);\nint dr_misplaced(void)\n{\n    return 0;\n}\n" >> analyze/hang.c'
cplant cli-prefix 'dr_misplaced is defined in analyze/hang.c but does not start with an_, the prefix of analyze/'

edit='echo "#include \"analyze/read.h\"" >> analyze/fold.h'
cplant cli-cycle 'include cycle: analyze/fold -> analyze/read'

if "$GRAPH" | grep -q '^shim/track/ .* -> base ([0-9]*)$' &&
    "$GRAPH" --tree cli | grep -q '^cli/json/ .* -> nothing$'; then
    pass "the graph shows track/ including base/ only, json/ including nothing"
else
    fail "graph output" "$("$GRAPH")"
fi
finish
