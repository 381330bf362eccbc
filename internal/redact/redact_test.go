package redact

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestSecretsString(t *testing.T) {
	s := FromData(map[string][]byte{
		"values.yaml": []byte("image:\n  pullPolicy: hunter2-policy\n  tag: v1\nreplicas: 1234567\nenabled: true\ncert: |\n  -----BEGIN CERT-----\n  MIIBszCCAVmgAwIBAgIU\n"),
		"password":    []byte("first,second-part=third"),
	})
	tests := []struct {
		name, msg, want string
	}{
		{name: "a string of a values file", msg: `Unsupported value: "hunter2-policy"`, want: `Unsupported value: "[redacted]"`},
		{name: "a value too short to redact", msg: "tag v1 and enabled true", want: "tag v1 and enabled true"},
		{name: "a number as the message shows it", msg: "replicas 1234567 refused", want: "replicas [redacted] refused"},
		{name: "one line of a multi-line string", msg: "bad line MIIBszCCAVmgAwIBAgIU here", want: "bad line [redacted] here"},
		{name: "the whole raw value", msg: "value first,second-part=third", want: "value [redacted]"},
		{name: "a piece --set syntax splits off", msg: `key "second-part" has no value`, want: `key "[redacted]" has no value`},
		{name: "nothing secret", msg: "Helm install succeeded", want: "Helm install succeeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.String(tc.msg); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.msg, got, tc.want)
			}
		})
	}
}

func TestNothingToRedact(t *testing.T) {
	if s := FromData(map[string][]byte{"k": []byte("short")}); s != nil {
		t.Errorf("FromData of short values = %v, want nil", s.words)
	}
	var s *Secrets
	if got := s.String("anything"); got != "anything" {
		t.Errorf("nil Secrets changed the message: %q", got)
	}
}

func TestRegistryError(t *testing.T) {
	r := NewRegistry()
	key := types.NamespacedName{Namespace: "apps", Name: "web"}
	r.Set(key, FromData(map[string][]byte{"token": []byte("s3cret-token")}))
	cause := errors.New("root cause")
	err := r.Error(key, fmt.Errorf("install failed with s3cret-token: %w", cause))
	if err.Error() != "install failed with [redacted]: root cause" {
		t.Errorf("message %q", err.Error())
	}
	if !errors.Is(err, cause) {
		t.Error("the redacted error no longer wraps its cause")
	}
	other := types.NamespacedName{Namespace: "apps", Name: "other"}
	if got := r.Error(other, errors.New("s3cret-token")).Error(); got != "s3cret-token" {
		t.Errorf("another HelmRelease's message was redacted: %q", got)
	}
	r.Set(key, nil)
	if r.Get(key) != nil {
		t.Error("Set(nil) kept the Secrets")
	}
}
