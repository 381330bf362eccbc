package action

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr/testr"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// strictWidgetCRD is a CRD whose schema knows only spec.size, so the API
// server can tell an unknown field.
const strictWidgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.strict.example.com
spec:
  group: strict.example.com
  names: {kind: Gizmo, plural: gizmos, singular: gizmo}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

func gizmo(spec string) string {
	return "apiVersion: strict.example.com/v1\nkind: Gizmo\nmetadata:\n  name: g1\nspec:\n" + spec
}

func deployment(extra string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: c, image: busybox}]
` + extra
}

// countOpenAPI counts the OpenAPI requests made through cfg.
func countOpenAPI(cfg *rest.Config, n *atomic.Int64) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasPrefix(r.URL.Path, "/openapi/") {
				n.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Helm refuses manifests the API server's schema rejects, for built-in
// kinds and for custom resources whose CRD the same chart installs; the
// schema knowledge behind it is fetched once per cluster, not per action
// (see internal/helmclient).
func TestAgainstAPIServerManifestValidation(t *testing.T) {
	var openAPIRequests atomic.Int64
	restCfg := countOpenAPI(apiServer(t), &openAPIRequests)
	cs := kubernetes.NewForConfigOrDie(restCfg)
	createNamespaces(t, cs, "validation")
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	install := func(t *testing.T, name string, chart *chartv2.Chart) error {
		t.Helper()
		cfg, err := factory.Build("validation", "validation", withLogger(testr.New(t)))
		if err != nil {
			t.Fatal(err)
		}
		// No controllers run here: nothing would become ready.
		obj := newHR(func(o *v2.HelmRelease) { o.Name, o.Namespace = name, "validation" },
			withInstall(helmv2.Install{DisableWait: true}))
		_, err = Install(context.Background(), cfg, obj, chart, nil, planned(t, nil, obj, plan.Install, asked{}))
		return err
	}
	chart := func(name string, crds string, templates ...string) *chartv2.Chart {
		c := &chartv2.Chart{Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: name, Version: "1.0.0"}}
		for i, tpl := range templates {
			c.Templates = append(c.Templates, &common.File{Name: "templates/" + string(rune('a'+i)) + ".yaml", Data: []byte(tpl)})
		}
		if crds != "" {
			c.Files = append(c.Files, &common.File{Name: "crds/crd.yaml", Data: []byte(crds)})
		}
		return c
	}

	// knownKinds: every kind in the chart was validated by an earlier
	// case, so the action must not need the OpenAPI schema at all.
	cases := []struct {
		name       string
		chart      *chartv2.Chart
		wantErr    string
		knownKinds bool
	}{
		{name: "valid-deployment", chart: chart("ok", "", deployment(""))},
		{name: "valid-deployment-again", chart: chart("ok", "", deployment("")), knownKinds: true},
		{name: "unknown-field", chart: chart("bad", "", deployment("  bogus: 1\n")), wantErr: "bogus", knownKinds: true},
		{name: "wrong-type", chart: chart("bad", "", deployment("  replicas: many\n")), wantErr: "replicas", knownKinds: true},
		{name: "custom-resource-with-its-crd", chart: chart("crd", strictWidgetCRD, gizmo("  size: 2\n"))},
		{name: "custom-resource-unknown-field", chart: chart("crdbad", "", gizmo("  colour: red\n")), wantErr: "colour", knownKinds: true},
		{name: "custom-resource-wrong-type", chart: chart("crdbad", "", gizmo("  size: big\n")), wantErr: "size", knownKinds: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := openAPIRequests.Load()
			err := install(t, "v"+string(rune('a'+i)), tc.chart)
			if n := openAPIRequests.Load() - before; tc.knownKinds && n > 0 {
				t.Errorf("%d OpenAPI requests for kinds already validated", n)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("install refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("install of an invalid manifest succeeded (want an error naming %q)", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %v does not name %q", err, tc.wantErr)
			}
		})
	}
}
