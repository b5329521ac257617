#!/usr/bin/env bash
# CI smoke of the benchmark harness: the same harness as tests/bench/bench with tiny counts
# (under 3 minutes). It claims no figures; it checks that the report is complete and
# well-formed (every figure carries limited_by, offered headroom, completion and a reference,
# a generator-limited figure is a floor, the machine is described) and that the check itself
# refuses reports that are not, and that an interrupted run removes what it created. Prints
# "N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d /tmp/kbng-bench-smoke.XXXXXX)
# This run's namespace prefix: the harness names its namespaces <tag>k-* and <tag>b-*.
tag=kbs$$
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
bad() { failed=$((failed + 1)); echo "not ok - $1${2:+: $2}"; }

for tool in perfdhcp kea-dhcp4 dpdk-testpmd jq ip ethtool; do
    command -v "$tool" >/dev/null || { bad "tool $tool installed" "see tests/bench/PACKAGES"; }
done

# The checker refuses incomplete reports (so a pass below means something).
if /usr/bin/python3 "$here/check_selftest.py"; then ok "report check refuses incomplete figures"; else bad "report check refuses incomplete figures"; fi

# --no-build with nothing built: the run fails and its report names what is missing (it once
# skipped every benchmark and said only "no figures").
empty_target=$(mktemp -d /tmp/kbng-bench-notarget.XXXXXX)
CARGO_TARGET_DIR=$empty_target timeout 60 /usr/bin/python3 "$here/bench.py" --smoke --only restore \
    --no-build --tag "${tag}n" --out "$out/nobuild" >"$out/nobuild.log" 2>&1
rc=$?
if [[ $rc != 0 ]] && jq -e 'any(.errors[]; test("kbng-dataplane and kbng-control not built"))' \
    "$out/nobuild/smoke.json" >/dev/null 2>&1; then ok "--no-build without binaries: an error names them"; else
    bad "--no-build without binaries: an error names them" "exit $rc; $(tail -3 "$out/nobuild.log")"; fi
rm -rf "$empty_target"

timeout 600 /usr/bin/python3 "$here/bench.py" --smoke --tag "$tag" --out "$out" "$@" >"$out/log" 2>&1
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
        "Kea 2.2: DORA rate at 10x its zero-drop rate" "kbng: DORA rate at 10x its zero-drop rate" \
        "Kea 2.2: DORAs per CPU-second of the server, at its zero-drop rate" \
        "kbng: DORAs per CPU-second of the server, at its zero-drop rate"; do
        if jq -e --arg f "$f" 'any(.figures[]; .figure == $f)' "$json" >/dev/null; then ok "dhcp figure: $f"; else bad "dhcp figure: $f"; fi
    done
    if [[ -s $out/smoke.md ]] && grep -q '| bench | figure |' "$out/smoke.md"; then ok "markdown table written"; else bad "markdown table written"; fi
else
    bad "smoke JSON written"
fi
# Leftovers: this run's namespaces, enumerated by its own tag (other runs may hold theirs).
own_ns() { ip netns list | awk '{print $1}' | grep -E "^$1[kb]-"; }
left=$(own_ns "$tag")
if [[ -z $left ]]; then ok "no namespaces left behind"; else bad "no namespaces left behind" "$left"; fi

# Interrupted in the middle of the DHCP benchmark (Kea running in its namespaces), the harness
# removes its namespaces, its processes and its scratch folder: once per signal.
for sig in TERM INT; do
    t=$tag${sig:0:1}
    t=${t,,}
    log=$out/interrupted-$sig.log
    /usr/bin/python3 "$here/bench.py" --smoke --only dhcp --no-build --tag "$t" --out "$out/i$sig" >"$log" 2>&1 &
    pid=$!
    # Kea running in the run's namespace: its command line names the run's scratch folder.
    kea_up() {
        scratch=$(sed -n 's/.*; scratch \(.*\)$/\1/p' "$log" | head -1)
        [[ -n $scratch ]] && own_ns "$t" | grep -q -- "-kea$" && pgrep -f -- "$scratch/kea.json" >/dev/null
    }
    for _ in $(seq 1 300); do
        kea_up && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    if ! kea_up; then
        bad "SIG$sig mid-run: the run got as far as Kea running" "$(tail -3 "$log")"
        kill -9 "$pid" 2>/dev/null
        continue
    fi
    kill -"$sig" "$pid"
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        bad "SIG$sig mid-run: the harness exits" "still running after 30 s"
        kill -9 "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
    # Enumerated: namespaces by the tag, processes by the scratch path on their command line.
    left="$(own_ns "$t") $([[ -n $scratch ]] && pgrep -a -f -- "$scratch/")"
    [[ -n $scratch && -e $scratch ]] && left+=" $scratch"
    if [[ -n $scratch && -z ${left// /} ]]; then ok "SIG$sig mid-run: nothing left behind"; else
        bad "SIG$sig mid-run: nothing left behind" "scratch '$scratch', left: $left"; fi
done
echo "$passed passed, $failed failed"
((failed == 0)) && rm -rf "$out"
((failed == 0))
