{{/*
Names, labels, images and the derived settings every template shares. Names are
release-scoped (two releases in one namespace never collide); cluster-scoped names also
carry the namespace (the same release name in two namespaces never collides).
*/}}

{{- define "mcc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every namespaced name. */}}
{{- define "mcc.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The prefix of cluster-scoped names: fullname and namespace. */}}
{{- define "mcc.clusterName" -}}
{{- printf "%s-%s" (include "mcc.fullname" .) .Release.Namespace | trunc 200 | trimSuffix "-" }}
{{- end }}

{{/* Component names. */}}
{{- define "mcc.gateway.fullname" -}}{{ include "mcc.fullname" . }}-gateway{{- end }}
{{- define "mcc.operator.fullname" -}}{{ include "mcc.fullname" . }}-operator{{- end }}
{{- define "mcc.redis.fullname" -}}{{ include "mcc.fullname" . }}-redis{{- end }}

{{- define "mcc.catalogConfigMap" -}}
{{- .Values.operator.catalogConfigMap | default (printf "%s-catalog" (include "mcc.fullname" .)) }}
{{- end }}

{{- /* The names a shard of the catalog can have, as a YAML list: `<catalog>-shard-<a|b>-<n>`,
n below 16: the Helm copy of mcc_catalog::shards::all_shard_names (the operator test
the_charts_shard_names_are_the_writers compares them; e2e/cluster uses them on a
real API server). Fixed names, so RBAC grants them by name. */}}
{{- define "mcc.catalogShardNames" -}}
{{- $catalog := include "mcc.catalogConfigMap" . }}
{{- range $slot := list "a" "b" }}
{{- range $n := until 16 }}
- {{ printf "%s-shard-%s-%d" $catalog $slot $n | quote }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mcc.gateway.serviceAccountName" -}}
{{- if .Values.gateway.serviceAccount.create }}
{{- .Values.gateway.serviceAccount.name | default (include "mcc.gateway.fullname" .) }}
{{- else }}
{{- required "gateway.serviceAccount.name is required when gateway.serviceAccount.create is false" .Values.gateway.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mcc.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- .Values.operator.serviceAccount.name | default (include "mcc.operator.fullname" .) }}
{{- else }}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "mcc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "mcc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mcc
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: (dict "ctx" $ "component" "gateway"). */}}
{{- define "mcc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcc.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* All labels of one component's objects. */}}
{{- define "mcc.componentLabels" -}}
{{ include "mcc.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
Image reference: (dict "image" .Values.x.image "ctx" $ ["defaultSuffix" "-model"]). A digest
wins over the tag; an empty tag is the chart's appVersion plus defaultSuffix.
*/}}
{{- define "mcc.image" -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default (printf "%s%s" .ctx.Chart.AppVersion (.defaultSuffix | default "")) }}
{{- end -}}
{{- end }}

{{/* Topology spread constraints with the component's labels filled in where missing. */}}
{{- define "mcc.topologySpread" -}}
{{- $out := list }}
{{- range .constraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "mcc.selectorLabels" (dict "ctx" $.ctx "component" $.component) | fromYaml)) }}
{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The most gateway replicas this release may run: replicas, or the HPA's maximum.
*/}}
{{- define "mcc.gateway.maxReplicas" -}}
{{- if .Values.gateway.autoscaling.enabled }}{{ .Values.gateway.autoscaling.maxReplicas }}{{ else }}{{ .Values.gateway.replicas }}{{ end }}
{{- end }}

{{/* "external" (redis.url / redis.existingSecret / redis.external), "chart" (the chart runs Redis) or "none". */}}
{{- define "mcc.redis.mode" -}}
{{- $r := .Values.redis }}
{{- if or $r.url $r.existingSecret $r.external.mode }}external
{{- else if eq (toString $r.enabled) "true" }}chart
{{- else if eq (toString $r.enabled) "false" }}none
{{- else if and .Values.gateway.enabled (gt (int (include "mcc.gateway.maxReplicas" .)) 1) }}chart
{{- else }}none
{{- end }}
{{- end }}

{{/*
The gateway's Redis URL from redis.external's parts (docs/redis.md): the password is the
container's $(REDIS_PASSWORD), filled in by Kubernetes from redis.external.passwordSecret.
*/}}
{{- define "mcc.redis.externalUrl" -}}
{{- $x := .Values.redis.external }}
{{- $scheme := ternary "rediss" "redis" $x.tls }}
{{- if ne $x.mode "single" }}{{ $scheme = printf "%s+%s" $scheme $x.mode }}{{ end }}
{{- $user := "" }}
{{- if $x.passwordSecret }}{{ $user = printf "%s:$(REDIS_PASSWORD)@" $x.username }}
{{- else if $x.username }}{{ $user = printf "%s@" $x.username }}{{ end }}
{{- $path := printf "/%d" (int $x.db) }}
{{- if eq $x.mode "sentinel" }}{{ $path = printf "/%s/%d" $x.masterName (int $x.db) }}
{{- else if eq $x.mode "cluster" }}{{ $path = "" }}{{ end }}
{{- printf "%s://%s%s%s" $scheme $user (join "," $x.addresses) $path }}
{{- end }}

{{/* Name of the Secret holding the chart Redis's password (key redis-password). */}}
{{- define "mcc.redis.secretName" -}}
{{- .Values.redis.auth.existingSecret | default (printf "%s-auth" (include "mcc.redis.fullname" .)) }}
{{- end }}

{{/* The Host names the gateway's /mcp accepts, `;`-separated. */}}
{{- define "mcc.gateway.allowedHosts" -}}
{{- $svc := include "mcc.gateway.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $port := toString .Values.gateway.service.port }}
{{- $hosts := list "localhost" "127.0.0.1" "::1" }}
{{- range $name := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns $.Values.clusterDomain) }}
{{- $hosts = append $hosts $name }}
{{- $hosts = append $hosts (printf "%s:%s" $name $port) }}
{{- end }}
{{- if .Values.gateway.ingress.enabled }}
{{- range .Values.gateway.ingress.hosts }}
{{- $hosts = append $hosts .host }}
{{- end }}
{{- end }}
{{- range .Values.gateway.allowedHosts }}
{{- $hosts = append $hosts . }}
{{- end }}
{{- $hosts | uniq | join ";" }}
{{- end }}

{{/* The local-runtime namespaces, as a YAML list: where `runtime: local` Tools may live
(operator.localRuntimeNamespaces, else the trusted namespaces), so the only namespaces
whose Secrets and ConfigMaps the gateway reads for a Tool (`MCC_LOCAL_RUNTIME_NAMESPACES`
of the operator; the gateway's Roles with referencedObjects.scope=namespaces). */}}
{{- define "mcc.localRuntimeNamespaces" -}}
{{- toYaml (.Values.operator.localRuntimeNamespaces | default (splitList "," (include "mcc.operator.trusted" .))) }}
{{- end }}

{{/* The pod-runtime namespaces, as a YAML list: podRuntime.namespaces plus the namespaces
podRuntime.namespaceSelector matches at install or upgrade (equality terms `k=v`, looked
up in the cluster: `helm template` sees none). Empty with podRuntime.clusterWide or the
pod runtime off. The one list behind the gateway's Pod verbs, the operator's
MCC_POD_NAMESPACES, the sweeper and the pod Tools' NetworkPolicies. */}}
{{- define "mcc.podRuntime.namespaceList" -}}
{{- $pr := .Values.podRuntime }}
{{- $list := list }}
{{- if and $pr.enabled (not $pr.clusterWide) }}
{{- $list = $pr.namespaces }}
{{- if $pr.namespaceSelector }}
{{- $terms := dict }}
{{- range $term := splitList "," $pr.namespaceSelector }}
{{- $kv := splitList "=" (trim $term) }}
{{- $_ := set $terms (first $kv) (last $kv) }}
{{- end }}
{{- range $nsObj := (lookup "v1" "Namespace" "" "").items | default list }}
{{- $labels := $nsObj.metadata.labels | default dict }}
{{- $match := true }}
{{- range $k, $v := $terms }}
{{- if ne (get $labels $k) $v }}{{ $match = false }}{{ end }}
{{- end }}
{{- if $match }}{{ $list = append $list $nsObj.metadata.name }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml ($list | uniq) }}
{{- end }}

{{/* Where the gateway may create tool Pods, as the operator reads it
(MCC_POD_NAMESPACES): `*` (podRuntime.clusterWide), a comma list, or empty when the pod
runtime is off. */}}
{{- define "mcc.podRuntime.namespaces" -}}
{{- if .Values.podRuntime.enabled }}
{{- if .Values.podRuntime.clusterWide }}*
{{- else }}{{ include "mcc.podRuntime.namespaceList" . | fromYamlArray | join "," }}
{{- end }}
{{- end }}
{{- end }}

{{/* The image of pod Tools that name none: podRuntime.image, else the executor image. */}}
{{- define "mcc.podRuntime.defaultImage" -}}
{{- $img := .Values.podRuntime.image }}
{{- if $img.repository }}
{{- include "mcc.image" (dict "image" $img "ctx" .) }}
{{- else }}
{{- include "mcc.image" (dict "image" .Values.gateway.executor.image "ctx" .) }}
{{- end }}
{{- end }}

{{/* Trusted namespaces (default: the release namespace), comma-separated. */}}
{{- define "mcc.operator.trusted" -}}
{{- .Values.operator.trustedNamespaces | default (list .Release.Namespace) | join "," }}
{{- end }}

{{/*
The NetworkPolicy egress rule to the API server: networkPolicy.apiServer.cidrs, else the
addresses of the default/kubernetes Service and its Endpoints (looked up at install and
upgrade; `helm template` has no cluster), else any address on the API server ports.
*/}}
{{- define "mcc.networkPolicy.apiServer" -}}
{{- $api := .Values.networkPolicy.apiServer }}
{{- $cidrs := $api.cidrs }}
{{- if not $cidrs }}
{{- /* The Service's address too: some policy engines see traffic before the Service's DNAT. */}}
{{- $svc := lookup "v1" "Service" "default" "kubernetes" }}
{{- range ((($svc).spec).clusterIPs | default list) }}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) }}
{{- end }}
{{- $ep := lookup "v1" "Endpoints" "default" "kubernetes" }}
{{- range ($ep.subsets | default list) }}
{{- range (.addresses | default list) }}
{{- $cidrs = append $cidrs (printf "%s/%s" .ip (ternary "128" "32" (contains ":" .ip))) }}
{{- end }}
{{- end }}
{{- end }}
# The Kubernetes API server.
- ports:
    {{- range $api.ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
  {{- with $cidrs }}
  to:
    {{- range . }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  {{- end }}
{{- end }}

{{/* The Secret holding the gateway's /metrics token: gateway.metricsTokenSecret.name, else
the chart's own (templates/gateway/metrics-token.yaml) while the token is required, else
empty (no token). */}}
{{- define "mcc.gateway.metricsTokenSecretName" -}}
{{- $s := .Values.gateway.metricsTokenSecret }}
{{- if $s.name }}{{ $s.name }}
{{- else if $s.required }}{{ include "mcc.gateway.fullname" . }}-metrics-token
{{- end }}
{{- end }}

{{/* The chart's own /metrics token: the one in its Secret when the cluster has it (so
`helm upgrade` keeps it), else a new random one. `helm template` has no cluster: a new
token on every render. */}}
{{- define "mcc.gateway.metricsToken" -}}
{{- $name := include "mcc.gateway.metricsTokenSecretName" . }}
{{- $key := .Values.gateway.metricsTokenSecret.key }}
{{- $old := lookup "v1" "Secret" .Release.Namespace $name }}
{{- if and $old $old.data (index $old.data $key) }}
{{- index $old.data $key | b64dec }}
{{- else }}
{{- randAlphaNum 48 }}
{{- end }}
{{- end }}

{{/* Addresses no tool may reach through the allow-all egress rules, whatever the
values: the link-local ranges (which hold the metadata services of AWS, GCP, Azure,
OpenStack, DigitalOcean, Oracle and others at 169.254.169.254, and EKS Pod Identity at
169.254.170.23) and the metadata addresses outside them (Alibaba Cloud, Oracle Cloud
Classic; the IPv6 ones of AWS IMDS, EKS Pod Identity and GCP). Only an explicit
extraEgress rule can open one. */}}
{{- define "mcc.networkPolicy.alwaysBlocked" -}}
- 169.254.0.0/16
- 100.100.100.200/32
- 192.0.0.192/32
- fe80::/10
- fd00:ec2::254/128
- fd00:ec2::23/128
- fd20:ce::254/128
{{- end }}

{{/* The egress rule of DNS queries: networkPolicy.dns.ports (UDP and TCP) to
networkPolicy.dns.to (the cluster DNS), or to any address when that is empty. */}}
{{- define "mcc.networkPolicy.dns" -}}
{{- $dns := .Values.networkPolicy.dns }}
{{- if $dns.to }}
# DNS, to the cluster's resolver only.
{{- else }}
# DNS, to any address (networkPolicy.dns.to is empty).
{{- end }}
- ports:
    {{- range $dns.ports }}
    - port: {{ . }}
      protocol: UDP
    - port: {{ . }}
      protocol: TCP
    {{- end }}
  {{- with $dns.to }}
  to: {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* The allow-all egress rule of tools: any IPv4 and IPv6 address except the always
blocked ones and (dict "blocked" <extra CIDRs>). */}}
{{- define "mcc.networkPolicy.toolEgressAll" -}}
{{- $v4 := list }}
{{- $v6 := list }}
{{- range concat (include "mcc.networkPolicy.alwaysBlocked" . | fromYamlArray) (.blocked | default list) | uniq }}
{{- if contains ":" . }}{{ $v6 = append $v6 . }}{{ else }}{{ $v4 = append $v4 . }}{{ end }}
{{- end }}
# Anywhere but link-local, cloud metadata and the blocked addresses.
- to:
    - ipBlock:
        cidr: 0.0.0.0/0
        except: {{- toYaml $v4 | nindent 10 }}
    - ipBlock:
        cidr: ::/0
        except: {{- toYaml $v6 | nindent 10 }}
{{- end }}

{{/* The namespaces of the pod-runtime NetworkPolicy, as a YAML list (empty when the pod
runtime or the policy is off, or with scope cluster and no namespaces listed). */}}
{{- define "mcc.podRuntime.networkPolicyNamespaces" -}}
{{- $np := .Values.networkPolicy }}
{{- $list := list }}
{{- if and .Values.podRuntime.enabled $np.enabled $np.podRuntime.enabled }}
{{- $list = include "mcc.podRuntime.namespaceList" . | fromYamlArray }}
{{- end }}
{{- toYaml ($list | uniq) }}
{{- end }}

{{/* The gateway pod's containers wait `gateway.shutdownDelaySecs` before SIGTERM (the
     Service's endpoints reach every kube-proxy first): a preStop sleep, Kubernetes >= 1.30. */}}
{{- define "mcc.gateway.preStop" -}}
{{- if gt (int .shutdownDelaySecs) 0 -}}
lifecycle:
  preStop:
    sleep:
      seconds: {{ int .shutdownDelaySecs }}
{{- end -}}
{{- end }}

{{/*
Egress rules to the allowed upstream MCP servers (upstreams.allowed): per entry, its `to`
peers (any address without) on its `ports`, else the URL's port (443 for https, 80 for
http; both for a host entry). Used by the operator's and the gateway's NetworkPolicies.
*/}}
{{- define "mcc.networkPolicy.upstreams" -}}
{{- range .Values.upstreams.allowed }}
{{- $rule := dict }}
{{- with .to }}{{ $_ := set $rule "to" . }}{{ end }}
{{- $ports := .ports }}
{{- if not $ports }}
{{- if contains "://" .url }}
{{- $u := urlParse .url }}
{{- $port := regexFind ":[0-9]+$" $u.host | trimPrefix ":" | default (ternary "443" "80" (eq $u.scheme "https")) }}
{{- $ports = list (dict "port" (atoi $port) "protocol" "TCP") }}
{{- else }}
{{- $ports = list (dict "port" 443 "protocol" "TCP") (dict "port" 80 "protocol" "TCP") }}
{{- end }}
{{- end }}
{{- $_ := set $rule "ports" $ports }}
{{ toYaml (list $rule) }}
{{- end }}
{{- end }}

{{/*
Projected ServiceAccount tokens for upstream MCP servers (upstreams.tokenAudiences,
docs/upstreams.md): one serviceAccountToken source per approved audience at
`<first 16 hex digits of sha256(audience)>/token` (mcc_catalog::upstream::token_file),
mounted at /var/run/secrets/mcc.dev/upstream-tokens in the operator (discovery) and the
gateway container (calls), never the executor. An audience the API server accepts by
default, or the gateway's own, fails the render: an upstream would receive a token
either would take.
*/}}
{{- define "mcc.upstreamTokenVolume" -}}
{{- $forbidden := list "https://kubernetes.default.svc" "https://kubernetes.default.svc.cluster.local" "kubernetes.default.svc" "kubernetes" .Values.gateway.auth.tokenAudience }}
- name: upstream-tokens
  projected:
    defaultMode: 0444
    sources:
      {{- range .Values.upstreams.tokenAudiences }}
      {{- if has .audience $forbidden }}
      {{- fail (printf "upstreams.tokenAudiences: %q is an audience the Kubernetes API server or the gateway (gateway.auth.tokenAudience) accepts; an upstream must never receive such a token" .audience) }}
      {{- end }}
      - serviceAccountToken:
          audience: {{ .audience | quote }}
          expirationSeconds: {{ .expirationSeconds | default 3600 }}
          path: {{ printf "%s/token" (sha256sum .audience | trunc 16) }}
      {{- end }}
{{- end }}

{{- define "mcc.upstreamTokenMount" -}}
- name: upstream-tokens
  mountPath: /var/run/secrets/mcc.dev/upstream-tokens
  readOnly: true
{{- end }}
