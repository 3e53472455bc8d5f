{{/*
Names, labels and image references shared by every template.
*/}}

{{- define "olm.namespace" -}}
{{- .Release.Namespace -}}
{{- end -}}

{{- define "olm.globalCatalogNamespace" -}}
{{- .Values.globalCatalogNamespace | default .Release.Namespace -}}
{{- end -}}

{{/* Labels every object of the chart carries. */}}
{{- define "olm.labels" -}}
app.kubernetes.io/part-of: olm
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{/* Labels of one component: the common ones plus its name. Call with (list $ "name"). */}}
{{- define "olm.componentLabels" -}}
{{- $root := index . 0 -}}
{{ include "olm.labels" $root }}
app.kubernetes.io/name: {{ index . 1 }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* The selector of one component's pods. Call with (list $ "name"). */}}
{{- define "olm.selector" -}}
app.kubernetes.io/part-of: olm
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/name: {{ index . 1 }}
{{- end -}}

{{/*
An image reference: registry/name, then @digest when one is given, else :tag
(the chart's appVersion by default). Call with (list $ "name" "digestKey" "tag").
*/}}
{{- define "olm.image" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $digest := index $root.Values.images.digests (index . 2) -}}
{{- $tag := index . 3 | default $root.Values.images.tag | default $root.Chart.AppVersion -}}
{{- if $digest -}}
{{- printf "%s/%s@%s" $root.Values.images.registry $name $digest -}}
{{- else -}}
{{- printf "%s/%s:%s" $root.Values.images.registry $name $tag -}}
{{- end -}}
{{- end -}}

{{/* The NATS URL the services connect to, or nothing when the bus is off. */}}
{{- define "olm.natsUrl" -}}
{{- if and (eq .Values.nats.mode "internal") (eq .Values.serviceLookup "cluster-ip") -}}
{{- /* Without cluster DNS: the Service's address from its environment variable. */ -}}
nats://$(OLM_NATS_SERVICE_HOST):4222
{{- else if eq .Values.nats.mode "internal" -}}
nats://olm-nats.{{ .Release.Namespace }}.svc:4222
{{- else if eq .Values.nats.mode "external" -}}
{{- required "nats.externalUrl is required when nats.mode is external" .Values.nats.externalUrl -}}
{{- end -}}
{{- end -}}

{{/* Whether the services authenticate to the chart's NATS with NKeys. */}}
{{- define "olm.natsAuth" -}}
{{- if and (eq .Values.nats.mode "internal") .Values.nats.auth -}}true{{- end -}}
{{- end -}}

{{/*
The pod-level settings every OLM pod shares: restricted pod security and
scheduling. Call with (list $ .Values.<component>).
*/}}
{{- define "olm.podSettings" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- with $root.Values.images.pullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- with ($component.nodeSelector | default $root.Values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with ($component.tolerations | default $root.Values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with ($component.affinity | default $root.Values.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* The container-level restricted security context. */}}
{{- define "olm.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop: [ALL]
{{- end -}}

{{/*
The environment every service reads: its pod (leader election identity),
logging, traces and (when the third element is true) the bus. Call with
(list $ "service" true).
*/}}
{{- define "olm.commonEnv" -}}
{{- $root := index . 0 -}}
{{- $service := index . 1 -}}
{{- $bus := index . 2 -}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
- name: RUST_LOG
  value: {{ $root.Values.logging.level | quote }}
- name: OLM_LOG_FORMAT
  value: {{ $root.Values.logging.format | quote }}
{{- with $root.Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- if $bus }}
{{- with (include "olm.natsUrl" $root) }}
- name: OLM_NATS_URL
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- if and $bus (include "olm.natsAuth" $root) }}
- name: OLM_NATS_NKEY_FILE
  value: /var/run/olm/bus/seed
{{- end }}
{{- end -}}

{{/* The bus credential volume of one service. Call with (list $ "service"). */}}
{{- define "olm.busVolume" -}}
{{- $root := index . 0 -}}
{{- if include "olm.natsAuth" $root }}
- name: bus-credentials
  secret:
    secretName: olm-bus-{{ index . 1 }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "olm.busVolumeMount" -}}
{{- if include "olm.natsAuth" . }}
- name: bus-credentials
  mountPath: /var/run/olm/bus
  readOnly: true
{{- end }}
{{- end -}}

{{/* Probes on the admin server (port 8080). */}}
{{- define "olm.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: admin}
  periodSeconds: 10
  failureThreshold: 6
readinessProbe:
  httpGet: {path: /readyz, port: admin}
  periodSeconds: 5
  failureThreshold: 3
startupProbe:
  httpGet: {path: /healthz, port: admin}
  periodSeconds: 2
  failureThreshold: 60
{{- end -}}

{{/* The NATS server configuration. */}}
{{- define "olm.natsConfig" -}}
{{- $ns := include "olm.namespace" . -}}
{{- $replicas := int .Values.nats.replicas -}}
port: 4222
http: 8222
server_name: $POD_NAME
max_payload: 8MB
jetstream {
  store_dir: /data/jetstream
  max_memory_store: 64MB
  max_file_store: {{ .Values.nats.persistence.size | replace "Gi" "GB" | replace "Mi" "MB" }}
}
{{- if gt $replicas 1 }}
cluster {
  name: olm
  listen: 0.0.0.0:6222
  routes: [
    {{- range $i := until $replicas }}
    nats://olm-nats-{{ $i }}.olm-nats-cluster.{{ $ns }}.svc:6222
    {{- end }}
  ]
}
{{- end }}
{{- if include "olm.natsAuth" . }}
include "auth/auth.conf"
{{- end }}
{{- end -}}

{{/*
Whether samples-operator runs: `samplesOperator.enabled` true, or `auto` on a
cluster that serves OpenShift's image and template APIs, has the samples
namespace, and does not already run OpenShift's own samples operator (the Deployment
openshift-cluster-samples-operator/cluster-samples-operator, which would
fight ours over the same Config). Renders "true" or nothing.
*/}}
{{- define "olm.samplesOperatorEnabled" -}}
{{- $enabled := .Values.samplesOperator.enabled -}}
{{- if eq (toString $enabled) "auto" -}}
{{- $served := and (.Capabilities.APIVersions.Has "image.openshift.io/v1") (.Capabilities.APIVersions.Has "template.openshift.io/v1") -}}
{{- $upstream := lookup "apps/v1" "Deployment" "openshift-cluster-samples-operator" "cluster-samples-operator" -}}
{{- $namespace := lookup "v1" "Namespace" "" .Values.samplesOperator.samplesNamespace -}}
{{- if and $served $namespace (not $upstream) -}}
true
{{- end -}}
{{- else if $enabled -}}
true
{{- end -}}
{{- end -}}
