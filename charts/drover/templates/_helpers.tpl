{{/* Names and labels. */}}

{{- define "drover.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "drover.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "drover.selectorLabels" -}}
app.kubernetes.io/name: {{ include "drover.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "drover.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "drover.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: drover
{{- end }}

{{- define "drover.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "drover.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "drover.image" -}}
{{- $img := .img -}}
{{- $repo := $img.repository | default .root.Values.image.repository -}}
{{- $tag := $img.tag | default .root.Values.image.tag | default .root.Chart.AppVersion -}}
image: {{ printf "%s:%s" $repo $tag | quote }}
imagePullPolicy: {{ $img.pullPolicy | default .root.Values.image.pullPolicy }}
{{- end }}

{{/* NATS: where it is, and how Drover's processes authenticate. */}}

{{/* The NATS subchart's full name, computed as that chart does. */}}
{{- define "drover.natsFullname" -}}
{{- $v := .Values.nats -}}
{{- if (dig "fullnameOverride" "" $v) }}
{{- $v.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := (dig "nameOverride" "" $v) | default "nats" }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The NATS subchart's values are read as that chart reads them: a value may be a
{$tplYaml: PROGRAM} map, and a map may hold {$tplYamlSpread: PROGRAM} entries
(the NATS chart's README, "tplYaml"). Programs run with the subchart's context,
so `include "nats.fullname" .` works as it does there.
*/}}

{{/* One program's output parsed as YAML, as JSON {"v": value}. Input: dict root, program. */}}
{{- define "drover.natsTpl" -}}
{{- $root := .root -}}
{{- $sub := dig "nats" dict (get $root "Subcharts" | default dict) -}}
{{- $ctx := dict "Values" $root.Values.nats "Release" $root.Release "Capabilities" $root.Capabilities "Template" $root.Template -}}
{{- $_ := set $ctx "Chart" (get $sub "Chart" | default (dict "Name" "nats")) -}}
{{- $_ := set $ctx "Files" (get $sub "Files" | default $root.Files) -}}
{{- $_ := set $ctx "Subcharts" (get $sub "Subcharts" | default dict) -}}
{{- $doc := printf "tpl: %s" (nindent 2 (tpl (toString .program) $ctx)) | fromYaml -}}
{{- if hasKey $doc "Error" }}
{{- fail (printf "nats: a $tplYaml program gives no YAML (%s): %s" $doc.Error .program) }}
{{- end }}
{{- toJson (dict "v" (get $doc "tpl")) }}
{{- end }}

{{/* A node with its own $tplYaml evaluated, or its $tplYamlSpread entries spread
into it, as JSON {"v": node}. Input: dict root, node. */}}
{{- define "drover.natsResolve" -}}
{{- $n := .node -}}
{{- if and (kindIs "map" $n) (eq (len $n) 1) (hasKey $n "$tplYaml") }}
{{- $n = (include "drover.natsTpl" (dict "root" .root "program" (get $n "$tplYaml")) | fromJson).v }}
{{- else if kindIs "map" $n }}
{{- $out := dict }}
{{- range $k, $v := $n }}
{{- if not (and (kindIs "map" $v) (eq (len $v) 1) (hasKey $v "$tplYamlSpread")) }}{{ $_ := set $out $k $v }}{{ end }}
{{- end }}
{{- range $k, $v := $n }}
{{- if and (kindIs "map" $v) (eq (len $v) 1) (hasKey $v "$tplYamlSpread") }}
{{- $spread := (include "drover.natsTpl" (dict "root" $.root "program" (get $v "$tplYamlSpread")) | fromJson).v }}
{{- if kindIs "map" $spread }}{{ range $sk, $sv := $spread }}{{ $_ := set $out $sk $sv }}{{ end }}{{ end }}
{{- end }}
{{- end }}
{{- $n = $out }}
{{- end }}
{{- toJson (dict "v" $n) }}
{{- end }}

{{/* "true" when a node has a program for drover.natsResolve to run. */}}
{{- define "drover.natsHasTpl" -}}
{{- if kindIs "map" . }}
{{- if and (eq (len .) 1) (hasKey . "$tplYaml") }}true{{ end }}
{{- range $k, $v := . }}{{ if and (kindIs "map" $v) (eq (len $v) 1) (hasKey $v "$tplYamlSpread") }}true{{ end }}{{ end }}
{{- end }}
{{- end }}

{{/* The value at path (a list of keys) under nats, as JSON {"v": value}; "" where
there is none. Input: dict root, path. */}}
{{- define "drover.natsValue" -}}
{{- $n := .root.Values.nats }}
{{- range $key := .path }}
{{- if include "drover.natsHasTpl" $n }}{{ $n = (include "drover.natsResolve" (dict "root" $.root "node" $n) | fromJson).v }}{{ end }}
{{- if kindIs "map" $n }}{{ $n = get $n $key }}{{ else }}{{ $n = "" }}{{ end }}
{{- end }}
{{- if include "drover.natsHasTpl" $n }}{{ $n = (include "drover.natsResolve" (dict "root" .root "node" $n) | fromJson).v }}{{ end }}
{{- toJson (dict "v" $n) }}
{{- end }}

{{/*
Where and how the NATS subchart serves clients, computed as that chart does
(its values.yaml documents each key): the Service (service.name, default the
full name) in its namespace (namespaceOverride), the client port
(config.nats.port), TLS (config.nats.tls) with the CA of tlsCA, the headless
Service and monitoring port KEDA reads. As JSON; only with nats.enabled.
Computed once a render: the templates share their root context, where it is
kept (values do not change while Helm renders).
*/}}
{{- define "drover.nats" -}}
{{- if not (hasKey . "droverNATS") }}
{{- $_ := set . "droverNATS" (include "drover.natsCompute" .) }}
{{- end }}
{{- get . "droverNATS" }}
{{- end }}

{{- define "drover.natsCompute" -}}
{{- $v := dict }}
{{- range $k, $path := dict
    "service" (list "service" "name") "serviceOn" (list "service" "enabled") "portOn" (list "service" "ports" "nats" "enabled")
    "headless" (list "headlessService" "name") "namespace" (list "namespaceOverride")
    "port" (list "config" "nats" "port") "tls" (list "config" "nats" "tls" "enabled")
    "tlsMerge" (list "config" "nats" "tls" "merge") "tlsPatch" (list "config" "nats" "tls" "patch")
    "caOn" (list "tlsCA" "enabled") "caSecret" (list "tlsCA" "secretName") "caConfigMap" (list "tlsCA" "configMapName") "caKey" (list "tlsCA" "key")
    "monitorOn" (list "config" "monitor" "enabled") "monitorPort" (list "config" "monitor" "port") "monitorTLS" (list "config" "monitor" "tls" "enabled")
    "serverNamePrefix" (list "config" "serverNamePrefix") }}
{{- $_ := set $v $k (include "drover.natsValue" (dict "root" $ "path" $path) | fromJson).v }}
{{- end }}
{{- $n := dict "tls" (eq (toString $v.tls) "true") "monitorTLS" (eq (toString $v.monitorTLS) "true") }}
{{- $_ := set $n "service" (toString ($v.service | default (include "drover.natsFullname" .))) }}
{{- $_ := set $n "headless" (toString ($v.headless | default (printf "%s-headless" (include "drover.natsFullname" .)))) }}
{{- $_ := set $n "namespace" (toString ($v.namespace | default .Release.Namespace)) }}
{{- /* A false that is set, not a value left out (the subchart's defaults are absent before `helm dependency build`). */}}
{{- $_ := set $n "serviceOff" (eq (toString $v.serviceOn) "false") }}
{{- $_ := set $n "portOff" (eq (toString $v.portOn) "false") }}
{{- $_ := set $n "monitorOff" (eq (toString $v.monitorOn) "false") }}
{{- $_ := set $n "port" (int ($v.port | default 4222)) }}
{{- $_ := set $n "monitorPort" (int ($v.monitorPort | default 8222)) }}
{{- $_ := set $n "serverNamePrefix" (toString ($v.serverNamePrefix | default "")) }}
{{- $host := $n.service }}
{{- if ne $n.namespace .Release.Namespace }}{{ $host = printf "%s.%s.svc" $n.service $n.namespace }}{{ end }}
{{- $_ := set $n "url" (printf "%s://%s:%d" ($n.tls | ternary "tls" "nats") $host $n.port) }}
{{- $_ := set $n "monitoringEndpoint" (printf "%s.%s.svc.%s:%d" $n.headless $n.namespace .Values.clusterDomain $n.monitorPort) }}
{{- /* The CA Drover's pods verify the server with: the subchart's tlsCA, mounted
as that chart mounts it (a ConfigMap before a Secret). */}}
{{- $_ := set $n "caKey" "" }}{{ $_ := set $n "caConfigMap" "" }}{{ $_ := set $n "caSecret" "" }}
{{- if and (eq (toString $v.caOn) "true") (or $v.caConfigMap $v.caSecret) }}
{{- $_ := set $n "caKey" (toString ($v.caKey | default "ca.crt")) }}
{{- if $v.caConfigMap }}{{ $_ := set $n "caConfigMap" (toString $v.caConfigMap) }}{{ else }}{{ $_ := set $n "caSecret" (toString $v.caSecret) }}{{ end }}
{{- end }}
{{- /* Server TLS settings Drover's client cannot meet: client certificates
(verify*), which the chart gives the pods only for externalNats, and TLS before
the server's INFO (handshake_first), which Drover's client does not do. */}}
{{- $unmet := list }}
{{- $tlsMerge := kindIs "map" $v.tlsMerge | ternary $v.tlsMerge dict }}
{{- $keys := list "verify" "verify_and_map" "verify_cert_and_check_known_urls" "handshake_first" }}
{{- range $k := $keys }}
{{- if and (hasKey $tlsMerge $k) (ne (toString (get $tlsMerge $k)) "false") }}{{ $unmet = append $unmet (printf "merge.%s" $k) }}{{ end }}
{{- end }}
{{- range $op := kindIs "slice" $v.tlsPatch | ternary $v.tlsPatch list }}
{{- $p := trimPrefix "/" (toString (get ($op | default dict) "path")) }}
{{- if and (has $p $keys) (ne (toString (get $op "op")) "remove") (ne (toString (get $op "value")) "false") }}{{ $unmet = append $unmet (printf "patch %s" $p) }}{{ end }}
{{- end }}
{{- $_ := set $n "unmetTLS" $unmet }}
{{- $_ := set $n "tlsInMerge" (hasKey (dig "config" "merge" dict .Values.nats) "tls") }}
{{- toJson $n }}
{{- end }}

{{/* The URL Drover's processes connect to (config nats.url). */}}
{{- define "drover.natsURL" -}}
{{- if .Values.nats.enabled }}
{{- (include "drover.nats" . | fromJson).url }}
{{- else }}
{{- .Values.externalNats.url }}
{{- end }}
{{- end }}

{{/* The monitoring endpoint (host:port) KEDA reads consumer lag from. */}}
{{- define "drover.natsMonitoringEndpoint" -}}
{{- if .Values.nats.enabled }}
{{- (include "drover.nats" . | fromJson).monitoringEndpoint }}
{{- else }}
{{- .Values.externalNats.monitoringEndpoint }}
{{- end }}
{{- end }}

{{/* Stream replicas (config nats.replicas). */}}
{{- define "drover.streamReplicas" -}}
{{- if .Values.streamReplicas }}
{{- .Values.streamReplicas }}
{{- else if and .Values.nats.enabled .Values.nats.config.cluster.enabled }}
{{- min 3 (int .Values.nats.config.cluster.replicas) }}
{{- else }}
{{- 1 }}
{{- end }}
{{- end }}

{{/* The Secret with the passwords of Drover's users on the NATS subchart. The NATS
subchart's values compute the same name (values.yaml, nats.container.env). */}}
{{- define "drover.natsAuthSecret" -}}
{{- .Values.global.drover.natsAuth.existingSecret | default (printf "%s-drover-nats-auth" .Release.Name) }}
{{- end }}

{{- define "drover.natsAuthOn" -}}
{{- if and .Values.nats.enabled .Values.global.drover.natsAuth.enabled }}true{{ end }}
{{- end }}

{{/*
The NATS client environment of one role (controller or worker): user and password
on the subchart with auth, or the role's externalNats credentials. Secrets are
referenced (secretKeyRef) or mounted, never copied. Input: dict root, role.
*/}}
{{- define "drover.natsEnv" -}}
{{- $root := .root -}}
{{- if include "drover.natsAuthOn" $root }}
- name: DROVER_NATS_USER
  value: {{ .role | quote }}
- name: DROVER_NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "drover.natsAuthSecret" $root | quote }}
      key: {{ printf "%s-password" .role | quote }}
{{- end }}
{{- if $root.Values.nats.enabled }}
{{- $n := include "drover.nats" $root | fromJson }}
{{- if $n.tls }}
- name: DROVER_NATS_TLS_CA_FILE
  value: {{ printf "/etc/drover/nats-ca/%s" $n.caKey | quote }}
{{- end }}
{{- else }}
{{- $a := index $root.Values.externalNats .role }}
{{- with $a.user }}
- name: DROVER_NATS_USER
  value: {{ . | quote }}
{{- end }}
{{- with $a.passwordSecret }}{{ if .name }}
- name: DROVER_NATS_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ .name | quote }}, key: {{ .key | quote }}}
{{- end }}{{ end }}
{{- with $a.tokenSecret }}{{ if .name }}
- name: DROVER_NATS_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ .name | quote }}, key: {{ .key | quote }}}
{{- end }}{{ end }}
{{- with $a.credsSecret }}{{ if .name }}
- name: DROVER_NATS_CREDS_FILE
  value: {{ printf "/etc/drover/nats-creds/%s" .key | quote }}
{{- end }}{{ end }}
{{- with $a.nkeySecret }}{{ if .name }}
- name: DROVER_NATS_NKEY_FILE
  value: {{ printf "/etc/drover/nats-nkey/%s" .key | quote }}
{{- end }}{{ end }}
{{- with $root.Values.externalNats.tls }}{{ if .secretName }}
- name: DROVER_NATS_TLS_CA_FILE
  value: {{ printf "/etc/drover/nats-tls/%s" .caKey | quote }}
{{- if .certKey }}
- name: DROVER_NATS_TLS_CERT_FILE
  value: {{ printf "/etc/drover/nats-tls/%s" .certKey | quote }}
