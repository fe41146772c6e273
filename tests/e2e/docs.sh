#!/usr/bin/env bash
# The configuration docs against the code (scripts/docs-check): every NCCLGUARD_*
# name, every setting's default and range, and every stated limit. The checker is
# proved on copies of the tree with one planted mistake each.
source "$(dirname "$0")/lib.sh"
CHECKER=$ROOT/scripts/docs-check

if out=$("$CHECKER" 2>&1); then
    pass "README.md and docs/ agree with settings.def and the limits in the code"
else
    fail "docs against the code" "$out"
fi

# plant NAME EXPECTED_TEXT: a copy of the docs, shim/ and cli/ with the edit in $edit
plant() { planted "$1" "$2" "$CHECKER" shim cli docs README.md; }

edit='sed -i "s/at most 256/at most 512/" docs/configuration.md'
plant wrong-limit "says 'at most 512 distinct variables' where NG_ENV_RULES_MAX is 256"
edit='sed -i "s/^#define NG_CONF_WHEN_MAX 64 /#define NG_CONF_WHEN_MAX 65 /" shim/policy/config.h'
plant limit-changed-in-code 'where NG_CONF_WHEN_MAX is 65'
edit='sed -i "s/a line past line 5000, //" docs/configuration.md'
plant limit-not-stated 'the limit NG_CONF_MAX_LINES (5000) is no longer stated'
edit='echo "Set NCCLGUARD_FROBNICATE=1 to go faster." >>README.md'
plant unknown-variable 'README.md: NCCLGUARD_FROBNICATE is neither a setting'
edit='echo "NG_SETTING(SPIN_US, spin_us, INT, \"5\", 0, 100, \"\")" >>shim/policy/settings.def'
plant undocumented-setting 'setting spin_us has no row in a table'
edit='sed -i "s/RING, ring, INT, \"4096\", 16,/RING, ring, INT, \"4096\", 32,/" \
    shim/policy/settings.def'
plant range-changed 'ring is an integer 32–16777216 in settings.def'
edit='sed -i "s/POLL_MS, poll_ms, INT, \"100\"/POLL_MS, poll_ms, INT, \"250\"/" \
    shim/policy/settings.def'
plant default-changed 'poll_ms defaults to 250 in settings.def'
edit='sed -i "s/\"off|node|all\"/\"off|node|all|rack\"/" shim/policy/settings.def'
plant choice-added 'audit takes off|node|all|rack in settings.def'
edit='echo "Then run \`ncclguard frobnicate dumps/\` to name the culprit." >>docs/harness.md'
plant command-not-there '`ncclguard frobnicate` is not a command of cli/cmd/main.c'
finish
