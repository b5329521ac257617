# shellcheck shell=bash
# Sourced by run.sh: reporting, waiting, and starting/stopping operator processes.

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

PASSED=0
FAILED=0
FAILURES=()

# A check whose prerequisite failed is counted failed without running (it could only
# time out): `needs NAME...` before the run_test calls that depend on NAME.
NEEDED=()
needs() { NEEDED+=("$@"); }

# run_test NAME FUNCTION: one named check; its output goes to the log, a failure says why.
run_test() {
  local name=$1 fn=$2 out dep
  for dep in "${NEEDED[@]}"; do
    if [[ " ${FAILURES[*]} " == *" $dep "* ]]; then
      FAILED=$((FAILED + 1))
      FAILURES+=("$name")
      log "FAIL $name (not run: $dep failed)"
      return
    fi
  done
  out=$WORK/tests/$name.log
  mkdir -p "$WORK/tests"
  if "$fn" >"$out" 2>&1; then
    PASSED=$((PASSED + 1))
    log "ok   $name"
  else
    FAILED=$((FAILED + 1))
    FAILURES+=("$name")
    log "FAIL $name"
    sed 's/^/    | /' "$out" | tail -n 40 >&2
  fi
}

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
  if [[ $1 == "$2" ]]; then
    echo "ok: $3 = $2"
  else
    echo "MISMATCH: $3"
    echo "  expected: $2"
    echo "  actual:   $1"
    return 1
  fi
}

# expect_match ACTUAL REGEX WHAT
expect_match() {
  if [[ $1 =~ $2 ]]; then
    echo "ok: $3 matches /$2/"
  else
    echo "MISMATCH: $3 does not match /$2/"
    echo "  actual: $1"
    return 1
  fi
}

# eventually SECONDS CMD...: CMD succeeds within SECONDS (polled twice a second); on
# timeout, runs CMD once more with its output shown.
eventually() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "timed out after waiting for: $*"
      "$@" || true
      return 1
    fi
    sleep 0.5
  done
}

# jq_true JSON-PRODUCING-CMD... -- FILTER: the filter yields true.
jq_true() {
  local args=() filter
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  shift
  filter=$1
  [[ $("${args[@]}" | jq -r "$filter") == true ]]
}

k() { kubectl -n "$NS" "$@"; }

# Succeeds only on the API server's NotFound for $1 (kind/name), not on any other failure.
not_found() {
  local out
  out=$(kubectl -n "$NS" get "$1" 2>&1)
  [[ $? -ne 0 && $out == *"(NotFound)"* ]]
}

# The objects of the kinds a BNG owns labelled $1 (one kind/name a line); fails with kubectl.
labelled() {
  kubectl -n "$NS" get sts,deploy,rs,pods,cm,svc,sa,role,rolebinding,networkpolicy,secret -l "$1" -o name
}

# Succeeds when kubectl answered and listed no object labelled $1.
none_labelled() {
  local out
  out=$(labelled "$1") && [[ -z $out ]]
}

# --- operator processes --------------------------------------------------------

declare -A OPERATOR_PIDS=()

# start_operator IDENTITY: runs kbng-operator as the chart would (environment from the
# chart's Deployment and ConfigMap, credentials of the chart's ServiceAccount).
declare -A ADMIN_PORTS=()

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The admin listener (/healthz, /readyz) of each operator process gets its own loopback
# port in place of the chart's 0.0.0.0:8081 (they share this host); CONTROL_URL_OVERRIDE
# points BNGs at control processes this suite runs on loopback.
start_operator() {
  local id=$1
  [[ -n ${ADMIN_PORTS[$id]:-} ]] || ADMIN_PORTS[$id]=$(free_port)
  (
    # shellcheck disable=SC1091
    source "$WORK/operator.env"
    # Per-test changes to the chart's environment, as NAME=VALUE words.
    for kv in ${OPERATOR_ENV_OVERRIDES:-}; do export "${kv?}"; done
    export KUBECONFIG=$WORK/operator.kubeconfig POD_NAME=$id
    export KBNG_ADMIN_LISTEN=127.0.0.1:${ADMIN_PORTS[$id]}
    export KBNG_CONTROL_URL_OVERRIDE=${CONTROL_URL_OVERRIDE:-}
    exec "$BIN/kbng-operator"
  ) >>"$WORK/operator-$id.log" 2>&1 &
  OPERATOR_PIDS[$id]=$!
  log "started operator $id (pid ${OPERATOR_PIDS[$id]})"
}

# stop_operator IDENTITY SIGNAL
stop_operator() {
  local id=$1 sig=${2:-TERM} pid=${OPERATOR_PIDS[$1]:-}
  [[ -n $pid ]] || return 0
  kill "-$sig" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "OPERATOR_PIDS[$id]"
  log "stopped operator $id with SIG$sig"
}

stop_all_operators() {
  local id
  for id in "${!OPERATOR_PIDS[@]}"; do
    stop_operator "$id" TERM
  done
}

lease_holder() {
  kubectl -n "$OPERATOR_NS" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null
}

# pod_env NAMESPACE POD [CONTAINER-INDEX]: the container's environment as the kubelet would
# resolve it, as a JSON object: downward-API fieldRefs answered from the real Pod object the
# API server holds, and `$(VAR)` in values expanded from the variables defined before it
# (an undefined one stays literal, as the kubelet leaves it). Other sources are left out.
pod_env() {
  kubectl -n "$1" get pod "$2" -o json | jq -c --argjson i "${3:-0}" '
    def resolve_env($pod):
      reduce (.env // [])[] as $e ({}; . as $acc |
        if $e.value != null then
          .[$e.name] = (reduce ($acc | to_entries[]) as $kv ($e.value;
                          gsub("\\$\\(" + $kv.key + "\\)"; $kv.value)))
        elif $e.valueFrom.fieldRef != null then
          .[$e.name] = ($pod | getpath($e.valueFrom.fieldRef.fieldPath | split(".")) // "")
        else . end);
    . as $pod | .spec.containers[$i] | resolve_env($pod)'
}
