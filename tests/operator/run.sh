#!/usr/bin/env bash
# End-to-end suite of the CRDs, the Helm chart and kbng-operator against a real
# kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes (tests/cluster).
#
# The operator binary runs on this machine (containers cannot run here) with exactly
# the chart's configuration: the environment of the chart's Deployment, the licence key
# from the chart's ConfigMap, and a token of the chart's ServiceAccount, so the chart's
# RBAC is what authorises it.
#
# Prints one line per check and `N passed, M failed` last; exits 1 on any failure.
# Needs: cargo, jq, openssl, and what tests/cluster needs (it builds the control plane
# into /var/cache/kbng on first use).
# Env: KBNG_OPERATOR_CLUSTER_DIR (state folder of this suite's cluster),
#      KBNG_KEEP=1 (leave the cluster and work folder for a look around),
#      KBNG_E2E_CRD_OVERRIDE=DIR (try CRD YAML from DIR instead of crds/yaml, in a copy of
#      the chart: for checking a CRD fix before it is generated; the run says so loudly).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=observe.sh
source "$HERE/observe.sh"
# shellcheck source=argocd.sh
source "$HERE/argocd.sh"
# shellcheck source=netpol.sh
source "$HERE/netpol.sh"
# shellcheck source=grpc_tls.sh
source "$HERE/grpc_tls.sh"

export KBNG_CLUSTER_DIR=${KBNG_OPERATOR_CLUSTER_DIR:-/tmp/kbng-operator-e2e}
WORK=$(mktemp -d /tmp/kbng-operator-e2e.XXXXXX)
NS=kbng
OPERATOR_NS=kbng-system
RELEASE=kbng
export LEASE=kbng-operator # read by lib.sh
CRD_DIR=$ROOT/crds/yaml
CHART=$ROOT/charts/kbng
SAMPLES=$ROOT/deploy/samples
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug
# The real workload binaries, run on this host: under --check-config with the arguments of
# the workloads the operator created, and one control + dataplane pair on loopback and veths.
RELEASE_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
# shellcheck source=../lib/netns.sh
source "$ROOT/tests/lib/netns.sh"
tag=kbop$$ # network namespaces of this run: $tag-*
REAL_PIDS=()

cleanup() {
  stop_all_operators
  local p
  for p in "${REAL_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  topology_down
  if [[ ${KBNG_KEEP:-} == 1 ]]; then
    log "KBNG_KEEP=1: cluster left in $KBNG_CLUSTER_DIR, work in $WORK"
  else
    "$ROOT/tests/cluster/down.sh" >/dev/null 2>&1 || true
    rm -rf "$WORK"
  fi
}

# --- set-up ------------------------------------------------------------------------

