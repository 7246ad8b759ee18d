{{- define "magnetar.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "magnetar.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "magnetar.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "magnetar.serviceAccountName" -}}
{{- default (include "magnetar.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The rules the operator needs, and no more: its own resources, the objects a cluster
becomes and its Secrets, pods to restart them in order, Events, kopf's peering objects, and
PodMonitors. */}}
{{- define "magnetar.rules" -}}
- apiGroups: [magnetar.dev]
  resources: [magnetarclusters, magnetarnamespaces, magnetarbundles]
  verbs: [get, list, watch, patch, update]
- apiGroups: [magnetar.dev]
  resources: [magnetarbundles]
  verbs: [create, delete]
- apiGroups: [magnetar.dev]
  resources: [magnetarclusters/status, magnetarnamespaces/status, magnetarbundles/status]
  verbs: [get, patch, update]
# delete: a change to a field a StatefulSet cannot update is made by deleting it, its pods
# orphaned (left running), and making it again
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, create, patch, update, delete]
# statefulsets/scale: autoscaled brokers, scaled on their load reports
- apiGroups: [apps]
  resources: [statefulsets/scale]
  verbs: [get, patch, update]
# the brokers' HorizontalPodAutoscaler (a CPU autoscaling target), deleted when the target changes
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [services, configmaps]
  verbs: [get, list, watch, create, patch, update]
# The Secrets of the clusters it runs (token signing key, tokens, CA and certificates): made,
# read and renewed by name; never listed or watched.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, update, patch]
# delete: restarts in order; patch: a bookie pod's rack annotation, from its node's zone
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, delete, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch, update]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [kopf.dev]
  resources: [kopfpeerings]
  verbs: [get, list, watch, patch]
# A PodMonitor per component, where the Prometheus Operator's CRDs exist (the operator asks the
# API server's discovery first, and makes none otherwise).
- apiGroups: [monitoring.coreos.com]
  resources: [podmonitors]
  verbs: [get, list, watch, create, patch, update]
{{- end -}}
