#!/usr/bin/env bash
# CI smoke of the benchmark harness: the same harness as tests/bench/bench with tiny counts
# (under 3 minutes). It claims no figures; it checks that the report is complete and
# well-formed (every figure carries limited_by, offered headroom, completion and a reference,
# a generator-limited figure is a floor, the machine is described) and that the check itself
# refuses reports that are not. Prints "N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d /tmp/kbng-bench-smoke.XXXXXX)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
bad() { failed=$((failed + 1)); echo "not ok - $1${2:+: $2}"; }

for tool in perfdhcp kea-dhcp4 dpdk-testpmd jq ip ethtool; do
    command -v "$tool" >/dev/null || { bad "tool $tool installed" "see tests/bench/PACKAGES"; }
done

# The checker refuses incomplete reports (so a pass below means something).
if /usr/bin/python3 "$here/check_selftest.py"; then ok "report check refuses incomplete figures"; else bad "report check refuses incomplete figures"; fi

timeout 600 /usr/bin/python3 "$here/bench.py" --smoke --out "$out" "$@" >"$out/log" 2>&1
rc=$?
if [[ $rc == 0 ]]; then ok "smoke report complete and well-formed"; else
    bad "smoke report complete and well-formed" "exit $rc"; grep -E "report problem|error" "$out/log" | head -20; tail -5 "$out/log"; fi
json=$out/smoke.json
if [[ -s $json ]]; then
    for b in dataplane program_rate restore dhcp; do
        n=$(jq --arg b "$b" '[.figures[] | select(.bench == $b)] | length' "$json")
        if ((n > 0)); then ok "$b: $n figures"; else bad "$b: figures present" "none"; fi
    done
    for f in "Kea 2.2: zero-drop DORA rate" "kbng: zero-drop DORA rate" \
        "Kea 2.2: DORA rate at 10x its zero-drop rate" "kbng: DORA rate at 10x its zero-drop rate"; do
        if jq -e --arg f "$f" 'any(.figures[]; .figure == $f)' "$json" >/dev/null; then ok "dhcp figure: $f"; else bad "dhcp figure: $f"; fi
    done
    if [[ -s $out/smoke.md ]] && grep -q '| bench | figure |' "$out/smoke.md"; then ok "markdown table written"; else bad "markdown table written"; fi
else
    bad "smoke JSON written"
fi
# Leftovers: namespaces of this run (enumerated, by the harness's tag prefix).
left=$(ip netns list | awk '{print $1}' | grep -E '^kbn[0-9]+[kb]-' || true)
if [[ -z $left ]]; then ok "no namespaces left behind"; else bad "no namespaces left behind" "$left"; fi
echo "$passed passed, $failed failed"
((failed == 0)) && rm -rf "$out"
((failed == 0))
