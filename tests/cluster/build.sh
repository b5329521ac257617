#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# kwok and helm from Go modules into the machine-level cache
#   ${KBNG_CACHE:-/var/cache/kbng}/k8s/<versions-key>/bin
# and print that folder on stdout (logs go to stderr).
#
# Idempotent: when every binary for the key exists and reports the expected
# version it does nothing. Safe to lose: delete the cache and it rebuilds.
# Versions come from the wrapper modules in go/*/go.mod; nothing is downloaded
# but Go modules through the module proxy.
#
# Env: KBNG_CACHE (cache root), KBNG_GO (go binary), KBNG_BUILD_JOBS (go build
# -p, default 2), KBNG_NICE (niceness, default 10: other developers' builds
# share this machine).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

JOBS=${KBNG_BUILD_JOBS:-2}
NICE=${KBNG_NICE:-10}

# binaries_ok DIR: every binary is present, runs, and names the version we pin.
binaries_ok() {
  local dir=$1 name want out
  [[ -s $dir/../etc/kwok-stages.yaml ]] || return 1
  for name in "${!KBNG_VERSION_ARGS[@]}"; do
    [[ -x $dir/$name ]] || return 1
    want=$(want_version "$name")
    # shellcheck disable=SC2086 # the version arguments are split on purpose
    out=$("$dir/$name" ${KBNG_VERSION_ARGS[$name]} 2>&1) || return 1
    if [[ $out != *"${want#v}"* ]]; then
      log "$name reports '$out', expected $want"
      return 1
    fi
  done
}

want_version() {
  case $1 in
    etcd) echo "$ETCD_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    *) echo "$K8S_VERSION" ;;
  esac
}

# k8s.io/kubernetes v1.X.Y must be paired with staging modules v0.X.Y; a
# mismatch compiles or not by luck, so refuse it up front.
check_staging_pins() {
  local want="v0.${K8S_VERSION#v1.}" bad
  bad=$(awk -v w="$want" '$2 == "=>" && $1 ~ /^k8s\.io\// && $4 != w { print $1 " => " $4 }' \
          "$KBNG_CLUSTER_HERE/go/kube/go.mod")
  [[ -z $bad ]] || die "go/kube/go.mod: staging replaces must all be $want, found: $bad"
}

# gobuild WRAPPER OUT LDFLAGS PKG...: build PKGs from wrapper module WRAPPER.
gobuild() {
  local wrapper=$1 out=$2 ldflags=$3; shift 3
  log "building $* (from go/$wrapper)"
  (cd "$KBNG_CLUSTER_HERE/go/$wrapper" &&
     nice -n "$NICE" "$KBNG_GO" build -p "$JOBS" -trimpath -ldflags "$ldflags" -o "$out/" "$@")
}

build_kube() {
  local out=$1 minor ld="-s -w" pkg
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  # Without these the binaries report v0.0.0-master and clients may refuse
  # the server; kubectl reads client-go's copy, the servers component-base's.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean"
  done
  gobuild kube "$out" "$ld" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
}

build_etcd() {
  # The main package is the module root; go build names the binary after the
  # last path element ("v3"), so build it to an explicit file name.
  log "building etcd $ETCD_VERSION (from go/etcd)"
  (cd "$KBNG_CLUSTER_HERE/go/etcd" &&
     nice -n "$NICE" "$KBNG_GO" build -p "$JOBS" -trimpath -ldflags "-s -w" \
       -o "$1/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
  gobuild kwok "$1" "-s -w" sigs.k8s.io/kwok/cmd/kwok
}

# The kwok binary alone has no stages (kwokctl normally supplies them): without
# them it refuses to start. Take kwok's own "fast" node/pod stages plus the
# lease heartbeat from the same module version, so they match the binary.
write_kwok_stages() {
  local out=$1 dir f
  dir=$(cd "$KBNG_CLUSTER_HERE/go/kwok" && "$KBNG_GO" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  mkdir -p "$(dirname "$out")"
  for f in node/fast/node-initialize.yaml \
           node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$dir/kustomize/stage/$f"
  done > "$out"
}

build_helm() {
  local minor v="helm.sh/helm/v3" ld="-s -w"
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  ld+=" -X $v/internal/version.version=$HELM_VERSION -X $v/internal/version.gitTreeState=clean"
  # The Kubernetes version helm assumes offline (helm template, helm lint):
  # the cluster version this harness runs, not helm's default of 1.20.
  ld+=" -X $v/pkg/chartutil.k8sVersionMajor=1 -X $v/pkg/chartutil.k8sVersionMinor=$minor"
  ld+=" -X $v/pkg/lint/rules.k8sVersionMajor=1 -X $v/pkg/lint/rules.k8sVersionMinor=$minor"
  gobuild helm "$1" "$ld" helm.sh/helm/v3/cmd/helm
}

main() {
  go_env
  [[ -x $KBNG_GO ]] || die "no Go toolchain at $KBNG_GO (set KBNG_GO)"
  local bin root partial start
  bin=$(bin_dir)
  root=$(dirname "$bin")
  mkdir -p "$root"
  # Two runs at once (CI and a developer) wait for each other instead of
  # building the same thing twice.
  exec 9>"$root/build.lock"
  flock 9
  if binaries_ok "$bin"; then
    log "up to date: $bin"
    echo "$bin"
    return
  fi
  check_staging_pins
  start=$SECONDS
  partial="$root/bin.partial"
  rm -rf "$partial"
  mkdir -p "$partial"
  build_kube "$partial"
  build_etcd "$partial"
  build_kwok "$partial"
  build_helm "$partial"
  write_kwok_stages "$root/etc/kwok-stages.yaml"
  binaries_ok "$partial" || die "built binaries fail their version check (see above)"
  # Publish atomically: bin/ either holds a complete set or does not exist.
  rm -rf "$bin"
  mv "$partial" "$bin"
  log "built in $((SECONDS - start))s: $bin"
  echo "$bin"
}

main "$@"
