package simulator

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestKeysOnly(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "helm"}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.app.v1", ManagedFields: managed},
		Data:       map[string][]byte{"release": []byte("a large blob")},
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", ManagedFields: managed},
		Data:       map[string]string{"level": "debug"},
		BinaryData: map[string][]byte{"logo.png": {1, 2, 3}},
	}
	for _, obj := range []any{secret, cm} {
		if _, err := keysOnly(obj); err != nil {
			t.Fatal(err)
		}
	}
	if got := sets.KeySet(secret.Data); !got.Equal(sets.New("release")) || len(secret.Data["release"]) != 0 {
		t.Errorf("secret data = %v, want the key without its value", secret.Data)
	}
	if !reflect.DeepEqual(cm.Data, map[string]string{"level": ""}) || len(cm.BinaryData["logo.png"]) != 0 {
		t.Errorf("configmap = %v %v, want keys without values", cm.Data, cm.BinaryData)
	}
	if secret.ManagedFields != nil || cm.ManagedFields != nil {
		t.Error("managed fields kept")
	}
	// Tombstones and other objects pass through untouched.
	other := "tombstone"
	if got, err := keysOnly(other); err != nil || got != other {
		t.Errorf("keysOnly(%v) = %v, %v", other, got, err)
	}
}
