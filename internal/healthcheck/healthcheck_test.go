package healthcheck

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func gadgetCheck(current, inProgress, failed string) kustomize.CustomHealthCheck {
	return kustomize.CustomHealthCheck{
		APIVersion: "e2e.afterhooks.io/v1",
		Kind:       "Gadget",
		HealthCheckExpressions: kustomize.HealthCheckExpressions{
			Current: current, InProgress: inProgress, Failed: failed,
		},
	}
}

func TestCompile(t *testing.T) {
	tests := []struct {
		name    string
		exprs   []kustomize.CustomHealthCheck
		wantNil bool
		wantErr string
	}{
		{name: "none", wantNil: true},
		{name: "valid", exprs: []kustomize.CustomHealthCheck{gadgetCheck("status.phase == 'Ready'", "", "status.phase == 'Broken'")}},
		{name: "whole group", exprs: []kustomize.CustomHealthCheck{{APIVersion: "e2e.afterhooks.io/v1",
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "true"}}}},
		{name: "syntax error in current", exprs: []kustomize.CustomHealthCheck{gadgetCheck("status.phase ==", "", "")},
			wantErr: "Current"},
		{name: "syntax error in failed", exprs: []kustomize.CustomHealthCheck{gadgetCheck("true", "", "status.(")},
			wantErr: "Failed"},
		{name: "current missing", exprs: []kustomize.CustomHealthCheck{gadgetCheck("", "true", "")},
			wantErr: "Current not specified"},
		{name: "duplicate group and kind", exprs: []kustomize.CustomHealthCheck{gadgetCheck("true", "", ""), gadgetCheck("false", "", "")},
			wantErr: "duplicate"},
		// Upstream accepts these (see TestWarnings).
		{name: "apiVersion missing", exprs: []kustomize.CustomHealthCheck{{Kind: "Gadget",
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "true"}}}},
		{name: "apiVersion malformed", exprs: []kustomize.CustomHealthCheck{{APIVersion: "a/b/c", Kind: "Gadget",
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "true"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			readers, err := Compile(tt.exprs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Compile error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if (readers == nil) != tt.wantNil {
				t.Fatalf("Readers nil = %v, want %v", readers == nil, tt.wantNil)
			}
		})
	}
}

// TestWarnings: an apiVersion that is not group/version is accepted, as
// upstream accepts it, judges the core group's kind, and is warned about.
func TestWarnings(t *testing.T) {
	check := func(apiVersion, kind string) kustomize.CustomHealthCheck {
		return kustomize.CustomHealthCheck{APIVersion: apiVersion, Kind: kind,
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "false"}}
	}
	tests := []struct {
		name  string
		entry kustomize.CustomHealthCheck
		want  string
	}{
		{name: "valid", entry: check("e2e.afterhooks.io/v1", "Gadget")},
		{name: "core", entry: check("v1", "ConfigMap")},
		{name: "missing", entry: check("", "ConfigMap"),
			want: `healthCheckExprs[0].apiVersion "" is not group/version (e.g. apps/v1): the entry judges kind "ConfigMap" of the core API group`},
		{name: "malformed", entry: check("a/b/c", "ConfigMap"),
			want: `healthCheckExprs[0].apiVersion "a/b/c" is not group/version (e.g. apps/v1): the entry judges kind "ConfigMap" of the core API group`},
		{name: "malformed without kind", entry: check("a/b/c", ""), want: "the entry judges every kind of the core API group"},
		{name: "group without version", entry: check("apps", "ConfigMap"),
			want: `healthCheckExprs[0].apiVersion "apps" is not group/version (e.g. apps/v1): the entry judges kind "ConfigMap" of the core API group`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exprs := []kustomize.CustomHealthCheck{tt.entry}
			warnings := Warnings(exprs)
			if tt.want == "" {
				if len(warnings) > 0 {
					t.Fatalf("warnings %q, want none", warnings)
				}
				return
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], tt.want) {
				t.Fatalf("warnings %q, want one containing %q", warnings, tt.want)
			}
			// What the warning says is what the reader does.
			build, err := Compile(exprs)
			if err != nil {
				t.Fatal(err)
			}
			core := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(core, meta.RESTScopeNamespace)
			if r := build(mapper)[0]; !r.Supports(core.GroupKind()) {
				t.Errorf("the reader does not judge ConfigMaps")
			}
		})
	}
}

