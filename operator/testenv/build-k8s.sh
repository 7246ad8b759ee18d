#!/usr/bin/env bash
# Builds the Kubernetes binaries the operator suite runs (kube-apiserver, etcd, kubectl, helm) from
# the Go module proxy, once, into ~/.cache/magnetar/k8s/bin. There is no Docker engine here, so the
# suite does what controller-runtime's envtest does: a real API server and etcd, no kubelet.
# Idempotent: a binary whose version stamp matches is kept; run it again and it only checks.
#
# Words choose what to build (default: etcd helm kube). `node` adds what `magnetar kube up` runs on
# top of those: kubelet, kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS, and crictl (the
# chaos lab kills containers through the node's CRI with it)
# (`make kube-node` runs `build-k8s.sh etcd kube node`).
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.31.4}"       # kube-apiserver and kubectl; every staging module of it must be on the proxy
ETCD_VERSION="${ETCD_VERSION:-3.5.21}"     # >= 3.5.13, what 1.31 expects
HELM_VERSION="${HELM_VERSION:-3.16.4}"
COREDNS_VERSION="${COREDNS_VERSION:-1.14.7}"  # a release whose module (go 1.25) builds with this Go
CRICTL_VERSION="${CRICTL_VERSION:-1.34.0}"    # speaks CRI v1, as the node's containerd does
CACHE="${MAGNETAR_K8S_CACHE:-$HOME/.cache/magnetar/k8s}"
BIN="$CACHE/bin"
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Lean, reproducible binaries; at most two build jobs so other work on a 2-core machine goes on.
export GOFLAGS="-trimpath -mod=mod"
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOMAXPROCS="${GOMAXPROCS:-2}"
PAR="${GO_BUILD_PARALLELISM:-2}"

# The staging modules k8s.io/kubernetes requires at v0.0.0 and replaces with ./staging/...; a module
# that imports it must replace each with its published v0.<minor>.<patch>.
STAGING="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
csi-translation-lib dynamic-resource-allocation endpointslice kms kube-aggregator kube-controller-manager
kube-proxy kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver"

say() { printf '[k8s-testenv] %s\n' "$*"; }

stamp_ok() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/.$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" >"$BIN/.$1.version"; }

mkdir -p "$BIN"

# A wrapper module that requires k8s.io/kubernetes and builds the upstream commands listed; one per
# group of binaries, so building the node's does not touch the operator suite's module.
kube_module() {
  local mod="$1"; shift
  mkdir -p "$mod"
  for b in "$@"; do
    mkdir -p "$mod/cmd/$b"
    cp "$SRC/kube/cmd/$b/main.go" "$mod/cmd/$b/main.go"
  done
  {
    echo "module magnetar.dev/k8s-testenv"
    echo
    echo "go 1.22"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    for m in $STAGING; do echo "	k8s.io/$m => k8s.io/$m v0.${K8S_VERSION#1.}"; done
    echo ")"
  } >"$mod/go.mod"
  say "resolving modules in $mod (first run downloads them from the module proxy)"
  (cd "$mod" && go mod tidy)
}

kube_ldflags() {
  local minor="${K8S_VERSION#1.}"; minor="${minor%%.*}"
  echo "-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION \
-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
}

# Builds each named command of the wrapper module $1 not already cached at $K8S_VERSION.
kube_build() {
  local mod="$1"; shift
  local b
  for b in "$@"; do
    stamp_ok "$b" "$K8S_VERSION" && { say "$b v$K8S_VERSION: cached"; continue; }
    say "building $b (slow the first time: several minutes on 2 cores)"
    (cd "$mod" && nice -n 10 go build -p "$PAR" -ldflags "$(kube_ldflags)" -o "$BIN/$b.tmp" "./cmd/$b")
    mv "$BIN/$b.tmp" "$BIN/$b"
    stamp "$b" "$K8S_VERSION"
    say "$b: $("$BIN/$b" --version 2>/dev/null || "$BIN/$b" version --client 2>/dev/null | head -1)"
  done
}

