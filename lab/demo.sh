#!/usr/bin/env bash
# The lab: a whole kbng on this machine, with no cluster. Called by lab/run with the folder of
# the release binaries. Builds this topology in network namespaces of its own:
#
#   ns <tag>-cN (dhclient, dhcpcd, udhcpc, scapy)  ⇄  ns <tag>-hub (bridge) ⇄ d0 ┐
#                               ns <tag>-dut: kbng-dataplane (DPDK, net_af_packet) ┤
#                                                   ns <tag>-core (uplink, web) ⇄ d1 ┘
#   kbng-control in the host namespace: DHCP over the punt stream, API on 127.0.0.1
#
# then onboards a demo set of subscribers (known ones on two plans, untagged, 802.1Q and QinQ,
# and an unknown one that lands in the walled garden), runs some traffic, prints a live summary
# through kbngctl, drains the sessions at the end, and removes everything it created on exit or
# Ctrl-C. KBNG_LAB_SECONDS bounds the summary (default 600), so the lab also runs unattended. The
# cap comes from the signed lab licence, verified by kbng-control itself.
#
# Both binaries serve Prometheus /metrics (--metrics-listen); the dataplane's, inside its
# namespace, is relayed to a loopback port here by socat. OTLP export is on only when
# OTEL_EXPORTER_OTLP_ENDPOINT is set (an http:// endpoint is relayed into the dataplane's
# namespace the same way); otherwise the lab turns it off with OTEL_SDK_DISABLED.
set -uo pipefail
bin=${1:?usage: lab/demo.sh <folder of release binaries>}
root=$(cd "$(dirname "$0")/.." && pwd)
helpers=$root/tests/control
tag=kl$$
tmp=$(mktemp -d /tmp/kbng-lab.XXXXXX)
sock=$tmp/dp.sock
# kbngctl's default server; another address only when that port is taken.
api=127.0.0.1:7180
port_taken() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
if port_taken 7180; then api=127.0.0.1:$((30000 + $$ % 20000)); fi
# /metrics of the control, and the dataplane's relayed from its namespace: 7181 and 7182 unless
# taken.
ctl_metrics=7181 dp_metrics=7182
if port_taken $ctl_metrics || port_taken $dp_metrics; then
    ctl_metrics=$((30001 + $$ % 20000)) dp_metrics=$((30002 + $$ % 20000))
fi
seconds=${KBNG_LAB_SECONDS:-600}
pids=()
dp_pid=
ctl_pid=

say() { printf '\033[1m[%s] %s\033[0m\n' "$(date +%T)" "$*"; }
kbngctl() { "$bin/kbngctl" --server "$api" "$@"; }
# shellcheck source=../tests/lib/netns.sh
source "$root/tests/lib/netns.sh"

