"""`magnetar kube up | down | status`: a real single-node Kubernetes from upstream components run as
processes on this machine, as Kubernetes' own ``hack/local-up-cluster.sh`` runs them."""
