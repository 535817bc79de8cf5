{{/*
Name prefix of every object: the release name (or fullnameOverride), at most 40 characters so
that "<prefix>-aggregator-headless" and a StatefulSet's pod names stay valid DNS labels.
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
inferplane.endpoint — "tcp://<prefix>-<service>:<port>", a ZeroMQ endpoint through a
component's ClusterIP Service. Call with (list $root "policy" 7011).
*/}}
{{- define "inferplane.endpoint" -}}
{{- $root := index . 0 -}}
tcp://{{ include "inferplane.fullname" $root }}-{{ index . 1 }}:{{ index . 2 }}
{{- end -}}

{{/*
inferplane.podEndpoints — the comma-separated ZeroMQ endpoints of every pod of a StatefulSet
through its headless Service: "tcp://<sts>-0.<svc>:<port>,tcp://<sts>-1.<svc>:<port>,...".
Call with (list $root "<component>" COUNT PORT); the StatefulSet is <prefix>-<component> and its
governing Service <prefix>-<component>-headless. A pod that does not exist (yet) is harmless in
such a list: ZeroMQ resolves and connects in the background and retries.
*/}}
{{- define "inferplane.podEndpoints" -}}
{{- $root := index . 0 -}}
{{- $sts := printf "%s-%s" (include "inferplane.fullname" $root) (index . 1) -}}
{{- $out := list -}}
{{- range $i := until (int (index . 2)) -}}
{{- $out = append $out (printf "tcp://%s-%d.%s-headless:%v" $sts $i $sts (index $ 3)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/*
inferplane.slots — how many pods a scalable component may have: autoscaling.maxReplicas when
its HorizontalPodAutoscaler is on, else replicas. Peer lists name this many pods.
*/}}
{{- define "inferplane.slots" -}}
{{- if and .autoscaling .autoscaling.enabled -}}
{{- max (int .autoscaling.maxReplicas) (int .replicas) -}}
{{- else -}}
{{- int .replicas -}}
{{- end -}}
{{- end -}}

{{/* The aggregators' endpoints for a port (every aggregator pod), for collectors and deciders. */}}
{{- define "inferplane.aggregators" -}}
{{- $root := index . 0 -}}
{{- include "inferplane.podEndpoints" (list $root "aggregator" $root.Values.aggregator.replicas (index . 1)) -}}
{{- end -}}

{{- define "inferplane.serviceAccount" -}}
{{- $root := index . 0 -}}
{{- if $root.Values.serviceAccount.create -}}
{{ include "inferplane.fullname" $root }}{{ index . 1 }}
{{- else -}}
{{ $root.Values.serviceAccount.name | default "default" }}
{{- end -}}
{{- end -}}

{{/*
inferplane.workload — one inferplane process as a Deployment, StatefulSet or DaemonSet. Every
service has the same pod shape, so it is written once here. Call with a dict:
  root            the chart's root context (.)
  name            the component: gateway, decider, aggregator, collector, policy, exporter;
                  the container runs inferplane-<name>
  values          that component's values (.Values.gateway, ...)
  kind            "Deployment" (default), "StatefulSet" or "DaemonSet"
  replicas        replica count; omitted from the spec when "autoscaled" is true
  autoscaled      true when a HorizontalPodAutoscaler owns the replica count
  serviceName     StatefulSet: its governing headless Service
  strategy        Deployment: "Recreate" for single-writer components (default RollingUpdate)
  args            list of flags (besides --admin-listen and --log-level), each "--name=value"
  ports           list of {name, port}: container ports besides admin
  env             optional list of container env entries (before values.extraEnv)
  volumes         optional list of pod volumes (before values.extraVolumes)
  mounts          optional list of container volumeMounts (before values.extraVolumeMounts)
  serviceAccount  the pod's ServiceAccount name
  token           true to mount the ServiceAccount's token (only the policy engine in
                  Kubernetes mode talks to the API server)
  checksum        optional string whose hash goes into a pod annotation, so that a change of
                  the configuration it stands for rolls the pods
Every pod has liveness /healthz and readiness /readyz probes on its admin port, Prometheus
scrape annotations for /metrics on it, a read-only root file system with an emptyDir on /tmp,
and runs as the image's non-root user. With adminTokenSecret.name its admin routes other than
/healthz, /readyz, /metrics and /version need that token (--admin-token-file).
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
  {{- if and (ne $kind "DaemonSet") (not .autoscaled) }}
  replicas: {{ .replicas }}
  {{- end }}
  {{- if eq $kind "StatefulSet" }}
  serviceName: {{ .serviceName }}
  # Pods start and stop together like a Deployment's; only their names are stable.
  podManagementPolicy: Parallel
  {{- end }}
  {{- if and (eq $kind "Deployment") .strategy }}
  strategy:
    type: {{ .strategy }}
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
        {{- if .checksum }}
        inferplane.io/config-checksum: {{ .checksum | sha256sum | trunc 16 | quote }}
        {{- end }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ .serviceAccount }}
      automountServiceAccountToken: {{ .token | default false }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
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
            {{- with $root.Values.adminTokenSecret.name }}
            - {{ printf "--admin-token-file=/etc/inferplane/admin/%s" $root.Values.adminTokenSecret.key | quote }}
            {{- end }}
            {{- range .args }}
            - {{ . | quote }}
            {{- end }}
            {{- range $v.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          {{- $env := concat (.env | default list) ($v.extraEnv | default list) }}
          {{- with $env }}
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
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if $root.Values.adminTokenSecret.name }}
            - name: admin-token
              mountPath: /etc/inferplane/admin
              readOnly: true
            {{- end }}
            {{- with .mounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            {{- with $v.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
        {{- with $root.Values.adminTokenSecret.name }}
        - name: admin-token
          secret:
            secretName: {{ . }}
        {{- end }}
        {{- with .volumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $v.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/*
inferplane.service — a Service in front of a component's pods. Call with a dict:
  root      the chart's root context
  name      the component (selects its pods)
  suffix    "" for <prefix>-<name>, "-headless" for <prefix>-<name>-headless
  headless  true: clusterIP None, publishNotReadyAddresses (peers and per-pod DNS names must
            exist before the pods are ready; ZeroMQ reconnects on its own)
  type      ClusterIP (default), NodePort or LoadBalancer (not with headless)
  metrics   true: labelled inferplane.io/metrics so that the ServiceMonitor scrapes its
            "admin" port (exactly one Service per component carries it)
  ports     list of {name, port}; targetPort is the container port of the same name
*/}}
{{- define "inferplane.service" -}}
{{- $root := .root -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "inferplane.fullname" $root }}-{{ .name }}{{ .suffix }}
  labels:
    {{- include "inferplane.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
    {{- if .metrics }}
    inferplane.io/metrics: "true"
    {{- end }}
spec:
  {{- if .headless }}
  clusterIP: None
  publishNotReadyAddresses: true
  {{- else }}
  type: {{ .type | default "ClusterIP" }}
  {{- end }}
  selector:
    {{- include "inferplane.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
  ports:
    {{- range .ports }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
    {{- end }}
{{- end -}}

{{/*
inferplane.pdb — a PodDisruptionBudget for a component with more than one pod. Call with
(dict "root" . "name" "gateway" "values" $v "pods" N).
*/}}
{{- define "inferplane.pdb" -}}
{{- $v := .values -}}
{{- if and $v.podDisruptionBudget.enabled (gt (int .pods) 1) }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "inferplane.fullname" .root }}-{{ .name }}
  labels:
    {{- include "inferplane.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
spec:
  maxUnavailable: {{ $v.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "inferplane.selectorLabels" .root | nindent 6 }}
      app.kubernetes.io/component: {{ .name }}
{{- end }}
{{- end -}}

{{/*
inferplane.hpa — a HorizontalPodAutoscaler (autoscaling/v2, CPU utilisation of the requests)
for a component's Deployment or StatefulSet, when values.autoscaling.enabled. Call with
(dict "root" . "name" "gateway" "values" $v "kind" "StatefulSet").
*/}}
{{- define "inferplane.hpa" -}}
{{- $a := .values.autoscaling -}}
{{- if $a.enabled }}
{{- if not (and .values.resources .values.resources.requests .values.resources.requests.cpu) }}
{{- fail (printf "%s.autoscaling needs %s.resources.requests.cpu: the target is a percentage of it" .name .name) }}
{{- end }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "inferplane.fullname" .root }}-{{ .name }}
  labels:
    {{- include "inferplane.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: {{ .kind }}
    name: {{ include "inferplane.fullname" .root }}-{{ .name }}
  minReplicas: {{ $a.minReplicas }}
  maxReplicas: {{ $a.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $a.targetCPUUtilizationPercentage }}
{{- end }}
{{- end -}}
