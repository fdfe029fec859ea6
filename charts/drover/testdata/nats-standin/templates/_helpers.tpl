{{/* Names as the NATS chart documents them: RELEASE-nats unless overridden. */}}
{{- define "nats.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nats.fullname" -}}
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

{{- define "standin.selector" -}}
app.kubernetes.io/name: {{ include "nats.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: nats
{{- end }}

{{/*
The values as every template of the NATS chart sees them: the names defaulted,
then every {$tplYaml: PROGRAM} replaced by the program's output parsed as YAML
and every {$tplYamlSpread: PROGRAM} entry replaced by the keys of its output,
each program run with the chart's context (the NATS chart's README, "tplYaml").
Every program in the values runs, under any key, known or not. As JSON.
*/}}
{{- define "standin.values" -}}
{{- /* Once a render, as the NATS chart does: the templates share this context. */}}
{{- if not (hasKey . "standinValues") }}
{{- $_ := set . "standinValues" (include "standin.evalValues" .) }}
{{- end }}
{{- get . "standinValues" }}
{{- end }}

{{- define "standin.evalValues" -}}
{{- $vals := deepCopy .Values }}
{{- $name := include "nats.fullname" . }}
{{- $_ := set $vals.service "name" (get $vals.service "name" | default $name) }}
{{- $_ := set $vals.headlessService "name" (get $vals.headlessService "name" | default (printf "%s-headless" $name)) }}
{{- $_ := set $vals.configMap "name" (get $vals.configMap "name" | default (printf "%s-config" $name)) }}
{{- $_ := set $vals.statefulSet "name" (get $vals.statefulSet "name" | default $name) }}
{{- $_ := set $vals.config.jetstream.fileStore.pvc "name" ($vals.config.jetstream.fileStore.pvc.name | default (printf "%s-js" $name)) }}
{{- $ctx := dict "Values" $vals "Chart" .Chart "Release" .Release "Capabilities" .Capabilities "Files" .Files "Template" .Template }}
{{- (include "standin.eval" (dict "ctx" $ctx "node" $vals) | fromJson).v | toJson }}
{{- end }}

{{/* One node evaluated, as JSON {"v": node}. Input: dict ctx, node. */}}
{{- define "standin.eval" -}}
{{- $n := .node }}
{{- if not (contains "$tplYaml" (toJson $n)) }}
{{- /* Nothing to evaluate below. */}}
{{- else if and (kindIs "map" $n) (eq (len $n) 1) (hasKey $n "$tplYaml") }}
{{- $n = (include "standin.tpl" (dict "ctx" .ctx "program" (get $n "$tplYaml")) | fromJson).v }}
{{- else if kindIs "map" $n }}
{{- $out := dict }}
{{- range $k, $c := $n }}
{{- if not (and (kindIs "map" $c) (eq (len $c) 1) (hasKey $c "$tplYamlSpread")) }}
{{- $_ := set $out $k (include "standin.eval" (dict "ctx" $.ctx "node" $c) | fromJson).v }}
{{- end }}
{{- end }}
{{- range $k, $c := $n }}
{{- if and (kindIs "map" $c) (eq (len $c) 1) (hasKey $c "$tplYamlSpread") }}
{{- $r := (include "standin.tpl" (dict "ctx" $.ctx "program" (get $c "$tplYamlSpread")) | fromJson).v }}
{{- if kindIs "map" $r }}{{ range $rk, $rv := $r }}{{ $_ := set $out $rk $rv }}{{ end }}
{{- else if not (kindIs "invalid" $r) }}{{ fail (printf "can only $tplYamlSpread a map onto a map (at %s)" $k) }}{{ end }}
{{- end }}
{{- end }}
{{- $n = $out }}
{{- else if kindIs "slice" $n }}
{{- $out := list }}
{{- range $c := $n }}
{{- if and (kindIs "map" $c) (eq (len $c) 1) (hasKey $c "$tplYamlSpread") }}
{{- $r := (include "standin.tpl" (dict "ctx" $.ctx "program" (get $c "$tplYamlSpread")) | fromJson).v }}
{{- if kindIs "slice" $r }}{{ $out = concat $out $r }}{{ else if not (kindIs "invalid" $r) }}{{ fail "can only $tplYamlSpread a list into a list" }}{{ end }}
{{- else }}
{{- $out = append $out (include "standin.eval" (dict "ctx" $.ctx "node" $c) | fromJson).v }}
{{- end }}
{{- end }}
{{- $n = $out }}
{{- end }}
{{- toJson (dict "v" $n) }}
{{- end }}

{{- define "standin.tpl" -}}
{{- $doc := printf "tpl: %s" (nindent 2 (tpl .program .ctx)) | fromYaml }}
{{- if hasKey $doc "Error" }}{{ fail (printf "$tplYaml output is not YAML: %s" $doc.Error) }}{{ end }}
{{- toJson (dict "v" (get $doc "tpl")) }}
{{- end }}

{{- define "standin.namespace" -}}
{{- with get . "namespaceOverride" }}
namespace: {{ . | quote }}
{{- end }}
{{- end }}
