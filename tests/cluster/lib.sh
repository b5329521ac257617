# shellcheck shell=bash
# Sourced by build.sh, up.sh, down.sh, nodes.sh and smoke.sh: where the
# machine-level cache lives, how its key is made, and small helpers.
# Not executable on its own.

KBNG_CLUSTER_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KBNG_CACHE=${KBNG_CACHE:-/var/cache/kbng}
KBNG_CLUSTER_DIR=${KBNG_CLUSTER_DIR:-/tmp/kbng-cluster}
KBNG_GO=${KBNG_GO:-/usr/local/go/bin/go}
# Bump when build.sh changes how binaries are built (flags, ldflags) so the
# cache key changes even though no go.mod/go.sum did.
KBNG_BUILD_REV=1

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The Go toolchain and caches every build uses. Both caches live under the
# machine-level cache so deleting KBNG_CACHE loses nothing but time.
go_env() {
  export GOMODCACHE="$KBNG_CACHE/go/mod"
  export GOCACHE="$KBNG_CACHE/go/build"
  # -modcacherw: the module cache is then deletable by a plain rm -rf.
  export GOFLAGS="-modcacherw -buildvcs=false -mod=readonly"
  export GOTOOLCHAIN=local CGO_ENABLED=0
}

# modver DIR MODULE: the version of MODULE that wrapper module DIR requires.
# The wrapper go.mod files are the single source of truth for versions.
modver() {
  awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$KBNG_CLUSTER_HERE/go/$1/go.mod"
}

K8S_VERSION=$(modver kube k8s.io/kubernetes)
ETCD_VERSION=$(modver etcd go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(modver kwok sigs.k8s.io/kwok)
HELM_VERSION=$(modver helm helm.sh/helm/v3)

# versions_key: names the cache folder. Versions for people to read, plus a
# hash of the wrapper modules (a changed go.sum means different bits) and of
# the build revision and Go version.
versions_key() {
  local h gover
  gover=$("$KBNG_GO" env GOVERSION)
  h=$(cat "$KBNG_CLUSTER_HERE"/go/*/go.mod "$KBNG_CLUSTER_HERE"/go/*/go.sum \
        <(echo "rev=$KBNG_BUILD_REV $gover") | sha256sum | cut -c1-10)
  echo "k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}_${gover}_${h}"
}

bin_dir() { echo "$KBNG_CACHE/k8s/$(versions_key)/bin"; }

# The binaries the harness needs, each with the arguments that print its
# version without touching a cluster.
# shellcheck disable=SC2034 # used by build.sh
declare -A KBNG_VERSION_ARGS=(
  [etcd]="--version"
  [kube-apiserver]="--version"
  [kube-controller-manager]="--version"
  [kube-scheduler]="--version"
  [kubectl]="version --client"
  [kwok]="--version"
  [helm]="version --short"
)