cleanup() {
    set +e
    trap - EXIT INT TERM
    say "cleaning up"
    stop_pid "$ctl_pid"
    dataplane_stop
    # socat relays fork a child per connection, which may exec another: whole trees go.
    for p in "${pids[@]}"; do kill_tree "$p"; done
    topology_down
    rm -rf "$tmp"
    leftovers || exit 1
}
kill_tree() {
    local c
    for c in $(pgrep -P "$1"); do kill_tree "$c"; done
    kill "$1" 2>/dev/null
}
# What is left after cleanup, enumerated: this run's namespaces, the lab's own children, and
# processes naming this run's folder or namespaces on their command line.
leftovers() {
    local left list p
    list=$(mktemp /tmp/kbng-lab-left.XXXXXX)
    sleep 0.5 # a killed process leaves the process table when its parent has reaped it
    # Run directly (not in a $(...) subshell, which would itself be a child of the lab).
    pgrep -P $$ >"$list"
    pgrep -f -- "$tmp/" >>"$list"
    pgrep -f -- "$tag-" >>"$list"
    left=$(ip netns list | awk '{print $1}' | grep "^$tag-")
    while read -r p; do left+=" $(ps -o pid=,args= -p "$p")"; done < <(sort -u "$list")
    rm -f "$list"
    if [[ -n ${left//[[:space:]]/} ]]; then
        say "left behind: $left"
        return 1
    fi
    say "removed namespaces $tag-*, processes and $tmp: nothing left"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

licence=$root/deploy/samples/licence.yaml
licence_key=$root/deploy/samples/lab-licence-public.key
say "lab licence: kbngctl licence verify (offline, with the lab public key)"
"$bin/kbngctl" licence verify --public-key "$(cat "$licence_key")" "$licence" || exit 1

say "network namespaces: access hub, dataplane, uplink"
topology_up
mkdir -p "$tmp/www" && echo "hello from the uplink" >"$tmp/www/index.html"
head -c 4000000 /dev/zero >"$tmp/www/big"
core_www_start "$tmp/www" || { say "the uplink web server did not start"; exit 1; }
pids+=("$www_pid")

# relay PORT NS HOST:PORT: a socat listening on 127.0.0.1:PORT in namespace NS ("" for this
# one) that connects each client to HOST:PORT from this namespace ("" for this one) or NS.
relay() {
    local listen=(socat "TCP-LISTEN:$1,bind=127.0.0.1,reuseaddr,fork") to="TCP\:${3//:/\\:}"
    if [[ -n $2 ]]; then
        # Inside NS, each connection is made from the lab's own namespace.
        ip netns exec "$(ns "$2")" "${listen[@]}" \
            "EXEC:nsenter --net=/proc/$$/ns/net socat STDIO $to" >>"$tmp/relay.log" 2>&1 &
    else
        "${listen[@]}" "EXEC:ip netns exec $(ns dut) socat STDIO $to" >>"$tmp/relay.log" 2>&1 &
    fi
    pids+=($!)
}

dp_otlp=${OTEL_EXPORTER_OTLP_ENDPOINT:-}
if [[ -n ${OTEL_EXPORTER_OTLP_ENDPOINT:-} ]]; then
    say "OpenTelemetry: exporting OTLP/gRPC to $OTEL_EXPORTER_OTLP_ENDPOINT"
    if [[ $OTEL_EXPORTER_OTLP_ENDPOINT =~ ^http://([^/]+:[0-9]+)/?$ ]]; then
        # The dataplane's namespace has no route out: its export goes through a relay.
        relay 4317 dut "${BASH_REMATCH[1]}"
        dp_otlp=http://127.0.0.1:4317
    else
        echo "    only an http://HOST:PORT endpoint is relayed into the dataplane's namespace;"
        echo "    the dataplane's export will not reach $OTEL_EXPORTER_OTLP_ENDPOINT"
    fi
else
    # Off unless asked for, whatever other OTEL_* variables the shell carries.
    export OTEL_SDK_DISABLED=true
    say "OpenTelemetry export off (set OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:4317 to turn it on)"
fi

say "kbng-dataplane: DPDK on net_af_packet (access d0, uplink d1), no hugepages"
OTEL_EXPORTER_OTLP_ENDPOINT=$dp_otlp dataplane_start "$bin/kbng-dataplane" "$sock" "$tmp/dataplane.log" \
    --metrics-listen 127.0.0.1:9464
relay "$dp_metrics" "" 127.0.0.1:9464

say "kbng-control: two plans, local subscribers, walled garden, the signed licence"
cat >"$tmp/subscribers.csv" <<CSV
mac,circuit_id,remote_id,plan
02:00:00:00:01:01,,,gold,100.64.0.250,
02:00:00:00:01:02,,,silver
0a:cc:00:00:00:00,,,silver
0a:cc:00:00:00:01,,,silver
0a:dd:00:00:00:00,,,gold
0a:dd:00:00:00:01,,,silver
CSV
cat >"$tmp/control.yaml" <<YAML
dataplanes: ["unix:$sock"]
pools:
  - {name: residential, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53], exclusions: [100.64.0.248/29]}
plans:
  - {name: gold, id: 10, rateBps: 100000000}
  - {name: silver, id: 20, rateBps: 20000000}
defaultPlan: silver
unknownSubscribers: captive
subscribersFile: $tmp/subscribers.csv
licence: {file: $licence, publicKeyFile: $licence_key}
store: $tmp/sessions.redb
apiListen: "$api"
walledGarden: {portalUrl: "http://portal.kbng.test/signup", allowed: [{prefix: 192.0.2.53/32}]}
YAML
"$bin/kbng-control" --config "$tmp/control.yaml" --log warn \
    --metrics-listen "127.0.0.1:$ctl_metrics" >"$tmp/control.log" 2>&1 &
ctl_pid=$!
if ! control_wait_connected "$api"; then
    say "control did not connect to the dataplane"; tail -5 "$tmp/control.log" "$tmp/dataplane.log"; exit 1
fi

say "Prometheus /metrics: control http://127.0.0.1:$ctl_metrics/metrics, dataplane http://127.0.0.1:$dp_metrics/metrics"
for who in control dataplane; do
    [[ $who == control ]] && port=$ctl_metrics || port=$dp_metrics
    if curl -sf -m 3 "http://127.0.0.1:$port/metrics" >"$tmp/metrics-$who.txt"; then
        echo "    $who: $(grep -vc '^#' "$tmp/metrics-$who.txt") samples"
    else
        echo "    $who: /metrics does not answer (see $tmp/$who.log)"
    fi
done

say "the control's licence: kbngctl licence status"
kbngctl licence status | sed 's/^/    /'
say "registering subscriber c3 (gold) live: kbngctl subscribers add"
kbngctl subscribers add --mac 02:00:00:00:01:03 --plan gold | sed 's/^/    /' || exit 1

addr_of() { inns "$1" ip -4 -o addr show dev e0 | awk '{print $4}' | head -1; }
mkdir -p "$tmp/etc" && touch "$tmp/etc/resolv.conf"

say "subscriber c1 (gold, fixed address 100.64.0.250 in its record): dhclient"
client c1 02:00:00:00:01:01
inns c1 unshare -m sh -c "mount --bind $tmp/etc/resolv.conf /etc/resolv.conf &&
    timeout 30 dhclient -4 -1 -pf $tmp/dhclient.pid -lf $tmp/dhclient.leases e0" >>"$tmp/clients.log" 2>&1
echo "    leased $(addr_of c1)"
say "subscriber c2 (silver): dhcpcd"
client c2 02:00:00:00:01:02
inns c2 timeout 30 dhcpcd -4 -1 -B -c /bin/true e0 >>"$tmp/clients.log" 2>&1
echo "    leased $(addr_of c2)"
say "subscriber c3 (gold): udhcpc"
client c3 02:00:00:00:01:03
inns c3 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
echo "    leased $(addr_of c3)"
say "subscribers behind 802.1Q VLAN 100 (silver): scapy DHCP clients"
client t1 0a:cc:00:00:ff:ff
inns t1 ip link set e0 promisc on
inns t1 /usr/bin/python3 "$helpers/dhcp.py" dora e0 0a:cc:00:00 2 100 2>>"$tmp/clients.log" | sed 's/^/    leased /'
say "subscribers behind QinQ S-VLAN 200 / C-VLAN 10 (gold, silver): scapy DHCP clients"
client q1 0a:dd:00:00:ff:ff
inns q1 ip link set e0 promisc on
inns q1 /usr/bin/python3 "$root/lab/qinq.py" "$helpers" e0 0a:dd:00:00 2 200 10 2>>"$tmp/clients.log" | sed 's/^/    leased /'
say "unknown subscriber c4: udhcpc, admitted to the walled garden"
client c4 02:00:00:00:0f:04
inns c4 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
echo "    leased $(addr_of c4)"

say "traffic: known subscribers fetch a page from the uplink; the captive one is redirected"
for c in c1 c2 c3; do
    printf '    %s: %s\n' "$c" "$(inns "$c" curl -s -m 3 http://192.0.2.1:8080/ 2>&1 || echo unreachable)"
done
printf '    c4: %s\n' "$(inns c4 curl -s -i -m 3 http://198.51.100.7/ 2>&1 | tr -d '\r' | grep -E '^(HTTP|Location)' | tr '\n' ' ')"

say "background traffic: c1 (gold, 100 Mb/s) and c2 (silver, 20 Mb/s) download from the uplink"
for c in c1 c2; do
    inns "$c" sh -c "end=\$((\$(date +%s) + $seconds + 30)); while [ \$(date +%s) -lt \$end ]; do
        curl -s -o /dev/null -m 10 http://192.0.2.1:8080/big; done" >/dev/null 2>&1 &
    pids+=($!)
done

summary() {
    kbngctl status | sed 's/^/    /'
    kbngctl plans --measure 2 | sed 's/^/    /'
}

[[ $api == 127.0.0.1:7180 ]] && env_hint="" || env_hint="KBNG_SERVER=$api "
cat <<TRY

  kbngctl talks to this BNG (binaries in $bin); try, in another terminal:
    ${env_hint}$bin/kbngctl sessions list
    ${env_hint}$bin/kbngctl sessions show <id>        # one session and its counters
    ${env_hint}$bin/kbngctl sessions watch            # changes as they happen (Ctrl-C ends)
    ${env_hint}$bin/kbngctl plans --measure 2         # plans, sessions, traffic now
    ${env_hint}$bin/kbngctl status                    # licence, dataplane cores/ports, drops
    ${env_hint}$bin/kbngctl licence status
    ${env_hint}$bin/kbngctl subscribers add --mac 02:00:00:00:0f:04 --plan silver
    ${env_hint}$bin/kbngctl sessions drain
  The operator API itself: curl -s http://$api/v1/status (cnf-control/API.md)

TRY
say "live summary every 5 s for up to ${seconds} s (Ctrl-C ends the lab and cleans up)"
end=$((SECONDS + seconds))
while ((SECONDS < end)); do
    say "summary"
    summary
    sleep 5
done
say "end of the lab: kbngctl sessions drain"
kbngctl sessions drain --timeout 20 | sed 's/^/    /'
