#!/usr/bin/env bash
# How scripts/mutate finds a mutation's text: whitespace does not count (a
# reformatted file keeps its mutations), and the text must be found exactly once.
# The matching rules on small texts (--self-test), then --list on a copy of the
# runner with a file of its own, and on the project's own mutations.
source "$(dirname "$0")/lib.sh"

if out=$(python3 "$ROOT/scripts/mutate" --self-test 2>&1) && grep -q '^OK$' <<<"$out"; then
    pass "mutate --self-test: $(grep '^Ran ' <<<"$out")"
else
    fail "mutate --self-test" "$(tail -n 20 <<<"$out")"
fi

tree=$TMP/tree
mkdir -p "$tree/scripts" "$tree/src"
cp "$ROOT/scripts/mutate" "$tree/scripts/"
# src/a.c as clang-format might leave it: one call broken over two lines, tabs
code='int f(int a, int b)\n{\n\tint n = 0;\n\tif (a > 0 &&\n\t    b > 0)\n\t\tn++;\n\tn++;\n\treturn n;\n}\n'
printf "$code" >"$tree/src/a.c"
cat >"$tree/m.mut" <<'MUT'
[across-a-line-break]
file = src/a.c
tests = none
-     if (a > 0 && b > 0)
+     if (a > 0 || b > 0)

[found-twice]
file = src/a.c
tests = none
-     n++;
+     n--;

[not-there]
file = src/a.c
tests = none
-     return n + 1;
+     return n;

[no-such-file]
file = src/b.c
tests = none
-     n++;
+     n--;

[said-equivalent]
file = src/a.c
tests = none
equivalent = stands for any mutation marked so
-     return n;
+     return (n);
MUT
list=$(cd "$tree" && B=build python3 scripts/mutate --list m.mut 2>&1)
state() { awk -v n="$1" '$1 == n {print $2}' <<<"$list"; }
for want in across-a-line-break:applies found-twice:STALE not-there:STALE no-such-file:STALE \
            said-equivalent:equivalent; do
    name=${want%%:*} expect=${want#*:}
    got=$(state "$name")
    if [ "$got" = "$expect" ]; then pass "mutate --list: $name is $expect"
    else fail "mutate --list: $name is $expect" "got '${got:-nothing}'; $list"; fi
done
if cmp -s "$tree/src/a.c" <(printf "$code"); then
    pass "mutate --list leaves the file alone"
else
    fail "mutate --list leaves the file alone" "src/a.c changed"
fi
# The project's own mutations: each still finds its text in the code, exactly once (code
# that moves leaves a mutation STALE, which a mutation run then skips unseen)
all=$(cd "$ROOT" && python3 scripts/mutate --list 2>&1)
stale=$(awk '$2 != "applies" && $2 != "equivalent" {print $1 " (" $2 ")"}' <<<"$all")
if [ -n "$all" ] && [ -z "$stale" ]; then
    pass "every mutation of tests/mutations applies ($(grep -c ' applies ' <<<"$all") of them)"
else
    fail "mutations that no longer apply" "$(head -n 5 <<<"$stale")"
fi
finish