- name: DROVER_NATS_TLS_KEY_FILE
  value: {{ printf "/etc/drover/nats-tls/%s" .keyKey | quote }}
{{- end }}
{{- end }}{{ end }}
{{- end }}
{{- end }}

{{/* The volumes holding one role's NATS credential files (externalNats), or the
CA of the NATS subchart's TLS. */}}
{{- define "drover.natsVolumes" -}}
{{- $root := .root -}}
{{- if $root.Values.nats.enabled }}
{{- $n := include "drover.nats" $root | fromJson }}
{{- if $n.tls }}
- name: nats-ca
  {{- if $n.caConfigMap }}
  configMap:
    name: {{ $n.caConfigMap | quote }}
  {{- else }}
  secret:
    secretName: {{ $n.caSecret | quote }}
    defaultMode: 0444
  {{- end }}
    items: [{key: {{ $n.caKey | quote }}, path: {{ $n.caKey | quote }}}]
{{- end }}
{{- else }}
{{- $a := index $root.Values.externalNats .role }}
{{- with $a.credsSecret }}{{ if .name }}
- name: nats-creds
  secret:
    secretName: {{ .name | quote }}
    defaultMode: 0440
    items: [{key: {{ .key | quote }}, path: {{ .key | quote }}}]
{{- end }}{{ end }}
{{- with $a.nkeySecret }}{{ if .name }}
- name: nats-nkey
  secret:
    secretName: {{ .name | quote }}
    defaultMode: 0440
    items: [{key: {{ .key | quote }}, path: {{ .key | quote }}}]
{{- end }}{{ end }}
{{- with $root.Values.externalNats.tls }}{{ if .secretName }}
- name: nats-tls
  secret:
    secretName: {{ .secretName | quote }}
    defaultMode: 0440
{{- end }}{{ end }}
{{- end }}
{{- end }}

