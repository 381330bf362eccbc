package served

import (
	"path/filepath"
	"strings"
	"testing"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

const externalArtifactsCRD = "externalartifacts.source.toolkit.fluxcd.io"

// apiServer serves source-controller's CRDs except ExternalArtifact's, and
// not this controller's HelmRelease CRD: a Flux older than the
// ExternalArtifact API, and an installation that forgot a CRD.
var apiServer = envtestserver.Shared{SourceCRDs: true, WithoutCRDs: []string{externalArtifactsCRD}}

func TestMain(m *testing.M) { apiServer.Main(m) }

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(sourcev1.AddToScheme(scheme))
	utilruntime.Must(v2.AddToScheme(scheme))
	return scheme
}

func metadataOf(kind string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
}

func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an API server")
	}
	cfg := apiServer.Config(t)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	scheme := testScheme(t)

	const gateFix = "install Flux's source-controller CRDs or turn off the ExternalArtifact feature gate"
	tests := []struct {
		name  string
		kinds []Kind
		// want lists the whole error, one missing kind a line; empty for
		// no error.
		want []string
	}{
		{name: "served source kinds and core kinds",
			kinds: []Kind{{Object: &sourcev1.HelmChart{}}, {Object: &sourcev1.OCIRepository{}},
				{Object: &corev1.ConfigMap{}}, {Object: metadataOf("Secret")}}},
		{name: "ExternalArtifact not served",
			kinds: []Kind{{Object: &sourcev1.OCIRepository{}}, {Object: &sourcev1.ExternalArtifact{}, Fix: gateFix}},
			want:  []string{"the API server does not serve externalartifacts.source.toolkit.fluxcd.io (source.toolkit.fluxcd.io/v1): " + gateFix}},
		{name: "every missing kind is named",
			kinds: []Kind{{Object: &v2.HelmRelease{}, Fix: "apply the CRD"}, {Object: &sourcev1.HelmChart{}}, {Object: &sourcev1.ExternalArtifact{}}},
			want: []string{
				"the API server does not serve helmreleases.helm.toolkit.fluxcd.io (helm.toolkit.fluxcd.io/v2): apply the CRD",
				"the API server does not serve externalartifacts.source.toolkit.fluxcd.io (source.toolkit.fluxcd.io/v1)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(mapper, scheme, tt.kinds)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Check: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check: no error, want %q", tt.want)
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("Check error\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestCheckUnreachable: an API server that does not answer is not a
// missing CRD, and is not reported as one.
func TestCheckUnreachable(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	err = Check(mapper, testScheme(t), []Kind{{Object: &sourcev1.HelmChart{}}})
	if err == nil || strings.Contains(err.Error(), "does not serve") || !strings.Contains(err.Error(), "helmcharts.source.toolkit.fluxcd.io") {
		t.Fatalf("Check: %v, want a failure to ask about helmcharts.source.toolkit.fluxcd.io, not a missing CRD", err)
	}
}

// TestResourceNamesAreCRDNames: the name an error gives a kind is the name
// of its CRD, for every custom kind the controller watches.
func TestResourceNamesAreCRDNames(t *testing.T) {
	binDir, err := cluster.ToolBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	crds, err := envtestserver.CRDs([]string{envtestserver.SourceCRDDir(binDir), filepath.Join("..", "..", "config", "crd", "bases")})
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[schema.GroupKind]string{}
	for _, crd := range crds {
		byKind[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Name
	}
	scheme := testScheme(t)
	for _, obj := range []runtime.Object{&v2.HelmRelease{}, &sourcev1.HelmChart{}, &sourcev1.OCIRepository{}, &sourcev1.ExternalArtifact{}} {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			t.Fatal(err)
		}
		crd, ok := byKind[gvk.GroupKind()]
		if !ok {
			t.Errorf("no CRD for %s", gvk.GroupKind())
			continue
		}
		if got := resourceName(gvk); got != crd {
			t.Errorf("%s is named %q, its CRD %q", gvk.Kind, got, crd)
		}
	}
	// Core kinds have no CRD; their resource is the plural alone.
	if got := resourceName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); got != "configmaps" {
		t.Errorf("ConfigMap is named %q, want configmaps", got)
	}
}
