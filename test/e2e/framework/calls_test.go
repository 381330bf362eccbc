package framework

import (
	"bytes"
	"io"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

func TestParseCall(t *testing.T) {
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.app.v1", Labels: map[string]string{"status": "deployed"}},
	}
	var pb bytes.Buffer
	if err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Encode(secret, &pb); err != nil {
		t.Fatal(err)
	}
	js, err := runtime.Encode(clientgoscheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, target string
		body                 []byte
		want                 Call
	}{
		{"protobuf create", "POST", "/api/v1/namespaces/ns/secrets", pb.Bytes(),
			Call{Verb: "create", Resource: "secrets", Namespace: "ns", Name: secret.Name, Labels: secret.Labels}},
		{"json update", "PUT", "/api/v1/namespaces/ns/secrets/" + secret.Name, js,
			Call{Verb: "update", Resource: "secrets", Namespace: "ns", Name: secret.Name, Labels: secret.Labels}},
		{"apply patch of a group kind", "PATCH", "/apis/apps/v1/namespaces/ns/deployments/app?fieldManager=helm", []byte(`{"metadata":{}}`),
			Call{Verb: "patch", Resource: "deployments", Namespace: "ns", Name: "app"}},
		{"wait by name", "GET", "/apis/apps/v1/namespaces/ns/deployments?fieldSelector=metadata.name%3Dapp&watch=true", nil,
			Call{Verb: "watch", Resource: "deployments", Namespace: "ns", FieldSelector: "metadata.name=app"}},
		{"cluster-scoped get", "GET", "/api/v1/namespaces/ns", nil,
			Call{Verb: "get", Resource: "namespaces", Name: "ns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, bytes.NewReader(tc.body))
			got := ParseCall(r)
			if got.Verb != tc.want.Verb || got.Resource != tc.want.Resource || got.Namespace != tc.want.Namespace ||
				got.Name != tc.want.Name || got.FieldSelector != tc.want.FieldSelector || got.Labels["status"] != tc.want.Labels["status"] {
				t.Errorf("ParseCall = %+v, want %+v", got, tc.want)
			}
			if rest, _ := io.ReadAll(r.Body); !bytes.Equal(rest, tc.body) && len(tc.body) > 0 {
				t.Error("the body was not left for the API server")
			}
		})
	}
}