{{- define "drover.natsVolumeMounts" -}}
{{- $root := .root -}}
{{- if $root.Values.nats.enabled }}
{{- if (include "drover.nats" $root | fromJson).tls }}
- {name: nats-ca, mountPath: /etc/drover/nats-ca, readOnly: true}
{{- end }}
{{- else }}
{{- $a := index $root.Values.externalNats .role }}
{{- if $a.credsSecret.name }}
- {name: nats-creds, mountPath: /etc/drover/nats-creds, readOnly: true}
{{- end }}
{{- if $a.nkeySecret.name }}
- {name: nats-nkey, mountPath: /etc/drover/nats-nkey, readOnly: true}
{{- end }}
{{- if $root.Values.externalNats.tls.secretName }}
- {name: nats-tls, mountPath: /etc/drover/nats-tls, readOnly: true}
{{- end }}
{{- end }}
{{- end }}

{{/*
Drover's configuration file for one role: the user's `config` with the keys the
chart owns set from the other values. Input: dict root, role.
*/}}
{{- define "drover.configFile" -}}
{{- $root := .root -}}
{{- $c := deepCopy ($root.Values.config | default dict) -}}
{{- $_ := set $c "data_dir" "/var/lib/drover" -}}
{{- $_ := set $c "nats" (dict "url" (include "drover.natsURL" $root) "replicas" (include "drover.streamReplicas" $root | int)) -}}
{{- $_ := set $c "http" (dict "listen" (printf ":%d" (int $root.Values.httpPort))) -}}
{{- if eq .role "worker" -}}
{{- $w := deepCopy (get $c "worker" | default dict) -}}
{{- $_ := set $w "pool" $root.Values.worker.pool -}}
{{- $_ := set $w "slots" (int $root.Values.worker.slots) -}}
{{- $_ := set $w "work_dir" "/var/lib/drover/work" -}}
{{- with $root.Values.worker.runtimes }}
{{- $_ := set $w "runtimes" . -}}
{{- end }}
{{- $_ := set $c "worker" $w -}}
{{- else -}}
{{- $_ := unset $c "worker" -}}
{{- end -}}
{{- toYaml $c }}
{{- end }}

