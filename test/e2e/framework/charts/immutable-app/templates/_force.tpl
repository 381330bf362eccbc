{{- define "immutable-app.force" -}}
{{- if . }}
helm.toolkit.fluxcd.io/force: {{ . }}
{{- end }}
{{- end -}}