func gadget(generation int64, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.afterhooks.io/v1",
		"kind":       "Gadget",
		"metadata":   map[string]any{"name": "g", "namespace": "ns", "generation": generation},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestReaders(t *testing.T) {
	check := gadgetCheck("status.phase == 'Ready'", "status.phase == 'Provisioning'", "status.phase == 'Broken'")
	tests := []struct {
		name        string
		exprs       []kustomize.CustomHealthCheck
		obj         *unstructured.Unstructured
		want        status.Status
		wantMessage string
	}{
		{name: "current", exprs: []kustomize.CustomHealthCheck{check},
			obj: gadget(1, map[string]any{"phase": "Ready"}), want: status.CurrentStatus, wantMessage: "current expression is true"},
		{name: "failed", exprs: []kustomize.CustomHealthCheck{check},
			obj: gadget(1, map[string]any{"phase": "Broken"}), want: status.FailedStatus, wantMessage: "failed expression is true: status.phase == 'Broken'"},
		{name: "inProgress", exprs: []kustomize.CustomHealthCheck{check},
			obj: gadget(1, map[string]any{"phase": "Provisioning"}), want: status.InProgressStatus, wantMessage: "waiting for the current expression"},
		{name: "no expression true", exprs: []kustomize.CustomHealthCheck{check},
			obj: gadget(1, map[string]any{"phase": "Other"}), want: status.InProgressStatus, wantMessage: "status.phase == 'Ready'"},
		{name: "inProgress wins over current", exprs: []kustomize.CustomHealthCheck{gadgetCheck("true", "true", "")},
			obj: gadget(1, nil), want: status.InProgressStatus},
		{name: "inProgress wins over failed", exprs: []kustomize.CustomHealthCheck{gadgetCheck("true", "true", "true")},
			obj: gadget(1, nil), want: status.InProgressStatus},
		{name: "failed wins over current", exprs: []kustomize.CustomHealthCheck{gadgetCheck("true", "", "true")},
			obj: gadget(1, nil), want: status.FailedStatus},
		{name: "stale observedGeneration", exprs: []kustomize.CustomHealthCheck{check},
			obj: gadget(2, map[string]any{"phase": "Ready", "observedGeneration": int64(1)}), want: status.InProgressStatus},
		{name: "missing field", exprs: []kustomize.CustomHealthCheck{check},
			obj: gadget(1, nil), want: status.UnknownStatus, wantMessage: "failed to evaluate the CEL expression"},
		{name: "whole group", exprs: []kustomize.CustomHealthCheck{{APIVersion: "e2e.afterhooks.io/v1",
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "has(status.phase)"}}},
			obj: gadget(1, map[string]any{"phase": "x"}), want: status.CurrentStatus},
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "e2e.afterhooks.io", Version: "v1", Kind: "Gadget"}, meta.RESTScopeNamespace)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			build, err := Compile(tt.exprs)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			readers := build(mapper)
			if len(readers) != 1 {
				t.Fatalf("%d readers, want 1", len(readers))
			}
			r := readers[0]
			if !r.Supports(tt.obj.GroupVersionKind().GroupKind()) {
				t.Fatalf("reader does not support %s", tt.obj.GroupVersionKind().GroupKind())
			}
			if r.Supports(schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
				t.Fatal("reader supports Deployments; kstatus' own rules must judge them")
			}
			rs, err := r.ReadStatusForObject(context.Background(), nil, tt.obj)
			if err != nil {
				t.Fatalf("ReadStatusForObject: %v", err)
			}
			if rs.Status != tt.want {
				t.Errorf("status %s (%s), want %s", rs.Status, rs.Message, tt.want)
			}
			if !strings.Contains(rs.Message, tt.wantMessage) {
				t.Errorf("message %q, want it to contain %q", rs.Message, tt.wantMessage)
			}
		})
	}
}
