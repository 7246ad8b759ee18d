#!/usr/bin/env bash
# The kind walkthrough of docs/guides/kubernetes.md ("Step by step on a local kind cluster"), run
# step by step as the guide writes it: a cluster, the image built and loaded, the chart installed,
# the examples applied, region-a Ready, a message produced and consumed with the official client
# inside the cluster, then the cluster deleted. .github/workflows/kind.yml runs it on kind.
#
# --node magnetar runs the same steps after the first on a node of `magnetar kube up` instead of
# kind (a machine where kind cannot run): the node comes up in place of `kind create cluster`,
# `make image` builds and imports the images in place of `docker build` and `kind load`, and since
# that node pulls nothing, the official zookeeper:3.9 that the example's cluster names is stood in
# for by make image's ZooKeeper in the official image's layout, imported under that name.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${MAGNETAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/magnetar}"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -1)"
IMAGE="magnetar:$VERSION"
CLUSTER=region-a
# what the example cluster names by default, and the stand-in make image saves for a node
ZOOKEEPER_IMAGE=docker.io/library/zookeeper:3.9
STAND_IN=docker.io/magnetar/zookeeper-official:3.8
STAND_IN_TARBALL="$CACHE/images/official/zookeeper-official-3.8.tar"

usage() {
  cat <<USAGE
usage: scripts/kind-walkthrough.sh [--node kind|magnetar] [--name NAME] [--state-dir DIR]
                                   [--ready-timeout SECONDS] [--keep]

Runs the kind walkthrough of docs/guides/kubernetes.md step by step: creates the cluster, builds
$IMAGE and loads it, helm-installs charts/magnetar, applies examples/k8s/, waits for the
MagnetarCluster $CLUSTER to be Ready, produces and consumes a message with the official
pulsar-client in a broker pod, and deletes the cluster (also when a step fails, after printing
the pods, the cluster's conditions and the logs). Exits non-zero when any step fails.

  --node kind       (default) a kind cluster; needs docker, kind, kubectl and helm
  --node magnetar   a node of \`magnetar kube up\` instead (root; make kube-node done), taken down
                    at the end; \`make image\` builds and imports the images, and the official
                    zookeeper:3.9 is stood in for by make image's magnetar/zookeeper-official:3.8
                    (ZooKeeper from Debian in the official image's layout) under that name
  --name NAME       the kind cluster's name (default magnetar)
  --state-dir DIR   --node magnetar: the node's state directory (default: a new one under /tmp;
                    the node's logs stay there after it is down)
  --ready-timeout S how long region-a may take to be Ready (default 300)
  --keep            leave the cluster (or node) running at the end

Examples:
  scripts/kind-walkthrough.sh
  scripts/kind-walkthrough.sh --keep && kubectl get mgc
  sudo flock /tmp/kube-node.lock scripts/kind-walkthrough.sh --node magnetar
USAGE
}

NODE=kind
NAME=magnetar
STATE_DIR=""
READY_TIMEOUT=300
KEEP=0
while (($#)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --node) NODE="${2:?--node kind|magnetar}"; shift ;;
    --name) NAME="${2:?--name NAME}"; shift ;;
    --state-dir) STATE_DIR="${2:?--state-dir DIR}"; shift ;;
    --ready-timeout) READY_TIMEOUT="${2:?--ready-timeout SECONDS}"; shift ;;
    --keep) KEEP=1 ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done
case "$NODE" in kind | magnetar) ;; *) usage >&2; exit 2 ;; esac

STARTED=$SECONDS
STEP=0
step() {
  STEP=$((STEP + 1))
  printf '\n==> [%ds] step %d: %s\n' "$((SECONDS - STARTED))" "$STEP" "$*"
}
# Each command of the guide, shown as it runs.
run() {
  printf '$ %s\n' "$*"
  "$@"
}

CREATED=0
diagnose() {
  echo "--- pods, claims and Magnetar resources"
  kubectl get pods,pvc,mgc,mgns -A -o wide || true
  echo "--- kubectl describe mgc $CLUSTER"
  kubectl describe mgc "$CLUSTER" || true
  echo "--- the operator's log (last 60 lines)"
  kubectl logs -n magnetar deploy/magnetar --tail=60 || true
  echo "--- ZooKeeper's log (last 40 lines)"
  kubectl logs "$CLUSTER-zookeeper-0" --tail=40 || true
  kubectl logs "$CLUSTER-zookeeper-0" --previous --tail=40 2>/dev/null || true
}
finish() {
  local status=$?
  if ((status != 0 && CREATED)); then
    echo "step $STEP failed (exit $status)" >&2
    diagnose
  fi
  if ((CREATED && !KEEP)); then
    step "delete the cluster"
    if [ "$NODE" = kind ]; then
      run kind delete cluster --name "$NAME" || status=1
    else
      run "$MAGNETAR" kube down --state-dir "$STATE_DIR" || status=1
    fi
  elif ((CREATED)); then
    echo "left running (--keep): KUBECONFIG=${KUBECONFIG:-~/.kube/config}"
  fi
  printf '\n%s in %ds\n' "$( ((status == 0)) && echo "walkthrough passed" || echo "walkthrough FAILED")" \
    "$((SECONDS - STARTED))"
  exit "$status"
}
trap finish EXIT

cd "$ROOT"
if [ "$NODE" = magnetar ]; then
  MAGNETAR="$ROOT/.venv/bin/magnetar"
  [ -x "$MAGNETAR" ] || MAGNETAR=magnetar
  export PATH="$CACHE/k8s/bin:$PATH"
  STATE_DIR="${STATE_DIR:-$(mktemp -d /tmp/kind-walkthrough.XXXXXX)/state}"
  export KUBECONFIG="$STATE_DIR/kubeconfig"
  SOCKET="$STATE_DIR/containerd/containerd.sock"
fi

step "create a cluster"
if [ "$NODE" = kind ]; then
  CREATED=1
  run kind create cluster --name "$NAME"
else
  CREATED=1
  run "$MAGNETAR" kube up --state-dir "$STATE_DIR"
fi

step "build the image and load it into the cluster"
if [ "$NODE" = kind ]; then
  run docker build -t "$IMAGE" .
  run kind load docker-image "$IMAGE" --name "$NAME"
else
  # make image: the same Dockerfile on a base of Debian's packages, every tarball imported here
  run env MAGNETAR_CONTAINERD_SOCKET="$SOCKET" bash images/build.sh
  run ctr --address "$SOCKET" -n k8s.io images import --all-platforms "$STAND_IN_TARBALL"
  run ctr --address "$SOCKET" -n k8s.io images tag --force "$STAND_IN" "$ZOOKEEPER_IMAGE"
fi

step "install the chart (the operator)"
run helm install magnetar charts/magnetar --namespace magnetar --create-namespace --wait --timeout 300s

step "apply the examples"
run kubectl apply -f examples/k8s/
run kubectl get magnetarclusters,magnetarnamespaces,magnetarbundles

step "wait until region-a is Ready"
run kubectl wait --for=condition=Ready "mgc/$CLUSTER" --timeout="${READY_TIMEOUT}s"
run kubectl describe mgc "$CLUSTER"

step "produce and consume a message with the official client, in a broker pod"
printf '$ kubectl exec -i %s-broker-0 -c broker -- python - <<PY ... PY\n' "$CLUSTER"
kubectl exec -i "$CLUSTER-broker-0" -c broker -- python - <<'PY'
import pulsar

# The broker's own token (a superuser's) and the cluster's CA, as the pod mounts them.
token = open("/var/run/secrets/magnetar/token/token").read().strip()
client = pulsar.Client(
    "pulsar+ssl://region-a-broker:6651",
    authentication=pulsar.AuthenticationToken(token),
    tls_trust_certs_file_path="/var/run/secrets/magnetar/tls/ca.crt",
)
consumer = client.subscribe("persistent://public/default/walkthrough", "walkthrough")
client.create_producer("persistent://public/default/walkthrough").send(b"hello from the walkthrough")
message = consumer.receive(timeout_millis=30000)
consumer.acknowledge(message)
print("received:", message.data().decode())
client.close()
PY
