{{/*
One OLM service as a Deployment. Call with a dict:
  root: $, name: the service (image and binary name), values: its values,
  digestKey: its key under images.digests, args: its arguments,
  env: extra environment (list), ports: extra container ports (list),
  volumes / volumeMounts: extra ones (lists), leaderElection: bool,
  noBus: bool (a service that never talks to the NATS bus).
*/}}
{{- define "olm.deployment" -}}
{{- $root := .root -}}
{{- $values := .values -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ include "olm.namespace" $root }}
  labels:
    {{- include "olm.componentLabels" (list $root .name) | nindent 4 }}
spec:
  replicas: {{ $values.replicas }}
  revisionHistoryLimit: 3
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: {{ if gt (int $values.replicas) 1 }}1{{ else }}0{{ end }}
      maxSurge: 1
  selector:
    matchLabels:
      {{- include "olm.selector" (list $root .name) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "olm.componentLabels" (list $root .name) | nindent 8 }}
    spec:
      serviceAccountName: {{ .name }}
      automountServiceAccountToken: true
      {{- include "olm.podSettings" (list $root $values) | nindent 6 }}
      containers:
        - name: {{ .name }}
          image: {{ include "olm.image" (list $root .name .digestKey "") }}
          imagePullPolicy: {{ $root.Values.images.pullPolicy }}
          args:
            {{- if .leaderElection }}
            - --leader-elect
            {{- end }}
            {{- range .args }}
            - {{ . | quote }}
            {{- end }}
            {{- range $values.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          env:
            {{- include "olm.commonEnv" (list $root .name (not .noBus)) | nindent 12 }}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: admin
              containerPort: 8080
              protocol: TCP
            {{- with .ports }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- include "olm.probes" . | nindent 10 }}
          resources:
            {{- toYaml $values.resources | nindent 12 }}
          {{- include "olm.containerSecurity" . | nindent 10 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if not .noBus }}
            {{- include "olm.busVolumeMount" $root | nindent 12 }}
            {{- end }}
            {{- with .volumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
        {{- if not .noBus }}
        {{- include "olm.busVolume" (list $root .name) | nindent 8 }}
        {{- end }}
        {{- with .volumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
{{- end -}}
