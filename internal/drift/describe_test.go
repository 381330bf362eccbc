package drift

import (
	"testing"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	wjsondiff "github.com/wI2L/jsondiff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func TestDescribeAndCount(t *testing.T) {
	deploy := object("apps/v1", "Deployment", "apps", "podinfo")
	svc := object("v1", "Service", "apps", "podinfo")
	role := object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader")
	cm := object("v1", "ConfigMap", "apps", "settings")
	tests := []struct {
		name              string
		set               jsondiff.DiffSet
		want              string
		drifted, excluded int
	}{
		{name: "nothing", set: nil, want: ""},
		{name: "unchanged and excluded objects are not drift", set: jsondiff.DiffSet{
			jsondiff.NewDiffForUnstructured(deploy, deploy, jsondiff.DiffTypeNone, nil),
			jsondiff.NewDiffForUnstructured(cm, nil, jsondiff.DiffTypeExclude, nil),
		}, want: "", excluded: 1},
		{name: "changed and deleted", set: jsondiff.DiffSet{
			jsondiff.NewDiffForUnstructured(deploy, deploy, jsondiff.DiffTypeUpdate, wjsondiff.Patch{
				{Type: wjsondiff.OperationReplace, Path: "/spec/replicas", Value: 1},
				{Type: wjsondiff.OperationAdd, Path: "/metadata/labels/a", Value: "b"},
				{Type: wjsondiff.OperationRemove, Path: "/spec/paused"},
				{Type: wjsondiff.OperationReplace, Path: "/spec/template/spec/containers/0/image", Value: "x"},
			}),
			jsondiff.NewDiffForUnstructured(svc, nil, jsondiff.DiffTypeCreate, nil),
			jsondiff.NewDiffForUnstructured(role, nil, jsondiff.DiffTypeCreate, nil),
			nil,
		}, want: "Deployment/apps/podinfo changed (1 added, 2 replaced, 1 removed)\nService/apps/podinfo deleted\nClusterRole/reader deleted", drifted: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Describe(tt.set); got != tt.want {
				t.Errorf("Describe:\n%s\nwant:\n%s", got, tt.want)
			}
			drifted, excluded := Count(tt.set)
			if drifted != tt.drifted || excluded != tt.excluded {
				t.Errorf("Count = %d drifted, %d excluded; want %d, %d", drifted, excluded, tt.drifted, tt.excluded)
			}
			if len(Drifted(tt.set)) != tt.drifted {
				t.Errorf("Drifted returned %d diffs, want %d", len(Drifted(tt.set)), tt.drifted)
			}
		})
	}
}

func TestDescribeChanges(t *testing.T) {
	cs := ssa.NewChangeSet()
	cs.Add(ssa.ChangeSetEntry{Subject: "Deployment/apps/podinfo", Action: ssa.ConfiguredAction})
	cs.Add(ssa.ChangeSetEntry{Subject: "ConfigMap/apps/settings", Action: ssa.UnchangedAction})
	cs.Add(ssa.ChangeSetEntry{Subject: "Service/apps/podinfo", Action: ssa.CreatedAction})
	cs.Add(ssa.ChangeSetEntry{Subject: "Secret/apps/token", Action: ssa.SkippedAction})
	want := "Deployment/apps/podinfo configured\nService/apps/podinfo created"
	if got := DescribeChanges(cs); got != want {
		t.Errorf("DescribeChanges:\n%s\nwant:\n%s", got, want)
	}
	if got := DescribeChanges(nil); got != "" {
		t.Errorf("DescribeChanges(nil) = %q", got)
	}
}
