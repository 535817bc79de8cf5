{{/*
Name prefix of every object: the release name (or fullnameOverride), at most 40 characters so
that "<prefix>-aggregator" stays a valid DNS label.
*/}}
{{- define "inferplane.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "inferplane.selectorLabels" -}}
app.kubernetes.io/name: inferplane
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "inferplane.labels" -}}
{{ include "inferplane.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "inferplane.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
inferplane.endpoint — "tcp://<prefix>-<component>:<port>", the ZeroMQ endpoint of a component's
Service. Call with (list $root "aggregator" 7001).
*/}}
{{- define "inferplane.endpoint" -}}
{{- $root := index . 0 -}}
tcp://{{ include "inferplane.fullname" $root }}-{{ index . 1 }}:{{ index . 2 }}
{{- end -}}

{{/*
inferplane.workload — one inferplane service: a Deployment (or a DaemonSet) and its Service.
Every service has the same shape, so it is written once here. Call with a dict:
  root          the chart's root context (.)
  name          the component: gateway, decider, aggregator, collector, policy, exporter;
                the container runs inferplane-<name>
  values        that component's values (.Values.gateway, ...)
  kind          "Deployment" (default) or "DaemonSet"
  args          list of flags (besides --admin-listen and --log-level)
  ports         list of {name, port}: listening ports besides admin, also on the Service
  env           optional list of container env entries
  policyVolume  true to mount the policy ConfigMap at /etc/inferplane/policy
Every pod has liveness /healthz and readiness /readyz probes on its admin port and Prometheus
scrape annotations for /metrics on it.
*/}}
{{- define "inferplane.workload" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $kind := .kind | default "Deployment" -}}
{{- $full := printf "%s-%s" (include "inferplane.fullname" $root) .name -}}
apiVersion: apps/v1
kind: {{ $kind }}
metadata:
  name: {{ $full }}
  labels:
    {{- include "inferplane.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
spec:
  {{- if eq $kind "Deployment" }}
  replicas: {{ $v.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "inferplane.selectorLabels" $root | nindent 6 }}
      app.kubernetes.io/component: {{ .name }}
  template:
    metadata:
      labels:
        {{- include "inferplane.selectorLabels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .name }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $v.adminPort | quote }}
        prometheus.io/path: /metrics
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
      # Every service stops within 2 s of SIGTERM.
      terminationGracePeriodSeconds: 10
      containers:
        - name: {{ .name }}
          image: {{ include "inferplane.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: [{{ printf "inferplane-%s" .name | quote }}]
          args:
            - {{ printf "--admin-listen=0.0.0.0:%v" $v.adminPort | quote }}
            - {{ printf "--log-level=%s" ($v.logLevel | default $root.Values.logLevel) | quote }}
            {{- range .args }}
            - {{ . | quote }}
            {{- end }}
            {{- range $v.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          {{- with .env }}
          env:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: admin
              containerPort: {{ $v.adminPort }}
            {{- range .ports }}
            - name: {{ .name }}
              containerPort: {{ .port }}
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: admin
            periodSeconds: 10
            timeoutSeconds: 2
            failureThreshold: 3
          readinessProbe:
            httpGet:
              path: /readyz
              port: admin
            periodSeconds: 2
            timeoutSeconds: 2
            failureThreshold: 2
          {{- with $v.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- if .policyVolume }}
          volumeMounts:
            - name: policy
              mountPath: /etc/inferplane/policy
              readOnly: true
          {{- end }}
      {{- if .policyVolume }}
      volumes:
        - name: policy
          configMap:
            name: {{ include "inferplane.fullname" $root }}-policy
      {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $full }}
  labels:
    {{- include "inferplane.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
spec:
  {{- if eq $kind "DaemonSet" }}
  clusterIP: None
  {{- else }}
  type: {{ $v.serviceType | default "ClusterIP" }}
  {{- end }}
  selector:
    {{- include "inferplane.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
  ports:
    - name: admin
      port: {{ $v.adminPort }}
      targetPort: admin
    {{- range .ports }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
    {{- end }}
{{- end -}}