build_kube() {
  if stamp_ok kube-apiserver "$K8S_VERSION" && stamp_ok kubectl "$K8S_VERSION"; then
    say "kube-apiserver and kubectl v$K8S_VERSION: cached"
    return
  fi
  local mod="$CACHE/build/kube-$K8S_VERSION"
  kube_module "$mod" kube-apiserver kubectl
  kube_build "$mod" kube-apiserver kubectl
}

# The node `magnetar kube up` runs: the rest of Kubernetes' own binaries, and CoreDNS.
NODE_BINS="kubelet kube-controller-manager kube-scheduler kube-proxy"
build_node() {
  local all=1 b
  for b in $NODE_BINS; do stamp_ok "$b" "$K8S_VERSION" || all=0; done
  if [ "$all" = 1 ]; then
    say "$NODE_BINS v$K8S_VERSION: cached"
  else
    local mod="$CACHE/build/node-$K8S_VERSION"
    kube_module "$mod" $NODE_BINS
    kube_build "$mod" $NODE_BINS
  fi
  build_coredns
  build_crictl
}

build_coredns() {
  if stamp_ok coredns "$COREDNS_VERSION"; then say "coredns v$COREDNS_VERSION: cached"; return; fi
  local mod="$CACHE/build/coredns-$COREDNS_VERSION"
  say "coredns v$COREDNS_VERSION: preparing the wrapper module in $mod"
  mkdir -p "$mod"
  cp "$SRC/coredns/main.go" "$mod/main.go"
  printf 'module magnetar.dev/coredns-testenv\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns v%s\n' \
    "$COREDNS_VERSION" >"$mod/go.mod"
  (cd "$mod" && go mod tidy)
  say "building coredns"
  (cd "$mod" && nice -n 10 go build -p "$PAR" -ldflags "-s -w \
-X github.com/coredns/coredns/coremain.GitCommit=magnetar-v$COREDNS_VERSION" -o "$BIN/coredns.tmp" .)
  mv "$BIN/coredns.tmp" "$BIN/coredns"
  stamp coredns "$COREDNS_VERSION"
  say "coredns: $("$BIN/coredns" -version | head -1)"
}

build_crictl() {
  if stamp_ok crictl "$CRICTL_VERSION"; then say "crictl v$CRICTL_VERSION: cached"; return; fi
  say "building crictl v$CRICTL_VERSION"
  GOBIN="$BIN" nice -n 10 go install -p "$PAR" -ldflags "-s -w \
-X sigs.k8s.io/cri-tools/pkg/version.Version=v$CRICTL_VERSION" "sigs.k8s.io/cri-tools/cmd/crictl@v$CRICTL_VERSION"
  stamp crictl "$CRICTL_VERSION"
  say "crictl: $("$BIN/crictl" --version)"
}

build_etcd() {
  if stamp_ok etcd "$ETCD_VERSION"; then say "etcd v$ETCD_VERSION: cached"; return; fi
  local mod="$CACHE/build/etcd-$ETCD_VERSION"
  say "etcd v$ETCD_VERSION: preparing the wrapper module in $mod"
  mkdir -p "$mod"
  cp "$SRC/etcd/main.go" "$mod/main.go"
  printf 'module magnetar.dev/etcd-testenv\n\ngo 1.22\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' \
    "$ETCD_VERSION" >"$mod/go.mod"
  (cd "$mod" && go mod tidy)
  say "building etcd"
  (cd "$mod" && nice -n 10 go build -p "$PAR" -ldflags "-s -w \
-X go.etcd.io/etcd/api/v3/version.GitSHA=magnetar-testenv" -o "$BIN/etcd.tmp" .)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  stamp etcd "$ETCD_VERSION"
  say "etcd: $("$BIN/etcd" --version | head -1)"
}

build_helm() {
  if stamp_ok helm "$HELM_VERSION"; then say "helm v$HELM_VERSION: cached"; return; fi
  say "building helm v$HELM_VERSION"
  GOBIN="$BIN" nice -n 10 go install -p "$PAR" -ldflags "-s -w \
-X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  stamp helm "$HELM_VERSION"
  say "helm: $("$BIN/helm" version --short)"
}

command -v go >/dev/null || { say "Go is needed to build the test binaries (https://go.dev/dl)"; exit 1; }
want="${*:-etcd helm kube}"
for w in $want; do "build_$w"; done
say "done: $BIN"
