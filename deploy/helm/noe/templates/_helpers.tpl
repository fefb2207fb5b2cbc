{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "noe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object name prefix: the release name, with the chart name unless the release already carries it. */}}
{{- define "noe.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "noe.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "noe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "noe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "noe.labels" -}}
helm.sh/chart: {{ include "noe.chart" . }}
{{ include "noe.selectorLabels" . }}
app.kubernetes.io/version: {{ include "noe.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: noe
{{- end -}}

{{/*
Standard metadata of one object: name, namespace (when namespaced), the common
labels plus the object's own `labels`/`annotations` value.
Call with (dict "ctx" $ "name" NAME "component" COMPONENT "key" VALUES-KEY "namespaced" BOOL "annotations" EXTRA
"labels" EXTRA "namespace" NS); "namespace" puts a namespaced object in another namespace than the release's.
*/}}
{{- define "noe.metadata" -}}
{{- $ctx := .ctx -}}
{{- $own := index $ctx.Values .key | default dict -}}
name: {{ .name }}
{{- if .namespace }}
namespace: {{ .namespace }}
{{- else if .namespaced }}
namespace: {{ $ctx.Release.Namespace }}
{{- end }}
labels:
  {{- include "noe.labels" $ctx | nindent 2 }}
  app.kubernetes.io/component: {{ .component }}
  {{- with .labels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with $own.labels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- $annotations := merge (dict) (.annotations | default dict) ($own.annotations | default dict) }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The image tag: the value, else the chart's appVersion; `latest` is refused. */}}
{{- define "noe.tag" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag | toString -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag: `latest` is not allowed (it goes stale); pin a version or set image.digest" -}}
{{- end -}}
{{- $tag -}}
{{- end -}}

{{- define "noe.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry -}}
{{- $repo = printf "%s/%s" .Values.image.registry .Values.image.repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" $repo (include "noe.tag" .) .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (include "noe.tag" .) -}}
{{- end -}}
{{- end -}}

{{/* The webhook's ServiceAccount: created by the chart, or an existing one (serviceAccount.create=false). */}}
{{- define "noe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "noe.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the existing ServiceAccount to use when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Replicas and disruption budget, validated together: a budget that would block
every voluntary eviction (every node drain) fails the rendering.
Returns YAML: replicas, pdb (bool), minAvailable / maxUnavailable (one), spread (bool), whenUnsatisfiable.
*/}}
{{- define "noe.rollout" -}}
{{- $v := .Values -}}
{{- $replicas := int $v.replicas -}}
{{- $pdb := $v.podDisruptionBudget.enabled -}}
{{- $min := $v.podDisruptionBudget.minAvailable -}}
{{- $max := $v.podDisruptionBudget.maxUnavailable -}}
{{- $spread := $v.topologySpread.enabled -}}
{{- $when := $v.topologySpread.whenUnsatisfiable -}}
{{- if $v.ha.enabled -}}
{{- $replicas = max $replicas (int $v.ha.replicas) 2 -}}
{{- $pdb = true -}}
{{- $min = $v.ha.minAvailable -}}
{{- $max = "" -}}
{{- $spread = true -}}
{{- $when = $v.ha.whenUnsatisfiable -}}
{{- end -}}
{{- $out := dict "replicas" $replicas "pdb" $pdb "spread" $spread "whenUnsatisfiable" $when -}}
{{- if $pdb -}}
{{- $hasMin := not (or (kindIs "invalid" $min) (eq (toString $min) "")) -}}
{{- $hasMax := not (or (kindIs "invalid" $max) (eq (toString $max) "")) -}}
{{- if eq $hasMin $hasMax -}}
{{- fail "podDisruptionBudget: set exactly one of minAvailable and maxUnavailable" -}}
{{- end -}}
{{- if $hasMin -}}
{{- $blocks := false -}}
{{- if hasSuffix "%" (toString $min) -}}
{{- $blocks = ge (int (trimSuffix "%" (toString $min))) 100 -}}
{{- else -}}
{{- $blocks = ge (int $min) $replicas -}}
{{- end -}}
{{- if $blocks -}}
{{- if le $replicas 1 -}}
{{- fail (printf "podDisruptionBudget: minAvailable %v with %d replica blocks every node drain; set replicas to 2 or more, or podDisruptionBudget.enabled=false" $min $replicas) -}}
{{- end -}}
{{- fail (printf "podDisruptionBudget: minAvailable %v with %d replicas blocks every node drain; use at most %d (or a percentage below 100%%)" $min $replicas (sub $replicas 1)) -}}
{{- end -}}
{{- $_ := set $out "minAvailable" (ternary (toString $min) (int $min) (hasSuffix "%" (toString $min))) -}}
{{- else -}}
{{- if eq (trimSuffix "%" (toString $max)) "0" -}}
{{- fail (printf "podDisruptionBudget: maxUnavailable %v blocks every node drain; allow at least 1" $max) -}}
{{- end -}}
{{- $_ := set $out "maxUnavailable" (ternary (toString $max) (int $max) (hasSuffix "%" (toString $max))) -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* Shutdown timing: in-flight admissions finish before the kubelet's SIGKILL. */}}
{{- define "noe.checkShutdown" -}}
{{- $v := .Values -}}
{{- if le (float64 $v.gracefulTimeout) (float64 $v.timeoutSeconds) -}}
{{- fail (printf "gracefulTimeout %v must exceed timeoutSeconds %v: an admission the API server still waits for would be cut" $v.gracefulTimeout $v.timeoutSeconds) -}}
{{- end -}}
{{- if le (float64 $v.terminationGracePeriodSeconds) (addf $v.preStopSleepSeconds $v.gracefulTimeout) -}}
{{- fail (printf "terminationGracePeriodSeconds %v must exceed preStopSleepSeconds + gracefulTimeout (%v): the kubelet would kill admissions in flight" $v.terminationGracePeriodSeconds (addf $v.preStopSleepSeconds $v.gracefulTimeout)) -}}
{{- end -}}
{{- end -}}

{{/*
Reading pods' imagePullSecrets (webhook.pullSecrets): "cluster" (a ClusterRole rule), "namespaces"
(a Role and RoleBinding in each listed namespace) or "none".
*/}}
{{- define "noe.pullSecretsScope" -}}
{{- if not .Values.webhook.pullSecrets.enabled -}}none
{{- else if .Values.webhook.pullSecrets.namespaces -}}namespaces
{{- else -}}cluster
{{- end -}}
{{- end -}}

{{/* --pull-secrets-hint: the warning a pod gets when noe may not read its imagePullSecret (at most 120 characters). */}}
{{- define "noe.pullSecretsHint" -}}
{{- $scope := include "noe.pullSecretsScope" . -}}
{{- if eq $scope "namespaces" -}}
noe reads imagePullSecrets only in the namespaces of the Helm value webhook.pullSecrets.namespaces
{{- else if eq $scope "none" -}}
noe may read no imagePullSecret: the Helm value webhook.pullSecrets.enabled grants it
{{- end -}}
{{- end -}}

{{/*
`get secrets` for one ServiceAccount in each namespace of webhook.pullSecrets.namespaces: a Role and its
RoleBinding there, nothing cluster-wide. Call with (dict "ctx" $ "name" NAME "component" COMPONENT).
*/}}
{{- define "noe.pullSecretRoles" -}}
{{- $ctx := .ctx -}}
{{- range $ns := $ctx.Values.webhook.pullSecrets.namespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  {{- include "noe.metadata" (dict "ctx" $ctx "name" (printf "%s-pull-secrets" $.name) "component" $.component "key" "role" "namespace" $ns) | nindent 2 }}
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  {{- include "noe.metadata" (dict "ctx" $ctx "name" (printf "%s-pull-secrets" $.name) "component" $.component "key" "rolebinding" "namespace" $ns) | nindent 2 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ printf "%s-pull-secrets" $.name }}
subjects:
  - kind: ServiceAccount
    name: {{ $.serviceAccount }}
    namespace: {{ $ctx.Release.Namespace }}
{{- end }}
{{- end -}}

{{- define "noe.serviceName" -}}{{ include "noe.fullname" . }}{{- end -}}
{{- define "noe.tlsSecretName" -}}{{ .Values.tls.existingSecret | default (printf "%s-tls" (include "noe.fullname" .)) }}{{- end -}}

{{/*
Where the serving certificate comes from, the first that applies: "existing" (tls.existingSecret, with
tls.caBundle), "cert-manager" (certManager.enabled: certManager.issuerRef or the chart's own CA) or
"noe-certs" (the hook Job). Refuses a half-given own certificate.
*/}}
{{- define "noe.certMode" -}}
{{- $tls := .Values.tls -}}
{{- if and $tls.existingSecret (not $tls.caBundle) -}}
{{- fail "tls.caBundle: set it to the base64 PEM of the CA that signed tls.existingSecret's certificate (base64 -w0 ca.crt): the API server must trust it" -}}
{{- end -}}
{{- if and $tls.caBundle (not $tls.existingSecret) -}}
{{- fail "tls.existingSecret: name the kubernetes.io/tls Secret that tls.caBundle's CA signed (or leave tls.caBundle empty)" -}}
{{- end -}}
{{- if $tls.existingSecret -}}
{{- if not (hasPrefix "-----BEGIN CERTIFICATE-----" (b64dec $tls.caBundle | trim)) -}}
{{- fail "tls.caBundle: not the base64 of a PEM certificate (-----BEGIN CERTIFICATE-----...); encode it with base64 -w0 ca.crt" -}}
{{- end -}}
existing
{{- else if .Values.certManager.enabled -}}
cert-manager
{{- else -}}
noe-certs
{{- end -}}
{{- end -}}
{{/* The webhook's own name in the configuration (the API server's metrics label it so). Noe's name. */}}
{{- define "noe.webhookEntryName" -}}arch.noe.adevinta.com{{- end -}}
{{- define "noe.webhookName" -}}{{ include "noe.fullname" . }}{{- end -}}
{{- define "noe.certsName" -}}{{ include "noe.fullname" . | trunc 57 | trimSuffix "-" }}-certs{{- end -}}

{{/* Directory that holds a host file: its parent. */}}
{{- define "noe.parentDir" -}}
{{- $d := dir . -}}
{{- if or (eq $d ".") (eq $d "") -}}/{{- else -}}{{ $d }}{{- end -}}
{{- end -}}

{{/*
Host directories to mount read-only, de-duplicated, as a list under key "dirs":
the directory of every docker config candidate, of every containerd *.toml
candidate (a candidate without .toml is a directory itself), and the kubelet
credential-provider config and binary directories.
*/}}
{{- define "noe.hostDirs" -}}
{{- $dirs := list -}}
{{- if .Values.nodeCredentials.enabled -}}
{{- range .Values.dockerConfigPathCandidates -}}
{{- $dirs = append $dirs (include "noe.parentDir" .) -}}
{{- end -}}
{{- range .Values.containerdConfigPathCandidates -}}
{{- if hasSuffix ".toml" . -}}
{{- $dirs = append $dirs (include "noe.parentDir" .) -}}
{{- else -}}
{{- $dirs = append $dirs (trimSuffix "/" .) -}}
{{- end -}}
{{- end -}}
{{- with .Values.kubeletConfig -}}
{{- if and .config .binDir -}}
{{- $dirs = append $dirs (trimSuffix "/" (default (include "noe.parentDir" .config) .configDir)) -}}
{{- $dirs = append $dirs (trimSuffix "/" .binDir) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "dirs" ($dirs | uniq)) -}}
{{- end -}}

{{/* The credential-provider config file path on the node. */}}
{{- define "noe.credentialProviderConfig" -}}
{{- with .Values.kubeletConfig -}}
{{- if isAbs .config -}}{{ .config }}{{- else -}}{{ printf "%s/%s" (trimSuffix "/" .configDir) .config }}{{- end -}}
{{- end -}}
{{- end -}}

{{/* One architecture toleration as the flag's "arch=key=value:effect" syntax. */}}
{{- define "noe.archToleration" -}}
{{- if kindIs "string" . -}}
{{- . -}}
{{- else -}}
{{- printf "%s=%s=%s:%s" .arch .key (.value | default "" | toString) (.effect | default "NoSchedule") -}}
{{- end -}}
{{- end -}}

{{/* Arguments of `noe serve`: every policy, registry and serving value of the chart. */}}
{{- define "noe.serveArgs" -}}
{{- $v := .Values -}}
{{- if and $v.preferredArch $v.schedulableArchitectures (not (has $v.preferredArch $v.schedulableArchitectures)) -}}
{{- fail (printf "preferredArch %q must be one of schedulableArchitectures %v" $v.preferredArch $v.schedulableArchitectures) -}}
{{- end -}}
{{- if ge (float64 $v.admissionDeadline) (float64 $v.timeoutSeconds) -}}
{{- fail "admissionDeadline must be below timeoutSeconds, or the API server gives up before noe answers" -}}
{{- end -}}
{{- $args := list "serve" -}}
{{- $args = append $args (printf "--bind=0.0.0.0:%v" $v.containerPort) -}}
{{- $args = append $args "--cert-dir=/etc/noe/tls" -}}
{{- if $v.metrics.enabled -}}
{{- $args = append $args (printf "--metrics-addr=:%v" $v.service.metricsPort) -}}
{{- else -}}
{{- $args = append $args "--metrics-addr=0" -}}
{{- end -}}
{{- $args = append $args (printf "--graceful-timeout=%v" $v.gracefulTimeout) -}}
{{- $args = append $args "--state-dir=/var/run/noe/state" -}}
{{- $args = append $args "--cache-dir=/var/run/noe/cache" -}}
{{- if (include "noe.cache" . | fromYaml).enabled -}}
{{- $args = append $args "--cache-key-file=/etc/noe/cache-key/fingerprint-key" -}}
{{- $args = append $args (printf "--cache-timeout=%v" .Values.cache.redis.timeout) -}}
{{- if .Values.cache.redis.caBundle -}}
{{- $args = append $args "--cache-ca-file=/etc/noe/config/cache-ca.crt" -}}
{{- end -}}
{{- end -}}
{{- $args = append $args (printf "--workers=%v" $v.workers) -}}
{{- $args = append $args (printf "--threads=%v" $v.threads) -}}
{{- $args = append $args (printf "--admission-deadline=%v" $v.admissionDeadline) -}}
{{- $args = append $args (printf "--on-lookup-failure=%s" $v.webhook.onLookupFailure) -}}
{{- $args = append $args (printf "--log-level=%s" $v.logLevel) -}}
{{- $args = append $args (printf "--preferred-arch=%s" ($v.preferredArch | default "")) -}}
{{- if kindIs "slice" $v.systemOS -}}
{{- $args = append $args (printf "--system-os=%s" (join "," $v.systemOS)) -}}
{{- else -}}
{{- $args = append $args (printf "--system-os=%s" $v.systemOS) -}}
{{- end -}}
{{- $args = append $args (printf "--x86-64-levels=%s" $v.x86_64Levels) -}}
{{- $args = append $args (printf "--preference-mode=%s" $v.preferenceMode) -}}
{{- $args = append $args (printf "--preferred-arch-weight=%v" $v.preferredArchWeight) -}}
{{- with $v.schedulableArchitectures -}}
{{- $args = append $args (printf "--cluster-schedulable-archs=%s" (join "," .)) -}}
{{- end -}}
{{- with $v.fallbackArch -}}
{{- $args = append $args (printf "--fallback-arch=%s" .) -}}
{{- end -}}
{{- with $v.matchNodeLabels -}}
{{- $args = append $args (printf "--match-node-labels=%s" (join "," .)) -}}
{{- end -}}
{{- with $v.strictNamespaces -}}
{{- $args = append $args (printf "--strict-namespaces=%s" (join "," .)) -}}
{{- end -}}
{{- if $v.archTolerations -}}
{{- $tols := list -}}
{{- range $v.archTolerations -}}
{{- $tols = append $tols (include "noe.archToleration" .) -}}
{{- end -}}
{{- $args = append $args (printf "--arch-tolerations=%s" (join "," $tols)) -}}
{{- end -}}
{{- if $v.imagePlatforms -}}
{{- $args = append $args "--image-platforms=/etc/noe/config/platforms.json" -}}
{{- end -}}
{{- with $v.proxies -}}
{{- $args = append $args (printf "--registry-proxies=%s" (join "," .)) -}}
{{- end -}}
{{- with $v.privateRegistries -}}
{{- $args = append $args (printf "--private-registries=%s" (join "," .)) -}}
{{- end -}}
{{- with $v.insecureRegistries -}}
{{- $args = append $args (printf "--insecure-registries=%s" (join "," .)) -}}
{{- end -}}
{{- if $v.registryCA -}}
{{- $args = append $args "--registry-ca-file=/etc/noe/config/registry-ca.crt" -}}
{{- end -}}
{{- if and (or $v.kubeletConfig.config $v.kubeletConfig.binDir) (not (and $v.kubeletConfig.config $v.kubeletConfig.binDir)) -}}
{{- fail "kubeletConfig: set both config and binDir (and configDir when config is a bare file name)" -}}
{{- end -}}
{{- if $v.nodeCredentials.enabled -}}
{{- range $v.dockerConfigPathCandidates -}}
{{- $args = append $args (printf "--docker-config=%s" .) -}}
{{- end -}}
{{- range $v.containerdConfigPathCandidates -}}
{{- if hasSuffix ".toml" . -}}
{{- $args = append $args (printf "--containerd-config=%s" .) -}}
{{- else -}}
{{- $args = append $args (printf "--containerd-config=%s/config.toml" (trimSuffix "/" .)) -}}
{{- end -}}
{{- end -}}
{{- if and $v.kubeletConfig.config $v.kubeletConfig.binDir -}}
{{- $args = append $args (printf "--image-credential-provider-config=%s" (include "noe.credentialProviderConfig" .)) -}}
{{- $args = append $args (printf "--image-credential-provider-bin-dir=%s" $v.kubeletConfig.binDir) -}}
{{- end -}}
{{- end -}}
{{- if not (kindIs "invalid" $v.cacheTTL) -}}{{- if ne (toString $v.cacheTTL) "" -}}
{{- $args = append $args (printf "--cache-ttl=%v" $v.cacheTTL) -}}
{{- end -}}{{- end -}}
{{- if not (kindIs "invalid" $v.negativeCacheTTL) -}}{{- if ne (toString $v.negativeCacheTTL) "" -}}
{{- $args = append $args (printf "--negative-cache-ttl=%v" $v.negativeCacheTTL) -}}
{{- end -}}{{- end -}}
{{- if eq (toString $v.verifyPlatformManifests) "true" -}}
{{- $args = append $args "--verify-platform-manifests" -}}
{{- else if eq (toString $v.verifyPlatformManifests) "false" -}}
{{- $args = append $args "--no-verify-platform-manifests" -}}
{{- end -}}
{{- with include "noe.pullSecretsHint" . -}}
{{- $args = append $args (printf "--pull-secrets-hint=%s" .) -}}
{{- end -}}
{{- range $v.extraArgs -}}
{{- $args = append $args . -}}
{{- end -}}
{{- toYaml $args -}}
{{- end -}}

{{/* Pod template of the `noe certs` Job and CronJob. */}}
{{- define "noe.certsPod" -}}
metadata:
  labels:
    {{- include "noe.labels" . | nindent 4 }}
    app.kubernetes.io/component: certificates
spec:
  serviceAccountName: {{ include "noe.certsName" . }}
  restartPolicy: OnFailure
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: certs
      image: {{ include "noe.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - certs
        - --namespace={{ .Release.Namespace }}
        - --service={{ include "noe.serviceName" . }}
        - --secret={{ include "noe.tlsSecretName" . }}
        - --webhook-config={{ include "noe.webhookName" . }}
        - --cluster-domain={{ .Values.clusterDomain }}
        - --validity-days={{ .Values.certs.validityDays }}
        - --renew-before-days={{ .Values.certs.renewBeforeDays }}
      env:
        - name: HOME
          value: /tmp
      resources:
        {{- toYaml .Values.certs.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: 16Mi
{{- end -}}

{{/*
The shared registry cache (cache.redis): whether there is one, the Secret holding its `url` and
`fingerprint-key`, and whether the chart runs its own Valkey. Returns YAML.
*/}}
{{- define "noe.cache" -}}
{{- $r := .Values.cache.redis -}}
{{- $given := list -}}
{{- if $r.url }}{{ $given = append $given "url" }}{{ end -}}
{{- if $r.existingSecret }}{{ $given = append $given "existingSecret" }}{{ end -}}
{{- if $r.deploy }}{{ $given = append $given "deploy" }}{{ end -}}
{{- if gt (len $given) 1 -}}
{{- fail (printf "cache.redis: set one of url, existingSecret and deploy, not %s" (join " and " $given)) -}}
{{- end -}}
{{- if and $r.caBundle (not (hasPrefix "rediss://" ($r.url | default "rediss://"))) -}}
{{- fail "cache.redis.caBundle: only for a rediss:// (TLS) url" -}}
{{- end -}}
{{- $out := dict "enabled" (gt (len $given) 0) "deploy" (and $r.deploy true) "external" (or (and $r.url true) (and $r.existingSecret true)) -}}
{{- $_ := set $out "secret" ($r.existingSecret | default (printf "%s-cache" (include "noe.fullname" .))) -}}
{{- $_ := set $out "host" (printf "%s-valkey" (include "noe.fullname" .)) -}}
{{- toYaml $out -}}
{{- end -}}

{{/* Whether the chart's ConfigMap is rendered (and mounted at /etc/noe/config). */}}
{{- define "noe.hasConfig" -}}
{{- if or .Values.imagePlatforms .Values.registryCA .Values.cache.redis.caBundle -}}true{{- end -}}
{{- end -}}

{{/* The container's env, volumeMounts and the pod's volumes for the shared cache (one of `part`). */}}
{{- define "noe.cacheParts" -}}
{{- $cache := include "noe.cache" .ctx | fromYaml -}}
{{- if $cache.enabled -}}
{{- if eq .part "env" }}
# The URL (and its password) from the Secret: never in the pod's arguments.
- name: NOE_CACHE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $cache.secret }}
      key: url
{{- else if eq .part "mounts" }}
- name: cache-key
  mountPath: /etc/noe/cache-key
  readOnly: true
{{- else }}
- name: cache-key
  secret:
    secretName: {{ $cache.secret }}
    items:
      - key: fingerprint-key
        path: fingerprint-key
{{- end }}
{{- end -}}
{{- end -}}

{{/* The chart's Valkey: a cache, nothing kept on disk, bounded, every key of noe's carrying a TTL. */}}
{{- define "noe.valkeyConf" -}}
port 6379
bind * -::*
protected-mode no
requirepass {{ .password }}
save ""
appendonly no
dir /data
maxmemory {{ .ctx.Values.cache.redis.maxMemory }}
maxmemory-policy volatile-lru
{{- end -}}

{{/* The webhook container's OTEL_* variables when tracing.endpoint is set (README.md, "Tracing"). */}}
{{- define "noe.tracingEnv" -}}
{{- with .Values.tracing }}
{{- if .endpoint }}
# Not NOE_*: that prefix is the flags' (noe_core/cli)
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: http/protobuf
- name: OTEL_SERVICE_NAME
  value: {{ .serviceName | default "noe-webhook" | quote }}
{{- $attributes := list "k8s.namespace.name=$(POD_NAMESPACE)" "k8s.pod.name=$(POD_NAME)" }}
{{- range $name, $value := .resourceAttributes }}
{{- $attributes = append $attributes (printf "%s=%s" $name $value) }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attributes | quote }}
{{- with .sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ . | quote }}
{{- end }}
{{- with .samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
{{- if .headersSecret.name }}
# A collector's credentials: from the Secret, never in the pod spec.
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ .headersSecret.name }}
      key: {{ .headersSecret.key }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
