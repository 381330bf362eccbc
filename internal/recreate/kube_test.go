package recreate

import (
	"context"
	"errors"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

// Helm's client joins the errors of several objects; each is judged on
// its own, and what is left is joined again on one line.
func TestJoinedErrors(t *testing.T) {
	a, b := errors.New("a failed"), errors.New("b failed")
	tests := []struct {
		name      string
		err       error
		wantParts int
	}{
		{name: "one error", err: a, wantParts: 1},
		{name: "errors.Join", err: errors.Join(a, b), wantParts: 2},
		{name: "joinedErrors", err: joinedErrors{a, b}, wantParts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(splitJoined(tt.err)); got != tt.wantParts {
				t.Errorf("splitJoined gave %d parts, want %d", got, tt.wantParts)
			}
		})
	}
	if got := joined([]error{a}); got != a {
		t.Errorf("joined of one = %v, want it unchanged", got)
	}
	both := joined([]error{a, b})
	if both.Error() != "a failed && b failed" || !errors.Is(both, b) {
		t.Errorf("joined of two = %q, want them on one line, each reachable", both)
	}
}

func TestDescribeAndOriginalOf(t *testing.T) {
	info := func(kind, ns, name string) *resource.Info {
		return &resource.Info{Namespace: ns, Name: name, Mapping: &meta.RESTMapping{
			GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: kind},
			Resource:         schema.GroupVersionResource{Version: "v1", Resource: "x"},
		}}
	}
	if got := describe(info("ConfigMap", "shop", "settings")); got != "ConfigMap/shop/settings" {
		t.Errorf("namespaced: %s", got)
	}
	if got := describe(info("ClusterRole", "", "reader")); got != "ClusterRole/reader" {
		t.Errorf("cluster-scoped: %s", got)
	}
	cm := info("ConfigMap", "shop", "settings")
	if got := originalOf(kube.ResourceList{info("Secret", "shop", "settings"), cm}, info("ConfigMap", "shop", "settings")); len(got) != 1 || got[0] != cm {
		t.Errorf("originalOf = %v, want the ConfigMap of the previous revision", got)
	}
	if got := originalOf(kube.ResourceList{}, cm); len(got) != 0 {
		t.Errorf("originalOf a new object = %v, want none", got)
	}
}

// Each recreate ends with the action's context, by its deadline or, when
// none was given, after Helm's default timeout.
func TestClientContext(t *testing.T) {
	deadline := time.Now().Add(time.Minute)
	ctx, cancel := Wrap(nil, Options{Deadline: deadline}).context()
	defer cancel()
	if got, ok := ctx.Deadline(); !ok || !got.Equal(deadline) {
		t.Errorf("deadline %v, want the action's %v", got, deadline)
	}
	ctx, cancel = Wrap(nil, Options{}).context()
	defer cancel()
	if got, ok := ctx.Deadline(); !ok || time.Until(got) > defaultTimeout || time.Until(got) < defaultTimeout-time.Minute {
		t.Errorf("deadline in %v, want Helm's default %v", time.Until(got), defaultTimeout)
	}
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel = Wrap(nil, Options{Context: parent}).context()
	defer cancel()
	stop()
	if ctx.Err() == nil {
		t.Error("a shutdown of the action's context does not end the recreate's")
	}
}
