package simulator

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParseBehaviour(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		wantErr     string
		wantDelay   time.Duration
		wantFail    string
		// wantCreates lists kind/name of the declared objects.
		wantCreates []string
	}{
		{name: "no annotations"},
		{
			name:        "unrelated annotations are ignored",
			annotations: map[string]string{"example.com/delay": "nonsense"},
		},
		{
			name:        "delay",
			annotations: map[string]string{DelayAnnotation: "1m30s"},
			wantDelay:   90 * time.Second,
		},
		{
			name:        "zero delay",
			annotations: map[string]string{DelayAnnotation: "0s"},
		},
		{
			name:        "delay without unit",
			annotations: map[string]string{DelayAnnotation: "10"},
			wantErr:     DelayAnnotation,
		},
		{
			name:        "negative delay",
			annotations: map[string]string{DelayAnnotation: "-5s"},
			wantErr:     "negative",
		},
		{
			name:        "crash loop",
			annotations: map[string]string{FailAnnotation: "crashloop"},
			wantFail:    FailCrashLoop,
		},
		{
			name:        "exit",
			annotations: map[string]string{FailAnnotation: "exit"},
			wantFail:    FailExit,
		},
		{
			name:        "image pull",
			annotations: map[string]string{FailAnnotation: "image-pull"},
			wantFail:    FailImagePull,
		},
		{
			name:        "unknown failure mode",
			annotations: map[string]string{FailAnnotation: "true"},
			wantErr:     FailAnnotation,
		},
		{
			name: "one YAML manifest",
			annotations: map[string]string{CreatesAnnotation: `
apiVersion: v1
kind: Secret
metadata:
  name: app-credentials
stringData:
  password: hunter2
`},
			wantCreates: []string{"Secret/app-credentials"},
		},
		{
			name: "several YAML documents, empty ones skipped",
			annotations: map[string]string{CreatesAnnotation: `---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker, namespace: other}
`},
			wantCreates: []string{"ConfigMap/settings", "Deployment/worker"},
		},
		{
			name:        "JSON manifest",
			annotations: map[string]string{CreatesAnnotation: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`},
			wantCreates: []string{"Secret/s"},
		},
		{
			name:        "manifest without name",
			annotations: map[string]string{CreatesAnnotation: "apiVersion: v1\nkind: Secret\nmetadata:\n  generateName: s-\n"},
			wantErr:     "metadata.name",
		},
		{
			name:        "manifest without kind",
			annotations: map[string]string{CreatesAnnotation: "apiVersion: v1\nmetadata:\n  name: s\n"},
			wantErr:     "kind",
		},
		{
			name:        "manifest with a malformed apiVersion",
			annotations: map[string]string{CreatesAnnotation: "apiVersion: a/b/c\nkind: Secret\nmetadata:\n  name: s\n"},
			wantErr:     "apiVersion",
		},
		{
			name:        "manifest that is not YAML",
			annotations: map[string]string{CreatesAnnotation: "kind: [unclosed"},
			wantErr:     CreatesAnnotation,
		},
		{
			name:        "empty manifest",
			annotations: map[string]string{CreatesAnnotation: "  \n"},
			wantErr:     "no manifest",
		},
		{
			name:        "manifest that is a list",
			annotations: map[string]string{CreatesAnnotation: "- a\n- b\n"},
			wantErr:     CreatesAnnotation,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := parseBehaviour(tt.annotations)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if b.delay != tt.wantDelay {
				t.Errorf("delay = %v, want %v", b.delay, tt.wantDelay)
			}
			if b.fail != tt.wantFail {
				t.Errorf("fail = %q, want %q", b.fail, tt.wantFail)
			}
			var got []string
			for _, obj := range b.creates {
				got = append(got, obj.GetKind()+"/"+obj.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tt.wantCreates, ",") {
				t.Errorf("creates = %v, want %v", got, tt.wantCreates)
			}
		})
	}
}

func TestParseBehaviourKeepsManifestContent(t *testing.T) {
	b, err := parseBehaviour(map[string]string{CreatesAnnotation: `
apiVersion: v1
kind: Secret
metadata:
  name: s
  namespace: elsewhere
  labels: {app: demo}
stringData:
  password: hunter2
`})
	if err != nil {
		t.Fatal(err)
	}
	obj := b.creates[0]
	if obj.GetNamespace() != "elsewhere" || obj.GetLabels()["app"] != "demo" {
		t.Errorf("metadata not preserved: %v", obj.Object["metadata"])
	}
	if v, _, _ := unstructured.NestedString(obj.Object, "stringData", "password"); v != "hunter2" {
		t.Errorf("stringData.password = %q, want hunter2", v)
	}
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		policy corev1.RestartPolicy
		fail   string
		want   string
	}{
		{corev1.RestartPolicyAlways, "", GateReady},
		{"", "", GateReady},
		{corev1.RestartPolicyNever, "", GateComplete},
		{corev1.RestartPolicyOnFailure, "", GateComplete},
		{corev1.RestartPolicyAlways, FailCrashLoop, GateCrashLoop},
		{corev1.RestartPolicyNever, FailCrashLoop, GateCrashLoop},
		{corev1.RestartPolicyNever, FailExit, GateFail},
		{corev1.RestartPolicyOnFailure, FailExit, GateCrashLoop},
		{corev1.RestartPolicyAlways, FailExit, GateCrashLoop},
	}
	for _, tt := range tests {
		if got := outcome(tt.policy, tt.fail); got != tt.want {
			t.Errorf("outcome(%q, %q) = %q, want %q", tt.policy, tt.fail, got, tt.want)
		}
	}
}
