#!/usr/bin/env bash
# Create the fake telco worker Nodes of nodes.yaml in the cluster that up.sh
# started, and wait until kwok reports them Ready with the allocatable
# resources they were created with.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ -f $KBNG_CLUSTER_DIR/env ]] || die "no cluster in $KBNG_CLUSTER_DIR; run tests/cluster/up.sh first"
# shellcheck source=/dev/null
source "$KBNG_CLUSTER_DIR/env"

# jsonpath for an allocatable resource whose name has dots (intel.com/...).
allocatable() {
  kubectl get node "$1" -o jsonpath="{.status.allocatable.${2//./\\.}}"
}

main() {
  kubectl apply -f "$KBNG_CLUSTER_HERE/nodes.yaml" >&2
  kubectl wait --for=condition=Ready node -l kwok.x-k8s.io/node=fake --timeout=60s >&2
  # The status in nodes.yaml must survive creation and kwok's initialise
  # stage; otherwise a scheduling test would pass or fail for the wrong reason.
  [[ $(allocatable kbng-sriov-a hugepages-1Gi) == 16Gi &&
     $(allocatable kbng-sriov-a intel.com/sriov_access) == 8 ]] ||
    die "kbng-sriov-a lost its allocatable hugepages/VFs: $(kubectl get node kbng-sriov-a -o jsonpath='{.status.allocatable}')"
  log "fake nodes ready: $(kubectl get nodes -l kwok.x-k8s.io/node=fake -o name | tr '\n' ' ')"
}

main "$@"
