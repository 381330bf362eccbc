package helmclient

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/afterhooks/helm-controller/internal/sequencing"
)

func TestStripUnappliable(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a", "annotations": map[string]any{
		sequencing.AnnotationDependsOnGroups: `["db"]`, sequencing.AnnotationResourceGroup: "app", "team": "web",
	}}}}
	if !StripUnappliable(u) {
		t.Fatal("nothing stripped")
	}
	if want := map[string]string{sequencing.AnnotationResourceGroup: "app", "team": "web"}; !reflect.DeepEqual(u.GetAnnotations(), want) {
		t.Errorf("annotations %v, want %v", u.GetAnnotations(), want)
	}
	if StripUnappliable(u) {
		t.Error("stripped twice")
	}

	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{sequencing.AnnotationDependsOnGroups: `["db"]`}}}
	if !StripUnappliable(typed) || typed.Annotations != nil {
		t.Errorf("typed object: annotations %v, want none", typed.Annotations)
	}
}