{{/* Checks of values that would otherwise fail late, in a pod. Every template
includes it first: Helm renders the templates in no useful order and stops at the
first error, which should be the one naming the value. */}}
{{- define "drover.validate" -}}
{{- $v := .Values -}}
{{- if or (lt (int $v.controller.replicas) 1) (gt (int $v.controller.replicas) 5) }}
{{- fail (printf "controller.replicas: must be 1..5 (got %v): 1, or 2 or 3 for a leader and standbys" $v.controller.replicas) }}
{{- end }}
{{- if not (has $v.controller.antiAffinity (list "soft" "hard" "none")) }}
{{- fail (printf "controller.antiAffinity: must be soft, hard or none (got %q)" $v.controller.antiAffinity) }}
{{- end }}
{{- if and (not $v.nats.enabled) (not $v.externalNats.url) }}
{{- fail "externalNats.url: set it, or nats.enabled=true for the NATS subchart" }}
{{- end }}
{{- if and $v.nats.enabled $v.externalNats.url }}
{{- fail "externalNats.url is set while nats.enabled=true: pick one (nats.enabled=false to use the external NATS)" }}
{{- end }}
{{- if and $v.externalNats.url (not (contains "://" $v.externalNats.url)) }}
{{- fail (printf "externalNats.url: must be a URL like nats://host:4222 (got %q)" $v.externalNats.url) }}
{{- end }}
{{- if not $v.nats.enabled }}
{{- range $role := list "controller" "worker" }}
{{- $a := index $v.externalNats $role }}
{{- $n := 0 }}
{{- if $a.passwordSecret.name }}{{ $n = add1 $n }}{{ end }}
{{- if $a.tokenSecret.name }}{{ $n = add1 $n }}{{ end }}
{{- if $a.credsSecret.name }}{{ $n = add1 $n }}{{ end }}
{{- if $a.nkeySecret.name }}{{ $n = add1 $n }}{{ end }}
{{- if gt $n 1 }}
{{- fail (printf "externalNats.%s: set one of passwordSecret, tokenSecret, credsSecret, nkeySecret" $role) }}
{{- end }}
{{- if and $a.passwordSecret.name (not $a.user) }}
{{- fail (printf "externalNats.%s.user: required with passwordSecret" $role) }}
{{- end }}
{{- end }}
{{- if and $v.externalNats.tls.certKey (not $v.externalNats.tls.keyKey) }}
{{- fail "externalNats.tls.keyKey: required with certKey" }}
{{- end }}
{{- end }}
{{- if $v.nats.enabled }}
{{- $n := include "drover.nats" . | fromJson }}
{{- $dns := "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" }}
{{- if or (not (regexMatch $dns $n.service)) (gt (len $n.service) 63) }}
{{- fail (printf "nats.service.name: %q is not a Service name (a DNS label: lower-case letters, digits and '-'); a $tplYaml program must give one" $n.service) }}
{{- end }}
{{- if or (not (regexMatch $dns $n.headless)) (gt (len $n.headless) 63) }}
{{- fail (printf "nats.headlessService.name: %q is not a Service name (a DNS label)" $n.headless) }}
{{- end }}
{{- if or (not (regexMatch $dns $n.namespace)) (gt (len $n.namespace) 63) }}
{{- fail (printf "nats.namespaceOverride: %q is not a namespace name (a DNS label)" $n.namespace) }}
{{- end }}
{{- if $n.serviceOff }}
{{- fail "nats.service.enabled: Drover's pods connect to NATS through the NATS chart's Service; keep it on (or use nats.enabled=false and externalNats)" }}
{{- end }}
{{- if $n.portOff }}
{{- fail "nats.service.ports.nats.enabled: Drover's pods connect to the client port of the NATS Service; keep it on" }}
{{- end }}
{{- if $n.tlsInMerge }}
{{- fail "nats.config.merge.tls: set the client port's TLS with nats.config.nats.tls (and its merge), which the chart reads to give Drover's pods a tls:// URL and the CA" }}
{{- end }}
{{- if and $n.tls (not (or $n.caSecret $n.caConfigMap)) }}
{{- fail "nats.config.nats.tls.enabled: Drover's pods must verify the NATS server's certificate: set nats.tlsCA (enabled: true, secretName or configMapName, key) to the CA that signed it; the NATS chart and Drover's pods both mount it (with cert-manager, the certificate's Secret holds it as ca.crt)" }}
{{- end }}
{{- range $n.unmetTLS }}
{{- if hasSuffix "handshake_first" . }}
{{- fail (printf "nats.config.nats.tls.%s: the NATS server would expect TLS before it sends its INFO, which Drover's NATS client does not do; leave it out" .) }}
{{- end }}
{{- fail (printf "nats.config.nats.tls.%s: the NATS server would ask for client certificates, which the chart gives Drover's pods only with externalNats (externalNats.tls.certKey/keyKey); leave it out, or use externalNats" .) }}
{{- end }}
{{- if and $v.keda.enabled $n.monitorOff }}
{{- fail "nats.config.monitor.enabled: KEDA reads the attempt consumers' lag from the NATS monitoring endpoint; keep it on with keda.enabled" }}
{{- end }}
{{- if and $v.keda.enabled $n.serverNamePrefix $v.nats.config.cluster.enabled }}
{{- fail (printf "nats.config.serverNamePrefix: KEDA's nats-jetstream scaler reaches a cluster's consumer leader at SERVER_NAME.%s, which resolves only while server names are the pod names; leave serverNamePrefix empty with keda.enabled (got %q)" $n.headless $n.serverNamePrefix) }}
{{- end }}
{{- end }}
{{- if and $v.nats.enabled $v.nats.config.cluster.enabled (lt (int $v.nats.config.cluster.replicas) 3) }}
{{- fail (printf "nats.config.cluster.replicas: a JetStream cluster needs at least 3 servers (got %d)" (int $v.nats.config.cluster.replicas)) }}
{{- end }}
{{- $sr := include "drover.streamReplicas" . | int }}
{{- if or (lt $sr 1) (gt $sr 5) }}
{{- fail (printf "streamReplicas: must be 0 (auto) or 1..5 (got %d)" $sr) }}
{{- end }}
{{- if and $v.nats.enabled (gt $sr 1) (not $v.nats.config.cluster.enabled) }}
{{- fail (printf "streamReplicas: %d replicas need nats.config.cluster.enabled=true" $sr) }}
{{- end }}
{{- if and $v.nats.enabled $v.nats.config.cluster.enabled (gt $sr (int $v.nats.config.cluster.replicas)) }}
{{- fail (printf "streamReplicas: %d is more than the %d NATS servers" $sr (int $v.nats.config.cluster.replicas)) }}
{{- end }}
{{- range $k := list "data_dir" "nats" "http" }}
{{- if hasKey ($v.config | default dict) $k }}
{{- fail (printf "config.%s: set by the chart (see values.yaml: nats, externalNats, streamReplicas, httpPort); remove it from config" $k) }}
{{- end }}
{{- end }}
{{- range $k := list "id" "pool" "slots" "work_dir" "runtimes" }}
{{- if hasKey (dig "worker" dict ($v.config | default dict)) $k }}
{{- fail (printf "config.worker.%s: set by the chart from worker.* values; remove it from config" $k) }}
{{- end }}
{{- end }}
{{- if not (regexMatch "^[A-Za-z0-9][A-Za-z0-9-]{0,62}$" (toString $v.worker.pool)) }}
{{- fail (printf "worker.pool: must be an id, letters, digits and '-' (got %q)" (toString $v.worker.pool)) }}
{{- end }}
{{- if or (lt (int $v.worker.slots) 1) (gt (int $v.worker.slots) 1024) }}
{{- fail (printf "worker.slots: must be 1..1024 (got %d)" (int $v.worker.slots)) }}
{{- end }}
{{- if not (has $v.worker.workDir.type (list "emptyDir" "ephemeral" "persistentVolumeClaim")) }}
{{- fail (printf "worker.workDir.type: must be emptyDir, ephemeral or persistentVolumeClaim (got %q)" $v.worker.workDir.type) }}
{{- end }}
{{- if and (eq $v.worker.workDir.type "persistentVolumeClaim") (not $v.worker.workDir.persistentVolumeClaim.claimName) }}
{{- fail "worker.workDir.persistentVolumeClaim.claimName: required with type persistentVolumeClaim" }}
{{- end }}
{{- $drain := int $v.worker.drainTimeoutSeconds | default 30 }}
{{- if lt (int $v.worker.terminationGracePeriodSeconds) (add $drain 15) }}
{{- fail (printf "worker.terminationGracePeriodSeconds: %d leaves the worker no time to hand its attempts back; it must be at least the drain timeout (%ds) + 15s" (int $v.worker.terminationGracePeriodSeconds) $drain) }}
{{- end }}
{{- range $k := $v.worker.apiKeys }}
{{- if or (not (get $k "name")) (not (get $k "secretName")) (not (get $k "key")) (hasKey $k "value") (hasKey $k "valueFrom") }}
{{- fail (printf "worker.apiKeys: each entry is {name, secretName, key}, read from a Secret; got %v" (omit $k "value")) }}
{{- end }}
{{- end }}
{{- if include "drover.natsAuthOn" . }}
{{- $allow := dig "worker" "publish" "allow" list $v.global.drover.natsAuth.permissions }}
{{- $served := list }}
{{- range $v.global.drover.natsAuth.workerConsumers }}{{ if eq (toString .pool) (toString $v.worker.pool) }}{{ $served = concat $served .runtimes }}{{ end }}{{ end }}
{{- range $rt := include "drover.workerRuntimes" . | fromJsonArray }}
{{- if not (or (has $rt $served) (has ">" $allow)) }}
{{- fail (printf "global.drover.natsAuth.workerConsumers: the workers (pool %s) serve runtime %s, but the worker role may not pull its jobs; list %s under pool %s" $v.worker.pool $rt $rt $v.worker.pool) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $v.keda.enabled }}
{{- if not (include "drover.kedaRuntimes" . | fromJsonArray) }}
{{- fail "keda.runtimes: name the runtimes whose attempt consumers drive the scaling (or set worker.runtimes)" }}
{{- end }}
{{- if not (include "drover.natsMonitoringEndpoint" .) }}
{{- fail "externalNats.monitoringEndpoint: required with keda.enabled (host:port of the NATS monitoring endpoint)" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "drover.kedaRuntimes" -}}
{{- toJson (.Values.keda.runtimes | default .Values.worker.runtimes | default list) }}
{{- end }}

{{/* The runtimes the workers serve: worker.runtimes, else every runtime the
config knows (the built-ins and config.runtimes). */}}
{{- define "drover.workerRuntimes" -}}
{{- $builtin := list "claude-code" "codex" "copilot" "demo" "demo-review" "gemini" "kilo" "opencode" "pi" }}
{{- $configured := keys (dig "runtimes" dict (.Values.config | default dict)) }}
{{- toJson (.Values.worker.runtimes | default (concat $builtin $configured | uniq | sortAlpha)) }}
{{- end }}
