#!/usr/bin/env bash
# Start a real Kubernetes control plane on loopback for the test suites:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (the
# fake kubelet for Nodes carrying the annotation kwok.x-k8s.io/node=fake).
#
# Writes ${KBNG_CLUSTER_DIR:-/tmp/kbng-cluster}/:
#   env                 source it: KUBECONFIG, PATH (kubectl, helm), API URL
#   kubeconfig          admin (group system:masters), certs embedded
#   pids                "name pid binary" per process; down.sh stops exactly these
#   logs/<name>.log     one per process
#   pki/ etcd/ ...      certificates, data
# Builds the binaries first if the cache lacks them (see build.sh).
# Needs no stdin and no network beyond loopback. Stop with down.sh.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE=$KBNG_CLUSTER_DIR
PKI=$STATE/pki
# Long enough for a cold apiserver start on a busy 2-core machine.
START_TIMEOUT=${KBNG_START_TIMEOUT:-120}
SERVICE_CIDR=10.0.0.0/24
# Pod IPs kwok writes into pod status. Nothing routes to them and nothing in
# this harness connects to them; they only have to be valid, non-loopback IPs.
POD_CIDR=10.244.0.0/16

# --- ports ---------------------------------------------------------------

declare -a TAKEN=()
# free_port: a TCP port nobody listens on and not yet TAKEN by this script,
# below the ephemeral range so outgoing connections cannot grab it between
# now and our bind. Runs in $(...), so the caller records it in TAKEN.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    [[ " ${TAKEN[*]-} " == *" $p "* ]] && continue
    [[ -z $(ss -Htln "sport = :$p") ]] || continue
    echo "$p"
    return
  done
}

pick_ports() {
  ETCD_PORT=$(free_port); TAKEN+=("$ETCD_PORT")
  ETCD_PEER_PORT=$(free_port); TAKEN+=("$ETCD_PEER_PORT")
  API_PORT=$(free_port); TAKEN+=("$API_PORT")
  KCM_PORT=$(free_port); TAKEN+=("$KCM_PORT")
  SCHED_PORT=$(free_port); TAKEN+=("$SCHED_PORT")
  KWOK_PORT=$(free_port); TAKEN+=("$KWOK_PORT")
}

# --- certificates ----------------------------------------------------------

write_openssl_cnf() {
  cat >"$PKI/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
[dn]
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1, DNS:localhost, IP:10.0.0.1, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
}

ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# new_ca NAME CN: a self-signed CA certificate and key.
new_ca() {
  ec_key "$PKI/$1.key"
  openssl req -x509 -new -key "$PKI/$1.key" -subj "/CN=$2" -days 30 \
    -config "$PKI/openssl.cnf" -extensions ca_ext -out "$PKI/$1.crt"
}

# leaf NAME SUBJECT EXT [CA]: a key and a certificate signed by CA (default:
# the cluster CA).
leaf() {
  local name=$1 subj=$2 ext=$3 ca=${4:-ca}
  ec_key "$PKI/$name.key"
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -config "$PKI/openssl.cnf" |
    openssl x509 -req -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" \
      -set_serial "0x$(openssl rand -hex 16)" -days 30 \
      -extfile "$PKI/openssl.cnf" -extensions "$ext" -out "$PKI/$name.crt" 2>/dev/null
}

# A real CA and leaves signed by it: rustls (kube-rs) refuses a self-signed
# leaf that doubles as its own CA, so the tests must see a proper chain.
make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  write_openssl_cnf
  new_ca ca kbng-test-ca
  leaf apiserver "/CN=kube-apiserver" server_ext
  # Client identities as kubeadm gives them, so the bootstrap RBAC roles apply.
  leaf admin "/O=system:masters/CN=kbng-admin" client_ext
  leaf controller-manager "/CN=system:kube-controller-manager" client_ext
  leaf scheduler "/CN=system:kube-scheduler" client_ext
  # kwok plays every kubelet at once; no node identity fits, so it is admin.
  leaf kwok "/O=system:masters/CN=kwok" client_ext
  # Front proxy (aggregation layer) identity, from its own CA as kubeadm
  # does: without a request-header CA the controller-manager and scheduler
  # log an error for it every few seconds.
  new_ca front-proxy-ca kbng-front-proxy-ca
  leaf front-proxy-client "/CN=front-proxy-client" client_ext front-proxy-ca
  # Service-account token signing key pair.
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
}

