package runstate

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestUnfinished(t *testing.T) {
	condition := func(kind, status string) any { return map[string]any{"type": kind, "status": status} }
	withStatus := func(status map[string]any) map[string]any {
		obj := map[string]any{"metadata": map[string]any{"name": "x"}}
		if status != nil {
			obj["status"] = status
		}
		return obj
	}
	tests := []struct {
		name string
		gk   schema.GroupKind
		obj  map[string]any
		want string
	}{
		{name: "a Job with an active pod", gk: JobKind, obj: withStatus(map[string]any{"active": int64(1)}),
			want: "a Job that is still running (1 active pods)"},
		{name: "a Job without status", gk: JobKind, obj: withStatus(nil), want: "a Job that has not finished (neither Complete nor Failed)"},
		{name: "a suspended Job", gk: JobKind, obj: withStatus(map[string]any{"conditions": []any{condition("Suspended", "True")}}),
			want: "a Job that has not finished (neither Complete nor Failed)"},
		{name: "a Job whose success criteria are met, pods still finishing", gk: JobKind,
			obj:  withStatus(map[string]any{"conditions": []any{condition("SuccessCriteriaMet", "True")}}),
			want: "a Job that has not finished (neither Complete nor Failed)"},
		{name: "a Job failing, pods still being stopped", gk: JobKind,
			obj:  withStatus(map[string]any{"active": int64(2), "conditions": []any{condition("FailureTarget", "True"), condition("Failed", "True")}}),
			want: "a Job that is still running (2 active pods)"},
		{name: "a Job whose Complete condition is False", gk: JobKind, obj: withStatus(map[string]any{"conditions": []any{condition("Complete", "False")}}),
			want: "a Job that has not finished (neither Complete nor Failed)"},
		{name: "a Job with a condition that is not a map", gk: JobKind, obj: withStatus(map[string]any{"conditions": []any{"Complete"}}),
			want: "a Job that has not finished (neither Complete nor Failed)"},
		{name: "a Job Complete", gk: JobKind, obj: withStatus(map[string]any{"conditions": []any{condition("SuccessCriteriaMet", "True"), condition("Complete", "True")}})},
		{name: "a Job Failed", gk: JobKind, obj: withStatus(map[string]any{"conditions": []any{condition("FailureTarget", "True"), condition("Failed", "True")}})},
		{name: "a Pod running", gk: PodKind, obj: withStatus(map[string]any{"phase": "Running"}), want: "a Pod that has not finished (phase Running)"},
		{name: "a Pod pending", gk: PodKind, obj: withStatus(map[string]any{"phase": "Pending"}), want: "a Pod that has not finished (phase Pending)"},
		{name: "a Pod in phase Unknown", gk: PodKind, obj: withStatus(map[string]any{"phase": "Unknown"}), want: "a Pod that has not finished (phase Unknown)"},
		{name: "a Pod without a phase", gk: PodKind, obj: withStatus(nil), want: "a Pod that has not finished (no phase yet)"},
		{name: "a Pod succeeded", gk: PodKind, obj: withStatus(map[string]any{"phase": "Succeeded"})},
		{name: "a Pod failed", gk: PodKind, obj: withStatus(map[string]any{"phase": "Failed"})},
		{name: "a Deployment: no run to finish", gk: schema.GroupKind{Group: "apps", Kind: "Deployment"}, obj: withStatus(map[string]any{"active": int64(1)})},
		{name: "a ServiceAccount: no run to finish", gk: schema.GroupKind{Kind: "ServiceAccount"}, obj: withStatus(nil)},
		{name: "a custom Job kind of another group", gk: schema.GroupKind{Group: "example.com", Kind: "Job"}, obj: withStatus(map[string]any{"active": int64(1)})},
		{name: "a Pod kind of another group", gk: schema.GroupKind{Group: "example.com", Kind: "Pod"}, obj: withStatus(map[string]any{"phase": "Running"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Unfinished(tt.gk, tt.obj); got != tt.want {
				t.Errorf("Unfinished = %q, want %q", got, tt.want)
			}
		})
	}
}
