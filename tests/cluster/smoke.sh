#!/usr/bin/env bash
# Smoke test of the cluster harness: brings the cluster up, proves the
# control plane works end to end, tears it down on exit. Checks:
#   - the apiserver serves v1.x we built; kwok fake nodes are Ready with
#     their hugepages and SR-IOV VFs
#   - namespaces and service accounts (controller-manager) work
#   - a CRD's CEL rule (x-kubernetes-validations) refuses a bad object and
#     admits a good one
#   - a Deployment asking for hugepages + VFs becomes pods that the scheduler
#     binds only to SR-IOV nodes and kwok makes Running; deleting it
#     garbage-collects them
#   - the same pod pinned to the plain node, and a pod asking for more VFs
#     than any node has, stay Pending with FailedScheduling naming the
#     missing resources
#   - helm talks to the cluster: install of a generated chart, --wait
# Prints "N passed, M failed" last; exits non-zero on the first failure.
# KBNG_KEEP_CLUSTER=1 leaves the cluster up afterwards for a look around.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NS=kbng-smoke
PASSED=0
WORK=$(mktemp -d)

# --- reporting -----------------------------------------------------------

fail() {
  log "FAIL: $*"
  if [[ -f $KBNG_CLUSTER_DIR/env ]]; then
    kubectl get nodes,pods -A -o wide >&2 || true
    kubectl get events -n "$NS" >&2 || true
    # The state folder goes with the teardown; keep the evidence in the output.
    local f
    for f in "$KBNG_CLUSTER_DIR"/logs/*.log; do
      log "last lines of $f:"
      tail -n 15 "$f" >&2
    done
  fi
  echo "$PASSED passed, 1 failed"
  exit 1
}

# check DESCRIPTION CMD...: CMD must succeed.
check() {
  local desc=$1; shift
  if "$@"; then
    PASSED=$((PASSED + 1))
    log "ok $PASSED - $desc"
  else
    fail "$desc"
  fi
}

# eventually SECONDS CMD...: CMD succeeds within SECONDS.
eventually() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

teardown() {
  local rc=$?
  rm -rf "$WORK"
  if [[ ${KBNG_KEEP_CLUSTER:-} == 1 ]]; then
    log "leaving the cluster up: source $KBNG_CLUSTER_DIR/env"
  else
    "$KBNG_CLUSTER_HERE/down.sh" || true
  fi
  exit "$rc"
}

# --- the checks ----------------------------------------------------------

server_version_is() {
  [[ $(kubectl version -o json | jq -r .serverVersion.gitVersion) == "$1" ]]
}

node_has() { # NODE RESOURCE VALUE
  [[ $(kubectl get node "$1" -o jsonpath="{.status.allocatable.${2//./\\.}}") == "$3" ]]
}

namespace_works() {
  kubectl create namespace "$NS" >/dev/null &&
    # The serviceaccount controller creates "default" in every namespace;
    # pods cannot be admitted without it.
    eventually 30 kubectl -n "$NS" get serviceaccount default
}

# A CRD whose CEL rule ties two fields together, the way kbng's CRDs do.
apply_crd() {
  cat >"$WORK/crd.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: vlanranges.smoke.kbng.test
spec:
  group: smoke.kbng.test
  names: {kind: VlanRange, plural: vlanranges, singular: vlanrange}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [first, last]
            properties:
              first: {type: integer, minimum: 1, maximum: 4094}
              last: {type: integer, minimum: 1, maximum: 4094}
            x-kubernetes-validations:
            - rule: self.first <= self.last
              message: first must not exceed last
EOF
  kubectl apply -f "$WORK/crd.yaml" >/dev/null &&
    kubectl wait --for=condition=Established crd/vlanranges.smoke.kbng.test --timeout=30s >/dev/null
}

vlanrange() { # NAME FIRST LAST
  kubectl -n "$NS" apply -f - <<EOF
apiVersion: smoke.kbng.test/v1
kind: VlanRange
metadata: {name: $1}
spec: {first: $2, last: $3}
EOF
}

cel_refuses_bad_object() {
  local out
  if out=$(vlanrange backwards 200 100 2>&1); then
    log "the API server accepted a VlanRange with first > last"
    return 1
  fi
  [[ $out == *"first must not exceed last"* ]] || { log "refused, but not by the rule: $out"; return 1; }
}

cel_admits_good_object() { vlanrange ok 100 200 >/dev/null; }

# A dataplane-shaped Deployment: hugepages need cpu or memory alongside, and
# hugepages and extended resources need limits equal to requests.
apply_dataplane() {
  kubectl -n "$NS" apply -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: dataplane}
spec:
  replicas: 3
  selector: {matchLabels: {app: dataplane}}
  template:
    metadata: {labels: {app: dataplane}}
    spec:
      containers:
      - name: dataplane
        image: kbng/dataplane:never-pulled
        resources:
          requests: &res
            cpu: "2"
            memory: 1Gi
            hugepages-1Gi: 2Gi
            intel.com/sriov_access: "1"
          limits: *res
EOF
}

pods_of() { kubectl -n "$NS" get pods -l "app=$1" -o json; }

dataplane_running() {
  [[ $(pods_of dataplane | jq '[.items[] | select(.status.phase == "Running")] | length') == 3 ]]
}

# Every dataplane pod sits on a node labelled SR-IOV capable, none elsewhere.
dataplane_on_sriov_nodes_only() {
  local node bad=0
  for node in $(pods_of dataplane | jq -r '.items[].spec.nodeName'); do
    if [[ $(kubectl get node "$node" -o jsonpath='{.metadata.labels.feature\.node\.kubernetes\.io/network-sriov\.capable}') != true ]]; then
      log "dataplane pod on $node, which has no VFs"
      bad=1
    fi
  done
  return "$bad"
}

deployment_available() {
  [[ $(kubectl -n "$NS" get deployment dataplane -o jsonpath='{.status.availableReplicas}') == 3 ]]
}

# The same pod pinned to the plain node: the scheduler must refuse it there
# for the node's lack of hugepages and VFs, not for anything else.
apply_pinned_to_plain() {
  kubectl -n "$NS" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: dataplane-on-plain}
spec:
  nodeSelector: {kubernetes.io/hostname: kbng-plain-a}
  containers:
  - name: dataplane
    image: kbng/dataplane:never-pulled
    resources:
      requests: &res {cpu: "2", memory: 1Gi, hugepages-1Gi: 2Gi, intel.com/sriov_access: "1"}
      limits: *res
EOF
}

# failed_scheduling_says POD TEXT...: a FailedScheduling event for POD
# names every TEXT.
failed_scheduling_says() {
  local pod=$1 msg t; shift
  msg=$(kubectl -n "$NS" get events -o jsonpath='{.items[*].message}' \
          --field-selector "involvedObject.name=$pod,reason=FailedScheduling")
  for t in "$@"; do [[ $msg == *"$t"* ]] || return 1; done
}

unbound_pending() { # POD
  [[ $(kubectl -n "$NS" get pod "$1" -o jsonpath='{.status.phase}/{.spec.nodeName}') == Pending/ ]]
}

apply_oversized_pod() {
  kubectl -n "$NS" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: too-many-vfs}
spec:
  containers:
  - name: dataplane
    image: kbng/dataplane:never-pulled
    resources:
      requests: &res {cpu: "1", memory: 1Gi, intel.com/sriov_access: "9"}
      limits: *res
EOF
}


gc_removes_pods() {
  kubectl -n "$NS" delete deployment dataplane --wait=false >/dev/null &&
    eventually 60 no_dataplane_pods
}
no_dataplane_pods() { [[ $(pods_of dataplane | jq '.items | length') == 0 ]]; }

helm_version_is() { [[ $(helm version --short) == "$1"* ]]; }

helm_installs_chart() {
  helm create "$WORK/chart" >/dev/null &&
    helm install smoke "$WORK/chart" -n "$NS" --wait --timeout 90s >/dev/null &&
    [[ $(helm status smoke -n "$NS" -o json | jq -r .info.status) == deployed ]]
}

main() {
  trap teardown EXIT
  "$KBNG_CLUSTER_HERE/up.sh"
  # shellcheck source=/dev/null
  source "$KBNG_CLUSTER_DIR/env"

  # The version is the one build.sh stamped in: this shows the server answers and is this
  # cache's build, not which Kubernetes source it came from (build.sh pins that).
  check "apiserver answers /version as this cache's build ($K8S_VERSION)" server_version_is "$K8S_VERSION"
  check "fake nodes created and Ready" "$KBNG_CLUSTER_HERE/nodes.sh"
  check "kbng-sriov-a advertises 8 access VFs" node_has kbng-sriov-a intel.com/sriov_access 8
  check "kbng-plain-a advertises no 1Gi hugepages" node_has kbng-plain-a hugepages-1Gi 0
  check "namespace and its default service account" namespace_works
  check "CRD with a CEL rule is established" apply_crd
  check "CEL rule refuses first > last" cel_refuses_bad_object
  check "CEL rule admits first <= last" cel_admits_good_object
  check "dataplane Deployment applied" apply_dataplane
  check "kwok runs all 3 dataplane pods" eventually 90 dataplane_running
  check "dataplane pods bound to SR-IOV nodes only" dataplane_on_sriov_nodes_only
  check "Deployment reports 3 available" eventually 60 deployment_available
  check "dataplane pod pinned to the plain node applied" apply_pinned_to_plain
  check "plain node refused for hugepages and VFs" eventually 60 failed_scheduling_says \
    dataplane-on-plain "1 Insufficient hugepages-1Gi" "1 Insufficient intel.com/sriov_access"
  check "dataplane-on-plain stays Pending and unbound" unbound_pending dataplane-on-plain
  check "pod asking for 9 VFs applied" apply_oversized_pod
  check "it gets FailedScheduling for VFs on all 3 nodes" eventually 60 failed_scheduling_says \
    too-many-vfs "0/3 nodes are available" "3 Insufficient intel.com/sriov_access"
  check "too-many-vfs stays Pending and unbound" unbound_pending too-many-vfs
  check "deleting the Deployment garbage-collects its pods" gc_removes_pods
  check "helm $HELM_VERSION runs" helm_version_is "$HELM_VERSION"
  check "helm installs a chart and waits for it" helm_installs_chart
  echo "$PASSED passed, 0 failed"
}

main "$@"