# kubeconfig FILE USER: a self-contained kubeconfig (certificates embedded, so
# it can be copied anywhere) for a client certificate in pki/.
kubeconfig() {
  local file=$1 user=$2
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kbng
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$user.crt")
    client-key-data: $(base64 -w0 "$PKI/$user.key")
contexts:
- name: kbng
  context:
    cluster: kbng
    user: $user
    namespace: default
current-context: kbng
EOF
  chmod 600 "$file"
}

# --- processes ---------------------------------------------------------------

# start NAME BINARY ARGS...: run in its own session (so a Ctrl-C or a job
# kill aimed at the caller does not take it down half-way), stdin closed,
# output to logs/NAME.log, and record its pid for down.sh.
start() {
  local name=$1 exe pid i
  exe=$(readlink -f "$2"); shift 2
  setsid "$exe" "$@" </dev/null >"$STATE/logs/$name.log" 2>&1 &
  pid=$!
  echo "$name $pid $exe" >>"$STATE/pids"
  # setsid execs in place (we are not a process-group leader), so the pid is
  # the binary's own; down.sh relies on that. Confirm it before going on.
  for ((i = 0; i < 50; i++)); do
    [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$exe" ]] && break
    sleep 0.1
  done
  [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$exe" ]] ||
    die "$name: pid $pid is not $exe (exited at once? log: $STATE/logs/$name.log)"
  log "started $name (pid $pid)"
}

# wait_until NAME CMD...: poll CMD until it succeeds; fail early if the
# process NAME died, pointing at its log.
wait_until() {
  local name=$1; shift
  local deadline=$((SECONDS + START_TIMEOUT)) pid
  pid=$(awk -v n="$name" '$1 == n { print $2 }' "$STATE/pids")
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$STATE/logs/$name.log" >&2 || true
      die "$name exited during start-up (log: $STATE/logs/$name.log)"
    fi
    ((SECONDS < deadline)) || die "$name not ready after ${START_TIMEOUT}s (log: $STATE/logs/$name.log)"
    sleep 0.5
  done
  log "$name ready"
}

# https_ok URL [CURL ARGS...]: URL answers 200 with body "ok".
https_ok() {
  local url=$1; shift
  [[ $(curl -sS --max-time 5 "$@" "$url") == ok ]]
}
api_ok() {
  https_ok "https://127.0.0.1:$API_PORT$1" --cacert "$PKI/ca.crt" \
    --cert "$PKI/admin.crt" --key "$PKI/admin.key"
}

start_etcd() {
  local client="http://127.0.0.1:$ETCD_PORT" peer="http://127.0.0.1:$ETCD_PEER_PORT"
  # Plain HTTP on loopback, as envtest does. --unsafe-no-fsync: the data is
  # thrown away anyway, and fsync on a shared disk makes the apiserver slow.
  start etcd "$BIN/etcd" --name=kbng --data-dir="$STATE/etcd" \
    --listen-client-urls="$client" --advertise-client-urls="$client" \
    --listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
    --initial-cluster="kbng=$peer" \
    --unsafe-no-fsync=true --log-level=warn
  wait_until etcd etcd_ok
}

etcd_ok() { [[ $(curl -sS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health") == *'"true"'* ]]; }

# --endpoint-reconciler-type=none: the default reconciler publishes the
# advertise address (127.0.0.1) as the endpoint of the "kubernetes" Service,
# which Endpoints validation refuses for loopback, so it logs an error every
# 10 s. No pod here ever dials that Service, so publish nothing.
start_apiserver() {
  start kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --cert-dir="$STATE/kube-apiserver" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --allow-privileged=true --profiling=false \
    --endpoint-reconciler-type=none \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
    --proxy-client-key-file="$PKI/front-proxy-client.key"
  wait_until kube-apiserver api_ok /readyz
}

# Both take the kubeconfig for delegated authn/authz of their own health
# endpoints too; without it they log warnings and serve nothing useful.
start_controller_manager() {
  local kc="$STATE/controller-manager.kubeconfig"
  kubeconfig "$kc" controller-manager
  # --flex-volume-plugin-dir: the default is /usr/libexec/kubernetes/...,
  # which it would create on the host.
  # --controllers=*: every controller enabled by default, as on a real
  # cluster (deployment, replicaset, daemonset, statefulset, job,
  # garbage-collector, namespace, serviceaccount, serviceaccount-token,
  # node-lifecycle, endpointslice, ...). Each controller uses its own service
  # account, as kubeadm sets it up, so RBAC is exercised as in production.
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$STATE/kube-controller-manager" \
    --leader-elect=false --controllers='*' --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --cluster-name=kbng --service-cluster-ip-range="$SERVICE_CIDR" \
    --flex-volume-plugin-dir="$STATE/kube-controller-manager/flexvolume"
  wait_until kube-controller-manager https_ok "https://127.0.0.1:$KCM_PORT/healthz" -k
}

start_scheduler() {
  local kc="$STATE/scheduler.kubeconfig"
  kubeconfig "$kc" scheduler
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --cert-dir="$STATE/kube-scheduler" \
    --leader-elect=false
  wait_until kube-scheduler https_ok "https://127.0.0.1:$SCHED_PORT/healthz" -k
}

start_kwok() {
  local kc="$STATE/kwok.kubeconfig"
  kubeconfig "$kc" kwok
  mkdir -p "$STATE/kwok-home"
  # HOME: kwok also loads ~/.kwok/kwok.yaml when present; keep a developer's
  # own kwok setup out of the tests. Node IP and kubelet port point at kwok's
  # own server on loopback, so nothing ever dials a made-up node address.
  HOME="$STATE/kwok-home" start kwok "$BIN/kwok" \
    --kubeconfig="$kc" --config="$ETC/kwok-stages.yaml" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 \
    --node-ip=127.0.0.1 --node-port="$KWOK_PORT" --server-address="127.0.0.1:$KWOK_PORT" \
    --cidr="$POD_CIDR"
  wait_until kwok https_ok "http://127.0.0.1:$KWOK_PORT/healthz"
}

write_env() {
  kubeconfig "$STATE/kubeconfig" admin
  cat >"$STATE/env" <<EOF
# Source this file: the kbng test cluster started by tests/cluster/up.sh.
export KBNG_CLUSTER_DIR=$STATE
export KUBECONFIG=$STATE/kubeconfig
export KBNG_APISERVER_URL=https://127.0.0.1:$API_PORT
export KBNG_CLUSTER_CA=$PKI/ca.crt
export KBNG_K8S_BIN=$BIN
export PATH=$BIN:\$PATH
# Keep kubectl's discovery cache and helm's config, cache and repositories in
# the state folder rather than in \$HOME, so runs leave nothing behind.
export KUBECACHEDIR=$STATE/kube-cache
export HELM_CACHE_HOME=$STATE/helm/cache
export HELM_CONFIG_HOME=$STATE/helm/config
export HELM_DATA_HOME=$STATE/helm/data
EOF
}

# If anything fails half-way, stop what was started rather than leave
# processes behind for the next run to trip over.
on_exit() {
  local rc=$?
  if ((rc != 0)); then
    log "up failed; stopping what was started"
    "$KBNG_CLUSTER_HERE/down.sh" --keep-logs || true
  fi
}

main() {
  if [[ -s $STATE/pids ]]; then
    die "a cluster already runs from $STATE; run tests/cluster/down.sh first"
  fi
  BIN=$("$KBNG_CLUSTER_HERE/build.sh")
  ETC=$(dirname "$BIN")/etc
  local start=$SECONDS
  rm -rf "$STATE"
  mkdir -p "$STATE/logs"
  : >"$STATE/pids"
  trap on_exit EXIT
  pick_ports
  make_pki
  start_etcd
  start_apiserver
  start_controller_manager
  start_scheduler
  start_kwok
  write_env
  log "cluster up in $((SECONDS - start))s: source $STATE/env"
}

main "$@"
