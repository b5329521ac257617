# Network namespaces and the processes in them, shared by the control, relay and radius suites
# and lab/demo.sh (sourced, not run).
# The caller sets $tag; every namespace is named "$tag-<role>" so cleanup can find them all:
#
#   ns cN (clients) ⇄ ns hub (bridge br0) s0 ⇄ d0 ns dut (kbng-dataplane) d1 ⇄ c0 ns core
#
# The core namespace holds 192.0.2.1/24 and routes the subscriber range via 192.0.2.254, the
# dataplane's uplink address, which it resolves by ARP like any router would (no static
# neighbour): start the dataplane with --uplink-address 192.0.2.254/24 --next-hop 192.0.2.1.

ns() { echo "$tag-$1"; }
inns() { local n=$1; shift; ip netns exec "$(ns "$n")" "$@"; }

# Builds hub, dut and core; sets d1_mac (dataplane uplink) and c0_mac (core side).
topology_up() {
    local n x
    for n in hub dut core; do
        ip netns add "$(ns $n)"
        inns $n ip link set lo up
        inns $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    done
    ip link add s0 netns "$(ns hub)" type veth peer name d0 netns "$(ns dut)"
    ip link add d1 netns "$(ns dut)" type veth peer name c0 netns "$(ns core)"
    inns hub ip link add br0 type bridge forward_delay 0
    inns hub ip link set s0 master br0
    for x in "hub s0" "hub br0" "dut d0" "dut d1" "core c0"; do
        # shellcheck disable=SC2086 # split "ns link" on purpose
        set -- $x
        inns "$1" ip link set "$2" up
    done
    # Checksums are left to offload on veth otherwise, and arrive wrong through af_packet.
    inns hub ethtool -K s0 tx off >/dev/null
    inns core ethtool -K c0 tx off >/dev/null
    d1_mac=$(inns dut cat /sys/class/net/d1/address)
    c0_mac=$(inns core cat /sys/class/net/c0/address)
    inns core ip addr add 192.0.2.1/24 dev c0
    inns core ip route add 100.64.0.0/10 via 192.0.2.254
}

# A client namespace with its own MAC behind the hub's bridge: client NAME MAC
client() {
    local n=$1 mac=$2
    # `ip netns exec` bind-mounts /etc/netns/<ns>/* over /etc: DHCP clients' hooks then write
    # this namespace's resolv.conf instead of the host's.
    mkdir -p "/etc/netns/$(ns "$n")"
    : >"/etc/netns/$(ns "$n")/resolv.conf"
    ip netns add "$(ns "$n")"
    inns "$n" ip link set lo up
    inns "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip link add e0 netns "$(ns "$n")" address "$mac" type veth peer name "p$n" netns "$(ns hub)"
    inns hub ip link set "p$n" master br0
    inns hub ip link set "p$n" up
    inns "$n" ip link set e0 up
    inns "$n" ethtool -K e0 tx off >/dev/null
}

# Serves the folder $1 over HTTP at 192.0.2.1:8080 in the core namespace: the uplink server the
# subscribers reach. Sets www_pid; fails when it does not answer within 10 s.
core_www_start() {
    local i
    ip netns exec "$(ns core)" /usr/bin/python3 -m http.server 8080 --bind 192.0.2.1 \
        --directory "$1" >/dev/null 2>&1 &
    www_pid=$!
    for i in $(seq 1 50); do
        inns core curl -sf -o /dev/null -m 1 http://192.0.2.1:8080/ && return 0
        sleep 0.2
    done
    return 1
}

# Starts kbng-dataplane in the dut namespace: access d0, uplink d1, no hugepages, gRPC on a unix
# socket. dataplane_start BIN SOCKET LOG [more flags]. Sets dp_pid. DP_SESSIONS sets its session
# capacity (default 4096).
dataplane_start() {
    local bin=$1 sock=$2 log=$3
    shift 3
    ip netns exec "$(ns dut)" "$bin" --cores 0,1 \
        --access net_af_packet0,iface=d0 --uplink net_af_packet1,iface=d1 \
        --no-huge --no-pci -m 512 --no-shconf --uplink-address 192.0.2.254/24 --next-hop 192.0.2.1 \
        --sessions "${DP_SESSIONS:-4096}" --plans 16 --grpc-listen "unix:$sock" "$@" >"$log" 2>&1 &
    dp_pid=$!
}

# SIGTERM to process $1, SIGKILL if it still runs $2 seconds later (default 5); reaped quietly.
stop_pid() {
    local pid=$1 i
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < ${2:-5} * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
}

dataplane_stop() {
    stop_pid "${dp_pid:-}"
    dp_pid=
}

# Waits (30 s at most) until the control API at $1 (host:port) reports a connected dataplane;
# a second argument names the namespace to ask from (default: this one).
control_wait_connected() {
    local i get=(curl -sf -m 1 "http://$1/v1/dataplanes")
    [[ -n ${2:-} ]] && get=(inns "$2" "${get[@]}")
    for i in $(seq 1 150); do
        "${get[@]}" 2>/dev/null | grep -q '"connected":true' && return 0
        sleep 0.2
    done
    return 1
}

# Removes every namespace of $tag after killing what runs in it.
topology_down() {
    local n p
    for n in $(ip netns list | awk '{print $1}' | grep "^$tag-"); do
        for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ip netns del "$n" 2>/dev/null
        rm -rf "/etc/netns/$n"
    done
}
