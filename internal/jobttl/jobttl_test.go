package jobttl

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

func TestDeletesItself(t *testing.T) {
	jobGVK := batchv1.SchemeGroupVersion.WithKind("Job")
	zero, hour := int32(0), int32(3600)
	typed := func(ttl *int32) runtime.Object {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"}, Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ttl}}
	}
	unstructuredJob := func(spec map[string]any) runtime.Object {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate"}, "spec": spec,
		}}
	}
	tests := []struct {
		name string
		info *resource.Info
		want bool
	}{
		{"typed, ttl 0", &resource.Info{Object: typed(&zero), Mapping: &meta.RESTMapping{GroupVersionKind: jobGVK}}, true},
		{"typed, ttl an hour", &resource.Info{Object: typed(&hour), Mapping: &meta.RESTMapping{GroupVersionKind: jobGVK}}, true},
		{"typed, no ttl", &resource.Info{Object: typed(nil), Mapping: &meta.RESTMapping{GroupVersionKind: jobGVK}}, false},
		{"unstructured, ttl 0, kind from the object", &resource.Info{Object: unstructuredJob(map[string]any{"ttlSecondsAfterFinished": int64(0)})}, true},
		{"unstructured, no ttl", &resource.Info{Object: unstructuredJob(map[string]any{"backoffLimit": int64(0)})}, false},
		{"another group's Job", &resource.Info{Object: typed(&zero), Mapping: &meta.RESTMapping{
			GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Job"}}}, false},
		{"no object", &resource.Info{}, false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeletesItself(tc.info); got != tc.want {
				t.Errorf("DeletesItself = %v, want %v", got, tc.want)
			}
			if u, ok := Manifest(tc.info); ok && (u.GetKind() != "Job" || u.GetAPIVersion() != "batch/v1") {
				t.Errorf("manifest is %s %s, want batch/v1 Job", u.GetAPIVersion(), u.GetKind())
			}
		})
	}
}