setup() {
  command -v jq >/dev/null || { log "jq is required (apt-get install jq)"; return 1; }
  log "building kbng-operator and kbngctl"
  (cd "$ROOT" && cargo build -q -p kbng-operator -p kbngctl) || return 1
  # tests/run builds the workspace in release before the suites; build only what is missing.
  if [[ ! -x $RELEASE_BIN/kbng-control || ! -x $RELEASE_BIN/kbng-dataplane ]]; then
    log "building kbng-control and kbng-dataplane (release)"
    (cd "$ROOT" && cargo build -q --release -p kbng-control -p kbng-dataplane) || return 1
  fi
  REAL_API_PORT=$(free_port)
  # BNG "real" in $NS is served by a kbng-control this suite runs on loopback.
  CONTROL_URL_OVERRIDE="$NS/real=http://127.0.0.1:$REAL_API_PORT"
  if [[ -s $KBNG_CLUSTER_DIR/pids ]]; then
    log "a cluster from an earlier run is still up in $KBNG_CLUSTER_DIR; stopping it"
    "$ROOT/tests/cluster/down.sh" >/dev/null 2>&1 || true
  fi
  "$ROOT/tests/cluster/up.sh" || return 1
  # shellcheck disable=SC1091
  source "$KBNG_CLUSTER_DIR/env"
  "$ROOT/tests/cluster/nodes.sh" || return 1
  kubectl create namespace "$NS" >/dev/null || return 1
  # The lab signing key is published on purpose (deploy/samples); tests issue fresh
  # licences with it so that their validity window always contains now.
  cp "$SAMPLES/lab-signing.key" "$WORK/seed"
  if [[ -n ${KBNG_E2E_CRD_OVERRIDE:-} ]]; then
    log "WARNING: KBNG_E2E_CRD_OVERRIDE: testing CRDs from $KBNG_E2E_CRD_OVERRIDE, not crds/yaml"
    cp -r "$ROOT/charts/kbng" "$WORK/chart"
    rm -f "$WORK/chart/crds/"*.yaml
    cp "$KBNG_E2E_CRD_OVERRIDE"/*.yaml "$WORK/chart/crds/"
    CHART=$WORK/chart
    CRD_DIR=$KBNG_E2E_CRD_OVERRIDE
  fi
}

issue_licence() { # NAME MAX_SESSIONS [extra kbngctl args]
  local name=$1 max=$2; shift 2
  "$BIN/kbngctl" licence issue --signing-key "$WORK/seed" --name "$name" --namespace "$NS" \
    --customer "Example Telco Lab" --licence-id "LAB-$name" --max-sessions "$max" "$@"
}

# sample plan INDEX (0: basic-50m, 1: premium-1g) as JSON, renamed.
plan_json() { # INDEX NAME
  kubectl create --dry-run=client -o json -f "$SAMPLES/plans.yaml" |
    jq -s --arg n "$2" ".[$1] | .metadata.name = \$n"
}

# sample BNG as JSON, renamed, with a jq edit applied.
bng_json() { # NAME JQ-EDIT
  kubectl create --dry-run=client -o json -f "$SAMPLES/bng.yaml" |
    jq --arg n "$1" ".metadata.name = \$n | $2"
}

# --- chart and CRDs ----------------------------------------------------------------

t_chart_crds_are_the_generated_crds() {
  diff -r "$ROOT/crds/yaml" "$ROOT/charts/kbng/crds" && echo "identical"
}

t_helm_lint_strict() {
  helm lint --strict "$CHART" -f "$CHART/ci/lab-values.yaml"
}

t_helm_schema_rejects_bad_values() {
  local bad rc=0 out
  for bad in "replicaCount=0" "sessionStore.kind=nfs" "licence.publicKey=not-a-key" \
             "logFormat=xml" "drainTimeoutSeconds=-1" "nosuchvalue=1" \
             "telemetry.otlpEndpoint=otel:4317" "monitoring.interval=soon" \
             "monitoring.prometheusRule=yes"; do
    if out=$(helm template x "$ROOT/charts/kbng" -f "$ROOT/charts/kbng/ci/lab-values.yaml" \
               --set "$bad" 2>&1); then
      echo "ACCEPTED bad value $bad"; rc=1
    else
      expect_match "$out" "values don't meet the specifications of the schema|schema" "refusal of $bad" || rc=1
    fi
  done
  # And a missing key is refused with the chart's own message.
  out=$(helm template x "$ROOT/charts/kbng" 2>&1) && { echo "ACCEPTED no public key"; rc=1; }
  expect_match "$out" "licence.publicKey is required" "refusal without a key" || rc=1
  return $rc
}

t_helm_install() {
  helm install "$RELEASE" "$CHART" -n "$OPERATOR_NS" --create-namespace \
    -f "$ROOT/charts/kbng/ci/lab-values.yaml" --set "telemetry.otlpEndpoint=$OTLP_ENDPOINT" \
    --wait --timeout 120s || return 1
  local crd
  for crd in bngs subscriberplans licences; do
    kubectl wait --for=condition=Established "crd/$crd.kbng.dev" --timeout=30s || return 1
  done
  expect_eq "$(kubectl -n "$OPERATOR_NS" get deploy kbng-operator -o jsonpath='{.status.availableReplicas}')" 2 "operator replicas available (kwok)" &&
  kubectl get clusterrole kbng-operator >/dev/null &&
  kubectl -n "$OPERATOR_NS" get role kbng-operator-leader >/dev/null
}

t_crds_apply_server_side() {
  kubectl apply --server-side --force-conflicts -f "$CRD_DIR"
}

# --- the API server refuses bad CRs --------------------------------------------------

# refused NAME JSON REGEX: server-side dry run with strict field validation fails with REGEX.
refused() {
  local out
  if out=$(kubectl apply --dry-run=server --validate=strict -f - <<<"$2" 2>&1); then
    echo "ACCEPTED: $1"; return 1
  fi
  expect_match "$out" "$3" "$1"
}

t_bad_crs_are_refused() {
  local plan rc=0
  plan=$(plan_json 1 premium-bad)
  refused "typo'd field" "$(bng_json typo '.spec.dataplane.workerCore = 2')" \
    'unknown field "spec.dataplane.workerCore"' || rc=1
  refused "PIR < CIR" "$(jq '.spec.downstream.pirBps = 1000000' <<<"$plan")" \
    'pirBps must be at least cirBps' || rc=1
  refused "VLAN 4096" "$(bng_json vlan '.spec.access.outerVlans[0].last = 4096')" \
    'outerVlans\[0\]\.last.*(less than or equal to 4094|4094)' || rc=1
  refused "bad CIDR" "$(bng_json cidr '.spec.pools[0].cidr = "100.64.0.0/33"')" \
    'pools\[0\]\.cidr' || rc=1
  refused "host bits in CIDR" "$(bng_json host '.spec.pools[0].cidr = "100.64.0.1/16"')" \
    'cidr must not have host bits set' || rc=1
  refused "gateway outside the pool" "$(bng_json gw '.spec.pools[0].gateway = "10.9.9.9"')" \
    'gateway must be inside cidr' || rc=1
  refused "host bits in a walled-garden prefix" \
    "$(bng_json garden '.spec.walledGarden.allowed[0].prefix = "198.51.100.53/24"')" \
    'prefix must not have host bits set' || rc=1
  refused "memoryMib too small for the session tables" \
    "$(bng_json mem '.spec.dataplane.sessionCapacity = 1000000')" \
    'memoryMib is too small for sessionCapacity and workerCores' || rc=1
  refused "RADIUS authMethod outside pap|chap" "$(bng_json am '.spec.aaa = {"mode": "radius", "unknownSubscribers": "captive",
      "radius": {"servers": [{"address": "192.0.2.10"}], "nasIdentifier": "lab", "authMethod": "mschap",
                 "secretRef": {"name": "radius-secret", "key": "secret"}}}')" \
    'authMethod: Unsupported value: "mschap"' || rc=1
  refused "CoA port on the control's admin port" "$(bng_json das '.spec.aaa = {"mode": "radius", "unknownSubscribers": "captive",
      "radius": {"servers": [{"address": "192.0.2.10"}], "nasIdentifier": "lab",
                 "secretRef": {"name": "radius-secret", "key": "secret"},
                 "dynamicAuthorization": {"port": 8080, "clients": [{"address": "192.0.2.10"}]}}}')" \
    "port must not be the control's admin port" || rc=1
  refused "CoA client that is not an address" "$(bng_json dasname '.spec.aaa = {"mode": "radius", "unknownSubscribers": "captive",
      "radius": {"servers": [{"address": "192.0.2.10"}], "nasIdentifier": "lab",
                 "secretRef": {"name": "radius-secret", "key": "secret"},
                 "dynamicAuthorization": {"clients": [{"address": "radius.example"}]}}}')" \
    'dynamicAuthorization.clients\[0\].address' || rc=1
  refused "subscribers maxRemovalPercent 0" \
    "$(bng_json maxremoval '.spec.aaa.subscribers = {"configMap": "s", "key": "s.csv", "maxRemovalPercent": 0}')" \
    'maxRemovalPercent.*(greater than or equal to 1|should be greater)' || rc=1
  refused "maxSessionsPerLine 0" "$(bng_json perline '.spec.dhcp.maxSessionsPerLine = 0')" \
    'maxSessionsPerLine.*(greater than or equal to 1|should be greater)' || rc=1
  refused "pacing maxWaitMs above a minute" \
    "$(bng_json maxwait '.spec.dhcp.pacing = {"ratePerSec": 100, "burst": 10, "maxWaitMs": 600000}')" \
    'maxWaitMs.*(less than or equal to 60000|should be less)' || rc=1
  refused "leaseSyncIntervalMs above a minute" \
    "$(bng_json leasesync '.spec.dhcp.leaseSyncIntervalMs = 600000')" \
    'leaseSyncIntervalMs.*(less than or equal to 60000|should be less)' || rc=1
  refused "subscribers with RADIUS" "$(bng_json subsradius '.spec.aaa = {"mode": "radius", "unknownSubscribers": "captive",
      "radius": {"servers": [{"address": "192.0.2.10"}], "nasIdentifier": "lab",
                 "secretRef": {"name": "radius-secret", "key": "secret"}},
      "subscribers": {"configMap": "subs", "key": "subs.csv"}}')" \
    "subscribers are the local store's records" || rc=1
  refused "subscribers key neither .csv nor .json" \
    "$(bng_json subskey '.spec.aaa.subscribers = {"configMap": "subs", "key": "subs.txt"}')" \
    'aaa.subscribers.key' || rc=1
  return $rc
}

t_valid_samples_are_accepted() {
  kubectl apply --dry-run=server --validate=strict -f "$SAMPLES/bng.yaml" \
    -f "$SAMPLES/plans.yaml" -f "$SAMPLES/licence.yaml"
}

# --- the operator, configured by the chart ---------------------------------------------

t_operator_starts_with_the_charts_config_and_rbac() {
  local dep token
  dep=$(kubectl -n "$OPERATOR_NS" get deploy kbng-operator -o json) || return 1
  # Literal env values of the chart's container, plus what the pod would get from the
  # downward API and the ConfigMap. Not the OTLP endpoint: no collector runs here, and the
  # workloads' copy of it (KBNG_WORKLOAD_OTLP_ENDPOINT) is what the suite checks.
  jq -r '.spec.template.spec.containers[0].env[]
         | select(.value != null and .name != "OTEL_EXPORTER_OTLP_ENDPOINT")
         | "export \(.name)=\(.value | @sh)"' <<<"$dep" >"$WORK/operator.env"
  echo "export POD_NAMESPACE=$OPERATOR_NS" >>"$WORK/operator.env"
  echo "export KBNG_LICENCE_PUBLIC_KEY=$(kubectl -n "$OPERATOR_NS" get cm kbng-operator \
    -o jsonpath='{.data.licencePublicKey}')" >>"$WORK/operator.env"
  cat "$WORK/operator.env"
  token=$(kubectl -n "$OPERATOR_NS" create token kbng-operator --duration=2h) || return 1
  cat >"$WORK/operator.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kbng
  cluster:
    server: $KBNG_APISERVER_URL
    certificate-authority-data: $(base64 -w0 "$KBNG_CLUSTER_CA")
users:
- name: kbng-operator
  user:
    token: $token
contexts:
- name: kbng
  context: {cluster: kbng, user: kbng-operator}
current-context: kbng
EOF
  start_operator op-a
  eventually 30 grep -q "controllers started" "$WORK/operator-op-a.log" &&
  expect_eq "$(lease_holder)" op-a "Lease holder"
}

t_licences_are_verified() {
  local rc=0
  issue_licence lab-licence 1000 --days 30 | kubectl apply -f - || return 1
  # Forged: signed for 1000 sessions, then edited to claim a million.
  issue_licence forged 1000 | sed 's/^  maxSessions: 1000$/  maxSessions: 1000000/' |
    kubectl apply -f - || return 1
  issue_licence expired 1000 --not-before "$(date -u -d '-400 days' +%Y-%m-%dT%H:%M:%SZ)" --days 1 |
    kubectl apply -f - || return 1
  eventually 20 jq_true k get lic lab-licence -o json -- '.status.valid == true' || rc=1
  local s
  s=$(k get lic lab-licence -o json | jq -c '.status | {valid, reason, maxSessions, source, daysRemaining}')
  expect_match "$s" '"valid":true,"reason":"Verified","maxSessions":1000,"source":"licence","daysRemaining":(29|30)' "valid licence status" || rc=1
  eventually 20 jq_true k get lic forged -o json -- '.status.reason == "BadSignature"' || rc=1
  s=$(k get lic forged -o json | jq -c '.status | {valid, maxSessions, source}')
  expect_eq "$s" '{"valid":false,"maxSessions":64,"source":"free-baseline"}' "forged licence status" || rc=1
  eventually 20 jq_true k get lic expired -o json -- '.status.reason == "Expired" and .status.valid == false' || rc=1
  return $rc
}

# --- workloads ---------------------------------------------------------------------

t_licence_plans_and_bng_produce_the_workloads() {
  kubectl apply -f "$SAMPLES/plans.yaml" -f "$SAMPLES/bng.yaml" || return 1
  eventually 30 k get sts lab-dataplane || return 1
  eventually 30 k get sts lab-control || return 1
  local dep c rc=0 want
  dep=$(k get sts lab-dataplane -o json)
  c=$(jq '.spec.template.spec.containers[0]' <<<"$dep")
  want='{"cpu":"3","hugepages-1Gi":"2Gi","intel.com/sriov_access":"1","intel.com/sriov_uplink":"1","memory":"1Gi"}'
  expect_eq "$(jq -cS '.resources.requests' <<<"$c")" "$want" "dataplane requests" || rc=1
  expect_eq "$(jq -cS '.resources.limits' <<<"$c")" "$want" "dataplane limits" || rc=1
  expect_eq "$(jq -r '.spec.template.metadata.annotations["k8s.v1.cni.cncf.io/networks"]' <<<"$dep")" \
    '[{"interface":"access0","name":"sriov-access"},{"interface":"uplink0","name":"sriov-uplink"}]' \
    "Multus annotation" || rc=1
  expect_eq "$(jq -c '.securityContext.capabilities' <<<"$c")" \
    '{"add":["IPC_LOCK","NET_RAW","SYS_NICE"],"drop":["ALL"]}' "capabilities" || rc=1
  expect_eq "$(jq -c '.securityContext | {privileged, allowPrivilegeEscalation, readOnlyRootFilesystem}' <<<"$c")" \
    '{"privileged":false,"allowPrivilegeEscalation":false,"readOnlyRootFilesystem":true}' "security context" || rc=1
  expect_eq "$(jq -c '.spec.template.spec.volumes[] | select(.name == "hugepages") | .emptyDir' <<<"$dep")" \
    '{"medium":"HugePages"}' "hugepages volume" || rc=1
  expect_eq "$(jq -r '.volumeMounts[] | select(.name == "hugepages") | .mountPath' <<<"$c")" /dev/hugepages "hugepages mount" || rc=1
  expect_eq "$(jq -r '.args | index("--cores") as $i | .[$i + 1]' <<<"$c")" auto:2 "cores from the affinity mask" || rc=1
  expect_eq "$(jq -c '[.readinessProbe.tcpSocket.port, .livenessProbe.tcpSocket.port]' <<<"$c")" '[50051,50051]' "dataplane probes" || rc=1
  expect_eq "$(k get svc lab-dataplane -o jsonpath='{.spec.clusterIP}')" None "dataplane headless service" || rc=1
  expect_eq "$(jq -r '.spec.template.spec.nodeSelector["feature.node.kubernetes.io/network-sriov.capable"]' <<<"$dep")" true "nodeSelector" || rc=1
  expect_eq "$(jq -c '.metadata.ownerReferences[0] | {kind, name, controller}' <<<"$dep")" \
    '{"kind":"BNG","name":"lab","controller":true}' "owner reference" || rc=1
  # The API server's own verdict on the pod: Guaranteed QoS.
  eventually 30 jq_true k get pods -l app.kubernetes.io/instance=lab,app.kubernetes.io/component=dataplane -o json -- \
    '.items | length == 1 and .[0].status.qosClass == "Guaranteed"' || rc=1
  local sts
  sts=$(k get sts lab-control -o json)
  expect_eq "$(jq -c '.spec.template.spec.volumes[] | select(.name == "session-store") | .emptyDir' <<<"$sts")" '{}' \
    "session store volume (lab values: emptydir)" || rc=1
  expect_eq "$(jq -r '.spec.template.spec.serviceAccountName' <<<"$sts")" lab-control "control service account" || rc=1
  expect_eq "$(k get svc lab-control -o jsonpath='{.spec.clusterIP}')" None "headless service" || rc=1
  expect_eq "$(k get rolebinding lab-control -o jsonpath='{.subjects[0].name}')" lab-control "role binding" || rc=1
  expect_eq "$(k get role lab-control -o json | jq -c '[.rules[] | select((.resources | index("pods")) and (.verbs | index("patch")))]')" \
    '[]' "control may patch no pod (the drain goes through its API)" || rc=1
  expect_eq "$(jq -c '.spec.template.spec.containers[0] | [.readinessProbe.httpGet.path, .livenessProbe.tcpSocket.port]' <<<"$sts")" \
    '["/v1/ready",8080]' "control probes" || rc=1
  eventually 20 jq_true k get cm lab-control -o json -- \
    '(.data["control.json"] | fromjson | .plans | map(.name)) == ["basic-50m", "premium-1g"]' || rc=1
  # The control gets the signed Licence and the operator's public key, and verifies it itself.
  expect_eq "$(k get cm lab-control -o json | jq -c '{id: .data["licence.json"] | fromjson | .spec.licenceId,
      key: .data["licence-public.key"], files: .data["control.json"] | fromjson | .licence}')" \
    "{\"id\":\"LAB-lab-licence\",\"key\":\"$(cat "$SAMPLES/lab-licence-public.key")\",\"files\":{\"file\":\"/etc/kbng/licence.json\",\"publicKeyFile\":\"/etc/kbng/licence-public.key\"}}" \
    "licence and key handed to the control" || rc=1
  eventually 20 jq_true k get bng lab -o json -- \
    '.status.observedGeneration == .metadata.generation and .status.sessions.cap == 1000 and .status.licenceSource == "licence"' || rc=1
  return $rc
}

t_scheduler_places_dataplanes_only_where_they_fit() {
  local rc=0 node
  eventually 30 jq_true k get pods -l app.kubernetes.io/instance=lab,app.kubernetes.io/component=dataplane -o json -- \
    '.items[0].spec.nodeName != null' || return 1
  node=$(k get pods -l app.kubernetes.io/instance=lab,app.kubernetes.io/component=dataplane -o jsonpath='{.items[0].spec.nodeName}')
  expect_match "$node" '^kbng-sriov-[ab]$' "lab dataplane node" || rc=1
  eventually 20 jq_true k get bng lab -o json -- ".status.dataplanes[0].node == \"$node\"" || rc=1
  expect_match "$(k get bng lab -o jsonpath='{.status.dataplanes[0].placement}')" "scheduled on $node" "placement in status" || rc=1
  # Without a nodeSelector, resources alone keep 3 dataplanes off the plain node.
  bng_json spread 'del(.spec.dataplane.nodeSelector) | .spec.dataplane.replicas = 3' | kubectl apply -f - || return 1
  eventually 40 jq_true k get pods -l app.kubernetes.io/instance=spread,app.kubernetes.io/component=dataplane -o json -- \
    '[.items[] | select(.spec.nodeName != null)] | length == 3' || rc=1
  expect_eq "$(k get pods -l app.kubernetes.io/instance=spread,app.kubernetes.io/component=dataplane \
    -o json | jq -c '[.items[].spec.nodeName | select(. == "kbng-plain-a")]')" '[]' "no dataplane on the plain node" || rc=1
  # More hugepages than any node has: Pending, and the BNG says why.
  bng_json huge '.spec.dataplane.hugepages.count = 32' | kubectl apply -f - || return 1
  eventually 40 jq_true k get bng huge -o json -- \
    '.status.dataplanes[0].placement // "" | test("Insufficient hugepages-1Gi")' || rc=1
  expect_eq "$(k get pods -l app.kubernetes.io/instance=huge,app.kubernetes.io/component=dataplane -o jsonpath='{.items[0].status.phase}/{.items[0].spec.nodeName}')" \
    "Pending/" "huge dataplane pod unbound" || rc=1
  expect_eq "$(k get bng huge -o jsonpath='{.status.dataplanes[0].node}')" "" "no node in status" || rc=1
  expect_eq "$(k get bng huge -o json | jq -r '.status.conditions[] | select(.type == "Stalled") | "\(.status)/\(.reason)"')" \
    True/Unschedulable "huge BNG stalled" || rc=1
  # More cores than any node has: Stalled with the numbers.
  # (memoryMib raised with the cores: the schema wants room for 40 workers' session tables.)
  bng_json cores '.spec.dataplane.workerCores = 40 | .spec.dataplane.memoryMib = 2048' |
    kubectl apply -f - || return 1
  eventually 30 jq_true k get bng cores -o json -- \
    '.status.conditions[] | select(.type == "Stalled") | .status == "True" and (.message | test("41 CPUs requested"))' || rc=1
  eventually 20 jq_true k get events.events.k8s.io -o json -- \
    '[.items[] | select(.regarding.name == "cores" and .type == "Warning" and .reason == "Unschedulable")] | length >= 1' || rc=1
  k delete bng spread huge cores --wait=false
  return $rc
}

# The chart's lab values keep sessions in an emptyDir; this test runs the operator with
# claims. kwok binds no volume, so the claim stays Pending and the real API server refuses
# to expand it: what an operator sees on a StorageClass without expansion.
t_session_store_claims_follow_the_capacity() {
  local rc=0 claim=session-store-store-control-0
  stop_operator op-a TERM
  OPERATOR_ENV_OVERRIDES="KBNG_SESSION_STORE=pvc KBNG_SESSION_STORE_SIZE=1Gi" start_operator op-a
  # 2,000,000 sessions: 1 KiB each + 256 MiB = 2.16 GiB, so 3Gi rather than the flag's 1Gi.
  bng_json store '.spec.dataplane.sessionCapacity = 2000000 | .spec.dataplane.memoryMib = 2048' |
    kubectl apply -f - || rc=1
  eventually 30 jq_true k get sts store-control -o json -- \
    '.spec.volumeClaimTemplates[0].spec.resources.requests.storage == "3Gi"' || rc=1
  eventually 30 k get pvc "$claim" || rc=1
  eventually 30 jq_true k get bng store -o json -- \
    '.status.conditions[] | select(.type == "SessionStoreSized") | .status == "True" and .reason == "Sized"' || rc=1
  # Twice the capacity: the claim template cannot change, so the StatefulSet keeps it and the
  # rest of the change (the control's memory) still lands; the claim itself is asked to grow.
  k patch bng store --type=merge \
    -p '{"spec":{"dataplane":{"sessionCapacity":4000000,"memoryMib":4096}}}' || rc=1
  eventually 30 jq_true k get sts store-control -o json -- \
    '.spec.template.spec.containers[0].resources.limits.memory == "4651Mi"' || rc=1
  expect_eq "$(k get sts store-control -o jsonpath='{.spec.volumeClaimTemplates[0].spec.resources.requests.storage}')" \
    3Gi "claim template kept" || rc=1
  eventually 30 jq_true k get bng store -o json -- \
    '.status.conditions[] | select(.type == "SessionStoreSized") | .status == "False" and .reason == "ExpansionRefused" and (.message | test("session-store-store-control-0 requests 3Gi, 5Gi needed for sessionCapacity 4000000"))' || rc=1
  expect_eq "$(k get bng store -o json | jq -r '[.status.conditions[] | select(.reason == "ApplyRefused")] | length')" \
    0 "no owned object refused" || rc=1
  eventually 20 jq_true k get events.events.k8s.io -o json -- \
    '[.items[] | select(.regarding.name == "store" and .type == "Warning" and .reason == "ExpansionRefused")] | length >= 1' || rc=1
  k get bng store -o json | jq -c '.status.conditions[] | select(.type == "SessionStoreSized")'
  k delete bng store --wait=false
  k delete pvc "$claim" --wait=false
  stop_operator op-a TERM
  start_operator op-a
  return $rc
}

t_bad_input_is_reported_not_retried() {
  local rc=0
  # A plan that does not exist, and a forged licence: status, events, free baseline.
  bng_json noplan '.spec.plans = [{"name": "basic-50m"}, {"name": "gold"}] | .spec.licenceRef.name = "forged"' |
    kubectl apply -f - || return 1
  eventually 30 jq_true k get bng noplan -o json -- \
    '.status.conditions[] | select(.type == "Stalled") | .status == "True" and .reason == "PlanNotFound" and (.message | test("gold"))' || rc=1
  eventually 20 jq_true k get bng noplan -o json -- \
    '.status.sessions.cap == 64 and .status.licenceSource == "free-baseline"' || rc=1
  expect_eq "$(k get bng noplan -o json | jq -r '.status.conditions[] | select(.type == "LicenceValid") | "\(.status)/\(.reason)"')" \
    False/BadSignature "LicenceValid" || rc=1
  eventually 20 jq_true k get cm noplan-control -o json -- \
    '(.data["licence.json"] | fromjson | .spec.maxSessions) == 1000000 and (.data["control.json"] | fromjson | .plans | map(.name)) == ["basic-50m"]' || rc=1
  # The real control, given what the operator handed it, refuses the forged licence itself.
  expect_match "$(control_check_config noplan)" \
    'cap 64 \(Refused \{ licence_id: "LAB-forged", reason: "BadSignature"' "kbng-control's own verdict on the forged licence" || rc=1
  eventually 20 jq_true k get events.events.k8s.io -o json -- \
    '[.items[] | select(.regarding.name == "noplan" and .type == "Warning" and .reason == "PlanNotFound")] | length >= 1' || rc=1
  # The operator kept running and logged no reconcile error for it.
  kill -0 "${OPERATOR_PIDS[op-a]}" || { echo "operator died"; rc=1; }
  if grep -q "reconcile failed" "$WORK/operator-op-a.log"; then
    echo "reconcile errors in the operator log:"; grep "reconcile failed" "$WORK/operator-op-a.log" | tail -5; rc=1
  fi
  # Fixing the input un-stalls it.
  plan_json 0 gold | kubectl apply -f - || return 1
  eventually 30 jq_true k get bng noplan -o json -- \
    '.status.conditions[] | select(.type == "Stalled") | .status == "False"' || rc=1
  # Replacing the forged licence with a genuine one (the BNG itself unchanged) lifts the cap:
  # the BNG controller follows its Licence.
  issue_licence forged 500 | kubectl apply -f - || return 1
  eventually 30 jq_true k get bng noplan -o json -- \
    '.status.sessions.cap == 500 and .status.licenceSource == "licence"' || rc=1
  eventually 20 jq_true k get cm noplan-control -o json -- '(.data["licence.json"] | fromjson | .spec.maxSessions) == 500' || rc=1
  expect_match "$(control_check_config noplan)" 'cap 500 \(Licence \{ licence_id: "LAB-forged"' \
    "kbng-control's own verdict on the genuine replacement" || rc=1
  k delete bng noplan --wait=false
  return $rc
}

t_plan_edit_reaches_status_and_control_config() {
  local rc=0
  k patch subscriberplan basic-50m --type=merge -p '{"spec":{"downstream":{"cirBps":60000000}}}' || return 1
  eventually 20 jq_true k get subscriberplan basic-50m -o json -- \
    '.status.observedGeneration == .metadata.generation and .metadata.generation == 2' || rc=1
  eventually 20 jq_true k get cm lab-control -o json -- \
    '.data["control.json"] | fromjson | .plans[] | select(.name == "basic-50m") | .downstream.cirBps == 60000000' || rc=1
  expect_match "$(k get subscriberplan basic-50m -o json | jq -r '.status.conditions[] | select(.type == "InUse") | .message')" \
    '^used by BNG (.*, )?lab(,|$)' "plan InUse" || rc=1
  return $rc
}

t_operator_killed_mid_reconcile_converges() {
  local rc=0 before after
  before=$(k get sts lab-dataplane -o json | jq -c '{g: .metadata.generation, spec: .spec.template}')
  [[ -n $before ]] || { echo "no lab dataplane StatefulSet to compare with"; return 1; }
  bng_json crash '.' | kubectl apply -f - || return 1
  sleep 0.3
  stop_operator op-a KILL
  start_operator op-a
  eventually 40 jq_true k get bng crash -o json -- \
    '.status.observedGeneration == .metadata.generation and (.metadata.finalizers | index("kbng.dev/drain")) != null' || rc=1
  local kind
  for kind in sts/crash-control sts/crash-dataplane svc/crash-dataplane cm/crash-control svc/crash-control \
              sa/crash-control role/crash-control rolebinding/crash-control; do
    k get "$kind" >/dev/null || { echo "missing $kind"; rc=1; }
  done
  sleep 3
  after=$(k get sts lab-dataplane -o json | jq -c '{g: .metadata.generation, spec: .spec.template}')
  expect_eq "$after" "$before" "lab dataplane unchanged by the restart (generation and template)" || rc=1
  k delete bng crash --wait=false
  return $rc
}

t_only_the_lease_holder_writes() {
  local rc=0
  start_operator op-b
  eventually 20 grep -q "standing by" "$WORK/operator-op-b.log" || rc=1
  # A change while op-a leads: only op-a reports it.
  plan_json 0 while-a-leads | kubectl apply -f - || return 1
  eventually 20 jq_true k get events.events.k8s.io -o json -- \
    '[.items[] | select(.regarding.name == "while-a-leads")] | length >= 1' || rc=1
  sleep 2
  expect_eq "$(lease_holder)" op-a "Lease holder while both run" || rc=1
  expect_eq "$(k get events.events.k8s.io -o json | jq -c '[.items[] | select(.reportingInstance == "op-b")] | length')" 0 \
    "events written by the standby" || rc=1
  if grep -q "controllers started" "$WORK/operator-op-b.log"; then echo "standby started controllers"; rc=1; fi
  # op-a stops (releases the Lease); op-b takes over and acts.
  stop_operator op-a TERM
  eventually 20 grep -q "leader lease acquired" "$WORK/operator-op-b.log" || rc=1
  expect_eq "$(lease_holder)" op-b "Lease holder after hand-over" || rc=1
  plan_json 0 while-b-leads | kubectl apply -f - || return 1
  eventually 20 jq_true k get events.events.k8s.io -o json -- \
    '[.items[] | select(.regarding.name == "while-b-leads" and .reportingInstance == "op-b")] | length >= 1' || rc=1
  k patch subscriberplan premium-1g --type=merge -p '{"spec":{"downstream":{"cirBps":900000000}}}' || rc=1
  eventually 20 jq_true k get cm lab-control -o json -- \
    '.data["control.json"] | fromjson | .plans[] | select(.name == "premium-1g") | .downstream.cirBps == 900000000' || rc=1
  return $rc
}

t_deleting_the_bng_drains_and_cleans_up() {
  local rc=0 left owned
  # The label selects what the BNG owns: were it lost, the emptiness below would prove nothing.
  owned=$(labelled kbng.dev/bng=lab) || return 1
  expect_match "$owned" 'statefulset.apps/lab-dataplane' "objects labelled kbng.dev/bng=lab before the delete" || return 1
  k delete bng lab --wait=false || return 1
  eventually 60 not_found bng/lab || rc=1
  eventually 60 none_labelled kbng.dev/bng=lab || rc=1
  left=$(labelled kbng.dev/bng=lab) || rc=1
  expect_eq "$left" "" "objects left of BNG lab" || rc=1
  expect_eq "$(k get events.events.k8s.io -o json | jq -c '[.items[] | select(.regarding.name == "lab" and (.reason | test("^Drain"))) | .reason] | unique')" \
    '["DrainTimedOut","Draining"]' "drain events (no control process runs on kwok: its API never answers)" || rc=1
  expect_match "$(k get events.events.k8s.io -o json | jq -r '.items[] | select(.regarding.name == "lab" and .reason == "DrainTimedOut") | .note')" \
    'the control did not answer .*sessions left unknown' "what the timeout says was left" || rc=1
  return $rc
}

t_radius_bng_control_may_read_exactly_its_secret() {
  # The operator can only grant what it holds (RBAC escalation prevention): this proves the
  # chart's ClusterRole suffices for a RADIUS BNG, and that the grant is one Secret.
  local rc=0
  bng_json radius '.spec.aaa = {"mode": "radius", "unknownSubscribers": "captive",
      "radius": {"servers": [{"address": "192.0.2.10"}], "nasIdentifier": "lab",
                 "secretRef": {"name": "radius-secret", "key": "secret"}}}' |
    kubectl apply -f - || return 1
  eventually 30 k get role radius-control || return 1
  # Written without authMethod: the API server stores the schema's default.
  expect_eq "$(k get bng radius -o jsonpath='{.spec.aaa.radius.authMethod}')" pap "authMethod defaulted by the schema" || rc=1
  expect_eq "$(k get role radius-control -o json | jq -c '[.rules[] | select(.resources | index("secrets")) | {verbs, resourceNames}]')" \
    '[{"verbs":["get","watch","list"],"resourceNames":["radius-secret"]}]' "secret rule" || rc=1
  eventually 20 jq_true k get bng radius -o json -- \
    '.status.conditions[] | select(.type == "AAAReachable") | .status == "Unknown" and .reason == "NotReported"' || rc=1
  k delete bng radius --wait=false
  return $rc
}

# Health of the operator processes: both live; the leader ready once its caches synced, a
# standby ready as a standby. (op-b leads since the hand-over; op-a comes back as standby.)
t_operator_health_endpoints() {
  local rc=0 id
  start_operator op-a
  eventually 20 bash -c "curl -s http://127.0.0.1:${ADMIN_PORTS[op-a]}/readyz | grep -q standby" || rc=1
  for id in op-a op-b; do
    expect_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ADMIN_PORTS[$id]}/healthz")" 200 "$id /healthz" || rc=1
  done
  expect_eq "$(curl -s -w ' %{http_code}' "http://127.0.0.1:${ADMIN_PORTS[op-b]}/readyz")" \
    "leader: watch caches synced
 200" "leader /readyz" || rc=1
  expect_eq "$(curl -s -w ' %{http_code}' "http://127.0.0.1:${ADMIN_PORTS[op-a]}/readyz")" \
    "standby: the leader Lease is readable
 200" "standby /readyz" || rc=1
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ADMIN_PORTS[op-b]}/metrics")" 200 "/metrics" || rc=1
  # The leader times its reconciles of each kind; the standby reconciles nothing.
  local metrics kind
  metrics=$(curl -s "http://127.0.0.1:${ADMIN_PORTS[op-b]}/metrics")
  for kind in BNG SubscriberPlan Licence; do
    expect_match "$(grep "^kbng_operator_reconcile_duration_seconds_count{kind=\"$kind\",result=\"ok\"" <<<"$metrics")" \
      ' [1-9][0-9]*$' "leader's $kind reconciles on /metrics" || rc=1
  done
  local standby
  standby=$(curl -sf "http://127.0.0.1:${ADMIN_PORTS[op-a]}/metrics") || { echo "the standby's /metrics did not answer"; rc=1; }
  expect_eq "$(grep -c '^kbng_operator_reconcile_duration_seconds_count' <<<"$standby")" 0 \
    "standby's reconciles on /metrics" || rc=1
  # Each BNG with a licenceRef has its licence gauge, agreeing with its LicenceValid condition
  # (one being deleted is only drained, not converged: it may have none).
  local bng valid n=0
  while read -r bng valid; do
    n=$((n + 1))
    expect_match "$(grep "^kbng_licence_valid{bng=\"$bng\"}" <<<"$metrics")" " $valid\$" "kbng_licence_valid of $bng" || rc=1
  done < <(kubectl get bng -A -o json | jq -r '.items[] | select(.spec.licenceRef and .metadata.deletionTimestamp == null) |
    "\(.metadata.namespace)/\(.metadata.name) \(if any(.status.conditions[]?; .type == "LicenceValid" and .status == "True") then 1 else 0 end)"')
  ((n > 0)) || { echo "no BNG with a licenceRef to check the licence gauges on"; rc=1; }
  expect_eq "$(lease_holder)" op-b "the standby's return leaves the Lease alone" || rc=1
  return $rc
}

# kubelet-style $(VAR) expansion of one container's args, as a NUL-separated list.
container_args() { # STS VAR=VALUE...
  local sts=$1; shift
  local json expr='.spec.template.spec.containers[0] | .command + .args | .[]'
  json=$(k get sts "$sts" -o json) || return 1
  local kv filter="$expr"
  for kv in "$@"; do
    filter="$filter | gsub(\"\\\\$\\\\(${kv%%=*}\\\\)\"; \"${kv#*=}\")"
  done
  jq -j "$filter + \"\\u0000\"" <<<"$json"
}

# config_map_files CM DIR: every key of ConfigMap CM as a file in DIR (what its volume holds).
config_map_files() {
  local json key
  json=$(k get cm "$1" -o json) || return 1
  rm -rf "$2" && mkdir -p "$2" || return 1
  for key in $(jq -r '.data | keys[]' <<<"$json"); do
    jq -j --arg k "$key" '.data[$k]' <<<"$json" >"$2/$key"
  done
}

# subscribers_not_in_force REASON REGEX: BNG real's SubscribersInForce turns False with REASON
# and a message matching REGEX (jq), with a Warning event of that reason.
subscribers_not_in_force() {
  local in_force='.status.conditions[] | select(.type == "SubscribersInForce")' rc=0
  eventually 90 jq_true k get bng real -o json -- \
    "$in_force | .status == \"False\" and .reason == \"$1\" and (.message | test(\"$2\"))" || {
    k get bng real -o json | jq -c "$in_force"; rc=1; }
  expect_eq "$(k get events.events.k8s.io -o json |
    jq -c --arg r "$1" '[.items[] | select(.regarding.name == "real" and .reason == $r) | .type] | unique')" \
    '["Warning"]' "a Warning event for $1" || rc=1
  return $rc
}

# control_check_config BNG: the real kbng-control's --check-config output for the BNG's
# control StatefulSet command line, with its ConfigMap at the mount path.
control_check_config() {
  local args=()
  config_map_files "$1-control" "$WORK/check/$1" || return 1
  mapfile -d '' args < <(container_args "$1-control")
  args[0]=$RELEASE_BIN/${args[0]}
  run_in_pod_fs "$WORK/check/$1:/etc/kbng" "$(api_token_dir)" -- "${args[@]}" --check-config 2>&1
}

# api_token_dir: a directory holding an API token, for a control's --check-config (the pod
# has the operator's Secret mounted there).
api_token_dir() {
  [[ -s $WORK/check/api-token/token ]] ||
    { mkdir -p "$WORK/check/api-token" && echo e2e-token >"$WORK/check/api-token/token"; }
  echo "$WORK/check/api-token:/etc/kbng-api"
}

# run_in_pod_fs DIR:MOUNT_PATH... -- CMD...: CMD with each DIR mounted at its MOUNT_PATH (as
# the ConfigMap and Secret volumes are in the pod), in a private mount namespace.
run_in_pod_fs() {
  local pairs=() made=() rc=0 p mp
  while [[ $1 != -- ]]; do pairs+=("$1"); shift; done
  shift
  for p in "${pairs[@]}"; do
    mp=${p#*:}
    [[ -d $mp ]] || { mkdir -p "$mp" && made+=("$mp"); }
  done
  unshare -m bash -c 'for p in $1; do mount --bind "${p%%:*}" "${p#*:}" || exit 1; done; shift; exec "$@"' \
    _ "${pairs[*]}" "$@" || rc=$?
  for mp in "${made[@]}"; do rmdir "$mp"; done
  return $rc
}

t_real_binaries_accept_the_generated_workloads() {
  local rc=0 b mp out radius_out='' subs_out='' args=()
  # On a one-node host real names NUMA node 0, which its cores are on: the dataplane accepts.
  local numa='.'
  [[ $(ls -d /sys/devices/system/node/node[0-9]* | wc -l) == 1 ]] && numa='.spec.dataplane.numaNode = 0'
  bng_json real ".spec.dataplane.workerCores = 1 | .spec.dhcp.option82Identity = false |
      .spec.access = {\"vlanMode\": \"untagged\"} | $numa" | kubectl apply -f - || return 1
  # A node this host does not have: the dataplane refuses to start, naming the flag.
  bng_json numa-far ".spec.dataplane.workerCores = 1 |
      .spec.dataplane.numaNode = $(ls -d /sys/devices/system/node/node[0-9]* | wc -l)" | kubectl apply -f - || return 1
  # A relay-mode BNG: its control configuration names the relay servers.
  bng_json relay '.spec.dataplane.workerCores = 1 | .spec.dhcp = {"mode": "relay", "relayServers": ["192.0.2.67"]}' |
    kubectl apply -f - || return 1
  eventually 30 k get sts real-dataplane || return 1
  eventually 30 k get cm real-control || return 1
  # A RADIUS BNG: servers in the configuration, the shared secret from its mounted Secret,
  # CoA and Disconnect taken on the default port from one client.
  bng_json radius2 '.spec.dataplane.workerCores = 1 | .spec.aaa = {"mode": "radius", "unknownSubscribers": "captive",
      "radius": {"servers": [{"address": "192.0.2.10"}], "nasIdentifier": "lab", "authMethod": "chap",
                 "secretRef": {"name": "radius-secret", "key": "secret"},
                 "dynamicAuthorization": {"clients": [{"address": "192.0.2.10"}]}}}' | kubectl apply -f - || return 1
  # A BNG whose subscriber records come from a ConfigMap: the pod mounts its key where the
  # control's configuration names the file, and the real control reads them there.
  k create configmap lab-subscribers --dry-run=client -o json \
    --from-literal=records.csv="$(printf 'mac,circuit_id,remote_id,plan\n02:00:00:00:00:01,,,\n02:00:00:00:00:02,,,\n')" |
    k apply -f - || return 1
  bng_json subs '.spec.dataplane.workerCores = 1 |
      .spec.aaa.subscribers = {"configMap": "lab-subscribers", "key": "records.csv"}' | kubectl apply -f - || return 1
  eventually 30 k get cm relay-control || return 1
  eventually 30 k get cm radius2-control || return 1
  eventually 30 k get cm subs-control || return 1
  mkdir -p "$WORK/check/radius-secret" && echo testing123 >"$WORK/check/radius-secret/secret"
  config_map_files lab-subscribers "$WORK/check/subscribers" || return 1
  for b in real lab relay radius2 subs; do
    config_map_files "$b-control" "$WORK/check/$b" || return 1
  done
  mp=$(k get sts real-control -o json |
    jq -r '.spec.template.spec.containers[0].volumeMounts[] | select(.name == "config") | .mountPath')
  expect_eq "$mp" /etc/kbng "config mount path" || return 1
  # kbng-control: the StatefulSet's command line, the ConfigMap at its mount path.
  for b in real lab relay radius2 subs; do
    mapfile -d '' args < <(container_args "$b-control")
    args[0]=$RELEASE_BIN/${args[0]}
    echo "+ ${args[*]} --check-config"
    if out=$(run_in_pod_fs "$WORK/check/$b:$mp" "$WORK/check/radius-secret:/etc/kbng-radius" "$(api_token_dir)" \
               "$WORK/check/subscribers:/etc/kbng-subscribers" -- "${args[@]}" --check-config 2>&1); then
      echo "$out"
      [[ $b == radius2 ]] && radius_out=$out
      [[ $b == subs ]] && subs_out=$out
      expect_match "$out" "configuration valid: 1 dataplane\\(s\\) \\[\"http://$b-dataplane-0\\.$b-dataplane\\.$NS\\.svc:50051\"\\], 2 plan\\(s\\), cap 1000" \
        "kbng-control accepts $b's generated config" || rc=1
    else
      echo "REFUSED: $out"; rc=1
    fi
  done
  expect_eq "$(k get sts relay-control -o json | jq -c '.spec.template.spec.securityContext.sysctls')" \
    '[{"name":"net.ipv4.ip_unprivileged_port_start","value":"67"}]' "relay control may bind port 67" || rc=1
  expect_eq "$(k get sts radius2-control -o json | jq -c '.spec.template.spec.containers[0].volumeMounts[] | select(.name == "radius-secret") | .mountPath')" \
    '"/etc/kbng-radius"' "RADIUS secret mount" || rc=1
  expect_eq "$(jq -c '.aaa.radius.servers' "$WORK/check/radius2/control.json")" \
    '[{"address":"192.0.2.10:1812","accountingAddress":"192.0.2.10:1813","secretFile":"/etc/kbng-radius/secret"}]' "RADIUS servers in the control config" || rc=1
  expect_eq "$(jq -r '.aaa.radius.authMethod' "$WORK/check/radius2/control.json")" chap "RADIUS authMethod in the control config" || rc=1
  # The real control read the CoA listener and its client from the generated file; the pod
  # declares the UDP port, and the headless Service names it.
  expect_match "$radius_out" \
    'RADIUS 1 server\(s\), CoA/Disconnect on 0\.0\.0\.0:3799 from \[192\.0\.2\.10\]' "kbng-control takes CoA/Disconnect as generated" || rc=1
  expect_eq "$(k get sts radius2-control -o json | jq -c '[.spec.template.spec.containers[0].ports[] | select(.protocol == "UDP")]')" \
    '[{"containerPort":3799,"name":"radius-das","protocol":"UDP"}]' "CoA port of the control pod" || rc=1
  expect_eq "$(k get svc radius2-control -o json | jq -c '[.spec.ports[] | select(.protocol == "UDP") | {name, port}]')" \
    '[{"name":"radius-das","port":3799}]' "CoA port of the control Service" || rc=1
  expect_match "$subs_out" '2 subscriber record\(s\) from /etc/kbng-subscribers/records\.csv' \
    "kbng-control reads the records of aaa.subscribers where its pod mounts them" || rc=1
  expect_eq "$(k get sts subs-control -o json | jq -c '.spec.template.spec.volumes[] | select(.name == "subscribers") | .configMap | {name, items}')" \
    '{"name":"lab-subscribers","items":[{"key":"records.csv","path":"records.csv"}]}' "subscribers ConfigMap volume" || rc=1
  expect_eq "$(k get sts subs-control -o json | jq -c '.spec.template.spec.containers[0].volumeMounts[] | select(.name == "subscribers") | [.mountPath, .readOnly]')" \
    '["/etc/kbng-subscribers",true]' "subscribers mount" || rc=1
  k delete bng relay radius2 subs --wait=false
  # The check is real: an unknown field in the same file is refused, naming it.
  jq '.surprise = 1' "$WORK/check/real/control.json" >"$WORK/check/real/bad.json"
  mv "$WORK/check/real/bad.json" "$WORK/check/real/control.json"
  mapfile -d '' args < <(container_args real-control)
  args[0]=$RELEASE_BIN/${args[0]}
  if out=$(run_in_pod_fs "$WORK/check/real:$mp" "$(api_token_dir)" -- "${args[@]}" --check-config 2>&1); then
    echo "ACCEPTED an unknown field: $out"; rc=1
  else
    expect_match "$out" surprise "refusal names the unknown field" || rc=1
  fi
  # kbng-dataplane: the StatefulSet's command line, with what the kubelet and the SR-IOV
  # device plugin put in the environment.
  mapfile -d '' args < <(container_args real-dataplane "POD_NAME=real-dataplane-0")
  args[0]=$RELEASE_BIN/${args[0]}
  echo "+ ${args[*]} --check-config"
  if out=$(env PCIDEVICE_INTEL_COM_SRIOV_ACCESS=0000:3b:02.1 PCIDEVICE_INTEL_COM_SRIOV_UPLINK=0000:3b:0a.1 \
             "${args[@]}" --check-config 2>&1); then
    echo "$out"
    expect_match "$out" "configuration valid: .*worker cores \\[[0-9]+\\], access 0000:3b:02.1, uplink 0000:3b:0a.1.*--in-memory -m 2048 -a 0000:3b:02.1 -a 0000:3b:0a.1" \
      "kbng-dataplane accepts real's generated args" || rc=1
  else
    echo "REFUSED: $out"; rc=1
  fi
  # Without the device plugin's variable the dataplane stops, naming the flag and variable.
  if out=$("${args[@]}" --check-config 2>&1); then
    echo "ACCEPTED without PCIDEVICE_*: $out"; rc=1
  else
    expect_match "$out" '--access: "env:PCIDEVICE_INTEL_COM_SRIOV_ACCESS": \$PCIDEVICE_INTEL_COM_SRIOV_ACCESS is not set' \
      "missing VF variable named" || rc=1
  fi
  # lab asks for 2 workers + 1 main core: on a host with fewer CPUs the affinity check says so.
  mapfile -d '' args < <(container_args lab-dataplane "POD_NAME=lab-dataplane-0")
  args[0]=$RELEASE_BIN/${args[0]}
  out=$(env PCIDEVICE_INTEL_COM_SRIOV_ACCESS=0000:3b:02.1 PCIDEVICE_INTEL_COM_SRIOV_UPLINK=0000:3b:0a.1 \
          "${args[@]}" --check-config 2>&1)
  if (($(nproc) >= 3)); then
    expect_match "$out" "configuration valid" "lab's args on a host with $(nproc) CPUs" || rc=1
  else
    expect_match "$out" "--cores auto:2: needs 3 cores, the affinity mask has $(nproc)" "lab's args on a host with $(nproc) CPUs" || rc=1
  fi
  # spec.dataplane.numaNode reaches the dataplane, which checks its cores against it.
  [[ $numa == . ]] || expect_eq "$(k get sts real-dataplane -o json | jq -r '.spec.template.spec.containers[0].args | index("--numa-node") as $i | .[$i + 1]')" \
    0 "real's --numa-node" || rc=1
  eventually 30 k get sts numa-far-dataplane || return 1
  mapfile -d '' args < <(container_args numa-far-dataplane "POD_NAME=numa-far-dataplane-0")
  args[0]=$RELEASE_BIN/${args[0]}
  if out=$(env PCIDEVICE_INTEL_COM_SRIOV_ACCESS=0000:3b:02.1 PCIDEVICE_INTEL_COM_SRIOV_UPLINK=0000:3b:0a.1 \
             "${args[@]}" --check-config 2>&1); then
    echo "ACCEPTED a NUMA node the host does not have: $out"; rc=1
  else
    expect_match "$out" "--numa-node [0-9]+: worker core [0-9]+ is on NUMA node [0-9]+" "refusal names --numa-node" || rc=1
  fi
  k delete bng numa-far --wait=false
  return $rc
}

# A real kbng-control (loopback API, the operator told by --control-url-override) with a real
# kbng-dataplane on veths in network namespaces and real DHCP clients: the counts and the
# dataplane's identity reach the BNG's status, the sessions by plan reach the SubscriberPlan,
# and deleting the BNG drains the control through its API.
t_real_control_reports_to_status_and_drains() {
  local rc=0 sock=$WORK/real-dp.sock api=127.0.0.1:$REAL_API_PORT s
  topology_up || return 1
  client c1 02:00:00:00:0e:01 || return 1
  client c2 02:00:00:00:0e:02 || return 1
  ip netns exec "$(ns dut)" "$RELEASE_BIN/kbng-dataplane" --cores 0,1 \
    --access net_af_packet0,iface=d0 --uplink net_af_packet1,iface=d1 \
    --no-huge --no-pci -m 512 --no-shconf --uplink-address 192.0.2.254/24 --next-hop 192.0.2.1 \
    --sessions 4096 --plans 16 --grpc-listen "unix:$sock" --dataplane-id real-dataplane-0 \
    >"$WORK/real-dataplane.log" 2>&1 &
  REAL_PIDS+=($!)
  # Its subscriber records from a ConfigMap too: the operator names the file in the
  # generated configuration, and SubscribersInForce reports what the control makes of it.
  k patch bng real --type merge -p '{"spec":{"aaa":{"subscribers":{"configMap":"lab-subscribers","key":"records.csv"}}}}' >/dev/null || return 1
  eventually 30 bash -c "kubectl -n $NS get cm real-control -o json | jq -e '.data[\"control.json\"] | fromjson | .subscribersFile' >/dev/null" || return 1
  # The ConfigMap the operator wrote, as generated; only what is pod-local is pointed at this
  # host: the cap file's path, the store, the API address, the dataplane's socket, the
  # subscribers file (the kubelet's mount, here a copy of the ConfigMap's key).
  config_map_files real-control "$WORK/real-cm" || return 1
  config_map_files lab-subscribers "$WORK/real-subs" || return 1
  # The API token the operator made for this BNG: the control reads it as the pod would, and
  # the operator presents it on every call.
  k get secret real-control-api -o jsonpath='{.data.token}' | base64 -d >"$WORK/real-token" || return 1
  expect_match "$(cat "$WORK/real-token")" '^[0-9a-f]{64}$' "the operator's API token: 32 random bytes" || rc=1
  local auth=(-H "Authorization: Bearer $(cat "$WORK/real-token")")
  jq --arg dir "$WORK/real-cm" --arg token "$WORK/real-token" --arg subs "$WORK/real-subs/records.csv" \
    '.licence.file = "\($dir)/licence.json" | .licence.publicKeyFile = "\($dir)/licence-public.key" | .apiTokenFile = $token |
     .subscribersFile = $subs' \
    "$WORK/real-cm/control.json" >"$WORK/real-control.json"
  "$RELEASE_BIN/kbng-control" --config "$WORK/real-control.json" --store "$WORK/real.redb" \
    --api-listen "$api" --dataplane "unix:$sock" >"$WORK/real-control.log" 2>&1 &
  REAL_PIDS+=($!)
  eventually 30 bash -c "curl -sf ${auth[*]@Q} http://$api/v1/dataplanes | grep -q '\"connected\":true'" || {
    tail -5 "$WORK/real-dataplane.log" "$WORK/real-control.log"; return 1; }
  # Without the token the API answers 401, except the readiness probe's path; kbngctl
  # presents it from --token-file.
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://$api/v1/status")" 401 "the API without the token" || rc=1
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://$api/v1/ready")" 200 "the readiness path without it" || rc=1
  "$BIN/kbngctl" --server "http://$api" --token-file "$WORK/real-token" status >/dev/null ||
    { echo "kbngctl with the token failed"; rc=1; }
  expect_match "$("$BIN/kbngctl" --server "http://$api" status 2>&1)" '401' "kbngctl without the token is told 401" || rc=1
  # A leaked token is rotated by deleting the Secret: the operator makes a new one, the
  # kubelet updates the mounted file (done here by hand), and the running control takes it.
  local old_token new_token
  old_token=$(cat "$WORK/real-token")
  k delete secret real-control-api >/dev/null || rc=1
  eventually 60 bash -c "kubectl -n $NS get secret real-control-api -o jsonpath='{.data.token}' | base64 -d | grep -qvx '$old_token'" || rc=1
  new_token=$(k get secret real-control-api -o jsonpath='{.data.token}' | base64 -d)
  expect_match "$new_token" '^[0-9a-f]{64}$' "the recreated API token" || rc=1
  printf '%s\n' "$new_token" >"$WORK/real-token.new" && mv "$WORK/real-token.new" "$WORK/real-token"
  eventually 20 bash -c "curl -sf -H 'Authorization: Bearer $new_token' http://$api/v1/status >/dev/null" || rc=1
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $old_token" "http://$api/v1/status")" 401 \
    "the old token after the rotation" || rc=1
  auth=(-H "Authorization: Bearer $new_token")
  # c1 a known subscriber on basic-50m, c2 unknown (captive).
  curl -sf "${auth[@]}" -X POST --data-binary $'mac,circuit_id,remote_id,plan\n02:00:00:00:0e:01,,,basic-50m\n' \
    "http://$api/v1/subscribers?format=csv" || rc=1
  local c
  for c in c1 c2; do
    inns "$c" timeout 30 udhcpc -i e0 -n -q -f -s /bin/true >>"$WORK/real-clients.log" 2>&1 ||
      { echo "no lease for $c"; tail -5 "$WORK/real-clients.log"; rc=1; }
  done
  curl -s "${auth[@]}" "http://$api/v1/status" | jq -c '{sessions, sessionsByPlan}'
  eventually 60 jq_true k get bng real -o json -- \
    '.status.sessions == {"active": 1, "captive": 1, "total": 2, "cap": 1000}' || rc=1
  # Pool use as the control reports it: both leases in the sample's pool.
  eventually 30 jq_true k get bng real -o json -- '.status.pools[0].inUse == 2' || rc=1
  expect_eq "$(k get bng real -o json | jq -cS .status.pools)" "$(curl -s "${auth[@]}" "http://$api/v1/status" | jq -cS .pools)" \
    "pools in BNG status == the control's" || rc=1
  s=$(k get bng real -o json | jq -c '.status.dataplanes[0] | {pod, connected, cores, pciAddresses, node: (.node != null)}')
  expect_eq "$s" '{"pod":"real-dataplane-0","connected":true,"cores":[0,1],"pciAddresses":["vdev:net_af_packet0","vdev:net_af_packet1"],"node":true}' \
    "dataplane identity in BNG status" || rc=1
  expect_eq "$(k get bng real -o json | jq -r '.status.conditions[] | select(.type == "ControlReporting" or .type == "DataplanesConnected") | "\(.type)=\(.status)"' | sort | tr '\n' ' ')" \
    "ControlReporting=True DataplanesConnected=True " "control and dataplane conditions" || rc=1
  eventually 60 jq_true k get subscriberplan basic-50m -o json -- '.status.sessions == 1' || rc=1
  expect_eq "$(k get subscriberplan premium-1g -o jsonpath='{.status.sessions}')" 0 "premium-1g sessions" || rc=1
  # The ConfigMap's two records and c1's added through the API are in force; an edit the
  # control cannot use is reported on the BNG (a Warning event) while the records stay; the
  # content restored, it is in force again.
  local in_force='.status.conditions[] | select(.type == "SubscribersInForce")'
  eventually 60 jq_true k get bng real -o json -- \
    "$in_force | .status == \"True\" and .reason == \"FileInForce\" and .message == \"3 subscriber record(s) in force\"" || rc=1
  cp "$WORK/real-subs/records.csv" "$WORK/real-subs/records.good"
  printf 'mac,circuit_id,remote_id,plan\n02:00:00:00:00:01,,,\nnot-a-mac,,,\n' >"$WORK/real-subs/records.next"
  mv "$WORK/real-subs/records.next" "$WORK/real-subs/records.csv"
  subscribers_not_in_force FileRejected 'the 3 record\\(s\\) read before it stay in force: .*row 3: bad MAC' || rc=1
  expect_eq "$(curl -s "${auth[@]}" "http://$api/v1/subscribers/02:00:00:00:00:02" | jq -c .)" '{"mac":"02:00:00:00:00:02"}' \
    "a record the rejected edit dropped, still in force" || rc=1
  mv "$WORK/real-subs/records.good" "$WORK/real-subs/records.csv"
  eventually 90 jq_true k get bng real -o json -- "$in_force | .status == \"True\"" || rc=1
  # An edit that would drop most records is held, not applied (FileHeld, a Warning event),
  # until kbngctl accepts it; maxRemovalPercent reaches the generated configuration.
  cp "$WORK/real-subs/records.csv" "$WORK/real-subs/records.good"
  # (The ConfigMap's key ends without a newline; a blank line is skipped.)
  { cat "$WORK/real-subs/records.good"; echo; for i in $(seq 10 29); do echo "02:00:00:00:0f:$i,,,"; done; } >"$WORK/real-subs/records.next"
  mv "$WORK/real-subs/records.next" "$WORK/real-subs/records.csv"
  eventually 90 jq_true k get bng real -o json -- "$in_force | .message == \"23 subscriber record(s) in force\"" || rc=1
  cp "$WORK/real-subs/records.good" "$WORK/real-subs/records.csv"
  subscribers_not_in_force FileHeld 'removes 20 of the 23 records in force' || rc=1
  expect_match "$("$BIN/kbngctl" --server "http://$api" --token-file "$WORK/real-token" subscribers accept-file 2>&1)" \
    'in force: 3 records, 20 removed' "kbngctl subscribers accept-file" || rc=1
  eventually 90 jq_true k get bng real -o json -- "$in_force | .status == \"True\" and .message == \"3 subscriber record(s) in force\"" || rc=1
  k patch bng real --type merge -p '{"spec":{"aaa":{"subscribers":{"maxRemovalPercent":25}}}}' >/dev/null || rc=1
  eventually 30 bash -c "kubectl -n $NS get cm real-control -o json | jq -e '.data[\"control.json\"] | fromjson | .subscribersMaxRemovalPercent == 25' >/dev/null" || rc=1
  # For argocd_health_checks: the BNG as Argo CD would see it while real processes serve it
  # (given a moment to pass every gate; that check judges what was saved).
  eventually 20 jq_true k get bng real -o json -- '.status.conditions[] | select(.type == "Ready") | .status == "True"' >/dev/null
  mkdir -p "$WORK/argo" && k get bng real -o json >"$WORK/argo/real-bng.json"
  # Deletion drains through the API: the control is asked, and polled until it holds nothing.
  k delete bng real --wait=false || return 1
  eventually 30 not_found bng/real || rc=1
  expect_eq "$(k get events.events.k8s.io -o json | jq -c '[.items[] | select(.regarding.name == "real" and (.reason | test("^Drain"))) | .reason] | unique')" \
    '["Drained","Draining"]' "drain events" || rc=1
  expect_eq "$(curl -s "${auth[@]}" "http://$api/v1/status" | jq -cS .sessions)" '{"active":0,"captive":0,"total":0}' \
    "sessions left in the control" || rc=1
  eventually 30 jq_true k get subscriberplan basic-50m -o json -- '.status.sessions == 0' || rc=1
  return $rc
}

# A BNG whose control never answers settles: no status write loop, no error loop.
t_unreachable_control_is_a_condition_not_a_loop() {
  local rc=0 rv1 rv2
  eventually 20 jq_true k get bng lab -o json -- \
    '.status.conditions[] | select(.type == "ControlReporting") | .status == "False" and .reason == "ControlUnreachable"' || rc=1
  rv1=$(k get bng lab -o jsonpath='{.metadata.resourceVersion}')
  sleep 8
  rv2=$(k get bng lab -o jsonpath='{.metadata.resourceVersion}')
  expect_eq "$rv2" "$rv1" "BNG lab unchanged over 8 s (no status write loop)" || rc=1
  if grep -q "reconcile failed" "$WORK"/operator-*.log; then
    echo "reconcile errors:"; grep "reconcile failed" "$WORK"/operator-*.log | tail -5; rc=1
  fi
  return $rc
}

main() {
  trap cleanup EXIT
  log "work folder $WORK, cluster $KBNG_CLUSTER_DIR"
  if ! setup; then
    log "set-up failed"
    echo "0 passed, 1 failed"
    exit 1
  fi
  run_test chart_crds_are_the_generated_crds t_chart_crds_are_the_generated_crds
  run_test helm_lint_strict t_helm_lint_strict
  run_test helm_schema_rejects_bad_values t_helm_schema_rejects_bad_values
  run_test helm_install t_helm_install
  run_test grafana_dashboard_configmap t_grafana_dashboard_configmap
  run_test crds_apply_server_side t_crds_apply_server_side
  needs crds_apply_server_side
  run_test bad_crs_are_refused t_bad_crs_are_refused
  run_test valid_samples_are_accepted t_valid_samples_are_accepted
  needs helm_install
  run_test operator_starts_with_the_charts_config_and_rbac t_operator_starts_with_the_charts_config_and_rbac
  needs operator_starts_with_the_charts_config_and_rbac
  run_test licences_are_verified t_licences_are_verified
  run_test licence_plans_and_bng_produce_the_workloads t_licence_plans_and_bng_produce_the_workloads
  run_test scheduler_places_dataplanes_only_where_they_fit t_scheduler_places_dataplanes_only_where_they_fit
  run_test telemetry_env_reaches_every_workload t_telemetry_env_reaches_every_workload
  run_test monitoring_resources_select_the_real_pods t_monitoring_resources_select_the_real_pods
  run_test network_policies_select_the_real_pods t_network_policies_select_the_real_pods
  run_test bad_input_is_reported_not_retried t_bad_input_is_reported_not_retried
  run_test session_store_claims_follow_the_capacity t_session_store_claims_follow_the_capacity
  run_test plan_edit_reaches_status_and_control_config t_plan_edit_reaches_status_and_control_config
  run_test radius_bng_control_may_read_exactly_its_secret t_radius_bng_control_may_read_exactly_its_secret
  run_test unreachable_control_is_a_condition_not_a_loop t_unreachable_control_is_a_condition_not_a_loop
  run_test real_binaries_accept_the_generated_workloads t_real_binaries_accept_the_generated_workloads
  run_test grpc_tls_secret_reaches_both_real_binaries t_grpc_tls_secret_reaches_both_real_binaries
  run_test real_control_reports_to_status_and_drains t_real_control_reports_to_status_and_drains
  run_test argocd_health_checks t_argocd_health_checks
  run_test operator_killed_mid_reconcile_converges t_operator_killed_mid_reconcile_converges
  run_test only_the_lease_holder_writes t_only_the_lease_holder_writes
  run_test operator_health_endpoints t_operator_health_endpoints
  run_test deleting_the_bng_drains_and_cleans_up t_deleting_the_bng_drains_and_cleans_up
  if [[ -n ${KBNG_E2E_CRD_OVERRIDE:-} ]]; then
    log "WARNING: these results are for the CRDs in $KBNG_E2E_CRD_OVERRIDE, not crds/yaml"
  fi
  if ((FAILED > 0)); then
    log "failed: ${FAILURES[*]}"
  fi
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0))
}

main "$@"
