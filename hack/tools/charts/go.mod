module github.com/afterhooks/helm-controller/hack/tools/charts

go 1.27.0

// Each module below ships a published Helm chart in its source tree; no Go
// package of theirs is built. hack/tools/build.sh copies the chart
// directories (listed in corpus.txt) into the tool cache. `go mod tidy`
// would drop these requires, as no package imports them: edit this file by
// hand and refresh go.sum with `go mod download` in this directory.
require (
	github.com/aws/karpenter-provider-aws v1.15.2
	github.com/cert-manager/cert-manager v1.21.2
	github.com/cockroachdb/helm-charts v0.0.0-20260828131910-3f65257a73c7
	github.com/external-secrets/external-secrets v0.16.2
	github.com/fluxcd/flagger v1.36.1
	github.com/hashicorp/vault-helm v0.34.1
	github.com/open-policy-agent/gatekeeper/v3 v3.23.1
	k8s.io/ingress-nginx v0.0.0-20240708192948-52c50467d67d
	sigs.k8s.io/descheduler v0.36.0
	sigs.k8s.io/external-dns v0.23.0
	sigs.k8s.io/metrics-server v0.9.0
)
