package crdguard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/afterhooks/helm-controller/test/upstreamcrd"
)

func loadCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return &crd
}

func ourCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	return loadCRD(t, filepath.Join("..", "..", "config", "crd", "bases", "helm.toolkit.fluxcd.io_helmreleases.yaml"))
}

func upstreamCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	path, err := upstreamcrd.Generate(t.TempDir())
	if err != nil {
		t.Fatalf("generating upstream's CRD: %v", err)
	}
	return loadCRD(t, path)
}

// withoutWaitStrategy removes the field from the given actions of the v2 schema.
func withoutWaitStrategy(crd *apiextensionsv1.CustomResourceDefinition, actions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd = crd.DeepCopy()
	for i, v := range crd.Spec.Versions {
		if v.Name != "v2" {
			continue
		}
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		for _, a := range actions {
			props := spec.Properties[a]
			delete(props.Properties, "waitStrategy")
			spec.Properties[a] = props
		}
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	return crd
}

func TestMissingWaitStrategy(t *testing.T) {
	ours := ourCRD(t)
	notServed := ours.DeepCopy()
	for i := range notServed.Spec.Versions {
		notServed.Spec.Versions[i].Served = false
	}
	all := []string{"spec.install.waitStrategy", "spec.upgrade.waitStrategy", "spec.rollback.waitStrategy"}
	tests := []struct {
		name string
		crd  *apiextensionsv1.CustomResourceDefinition
		want []string
	}{
		{"ours", ours, nil},
		{"upstream's", upstreamCRD(t), all},
		{"only install has it", withoutWaitStrategy(ours, "upgrade", "rollback"), all[1:]},
		{"only rollback lacks it", withoutWaitStrategy(ours, "rollback"), all[2:]},
		{"v2 not served", notServed, all},
		{"no versions", &apiextensionsv1.CustomResourceDefinition{}, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MissingWaitStrategy(tt.crd); !slices.Equal(got, tt.want) {
				t.Errorf("MissingWaitStrategy = %v, want %v", got, tt.want)
			}
		})
	}
}

// logLines collects every log line the guard writes.
type logLines struct{ ch chan string }

func (l logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) { l.ch <- prefix + " " + args }, funcr.Options{})
}

func (l logLines) next(t *testing.T) string {
	t.Helper()
	select {
	case line := <-l.ch:
		return line
	case <-time.After(10 * time.Second):
		t.Fatal("no log line within 10s")
		return ""
	}
}

func TestGuardFollowsTheCRD(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	upstream := upstreamCRD(t)
	upstream.ObjectMeta = metav1.ObjectMeta{Name: CRDName}
	cs := fake.NewSimpleClientset(upstream)
	reg := prometheus.NewRegistry()
	logs := logLines{ch: make(chan string, 16)}
	g, err := newGuard(cs, reg, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- g.Start(ctx) }()

	if line := logs.next(t); !contains(line, "afterHooks cannot take effect", "spec.rollback.waitStrategy", "kubectl explain helmrelease.spec.install.waitStrategy") {
		t.Errorf("first log line does not report upstream's CRD with its fix: %s", line)
	}
	if v := testutil.ToFloat64(g.gauge); v != 0 {
		t.Errorf("%s = %v with upstream's CRD, want 0", MetricName, v)
	}

	ours := ourCRD(t)
	ours.ObjectMeta = metav1.ObjectMeta{Name: CRDName}
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, ours, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informer's initial add of upstream's CRD repeats the verdict
	// without a new line; the next line is the change.
	if line := logs.next(t); !contains(line, "has waitStrategy under install, upgrade and rollback") {
		t.Errorf("after applying our CRD the guard logged: %s", line)
	}
	if v := testutil.ToFloat64(g.gauge); v != 1 {
		t.Errorf("%s = %v with our CRD, want 1", MetricName, v)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestGuardForbiddenIsUnknown: when RBAC forbids reading the CRD the gauge
// says Unknown, not Pruned, so the documented alert (== 0) stays quiet, and
// the log says what to grant.
func TestGuardForbiddenIsUnknown(t *testing.T) {
	cs := fake.NewSimpleClientset()
	cs.PrependReactor("get", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
			CRDName, errors.New("RBAC: access denied"))
	})
	logs := logLines{ch: make(chan string, 16)}
	g, err := newGuard(cs, prometheus.NewRegistry(), logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(g.gauge); v != Unknown {
		t.Errorf("%s = %v before the first check, want %d", MetricName, v, Unknown)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatalf("Start returned %v", err)
	}
	if line := logs.next(t); !contains(line, "cannot check it serves waitStrategy", "customresourcedefinitions") {
		t.Errorf("the log does not say the check is not possible: %s", line)
	}
	if v := testutil.ToFloat64(g.gauge); v != Unknown {
		t.Errorf("%s = %v when RBAC forbids the check, want %d", MetricName, v, Unknown)
	}
}
