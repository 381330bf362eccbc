package helmclient

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	helmkube "helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/internal/hookcleanup"
)

// TestCreateMarksOnlyTheHookObjectsItCreates creates hook and other
// objects through a client with HookOrigin, over objects already there or
// not, with Helm's server-side and client-side create, and reads the mark
// each live object ends with.
func TestCreateMarksOnlyTheHookObjectsItCreates(t *testing.T) {
	cfg := sharedAPIServer.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	const ours, theirs = "apps/web", "other/web"
	hookCM := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  annotations:\n    helm.sh/hook: post-install\ndata:\n  step: x\n", name)
	}
	tests := []struct {
		name     string
		manifest string
		// existing is the mark of a ConfigMap of the same name created
		// before; "-" for none, "" for one without a mark.
		existing string
		origin   string
		wantMark string
	}{
		{name: "new hook object", manifest: hookCM("new"), existing: "-", origin: ours, wantMark: ours},
		{name: "another release's object", manifest: hookCM("theirs"), existing: theirs, origin: ours, wantMark: theirs},
		{name: "an unmarked object", manifest: hookCM("unmarked"), existing: "", origin: ours},
		{name: "our own object run again", manifest: hookCM("again"), existing: ours, origin: ours, wantMark: ours},
		{name: "not a hook", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  step: x\n", existing: "-", origin: ours},
		{name: "no origin: the option is off", manifest: hookCM("option-off"), existing: "-"},
	}
	for i, tt := range tests {
		for _, ssa := range []bool{true, false} {
			if !ssa && tt.existing != "-" {
				continue // a client-side create of an existing object fails, as in Helm
			}
			t.Run(fmt.Sprintf("%s, server-side %t", tt.name, ssa), func(t *testing.T) {
				ns := fmt.Sprintf("stamp-%d-%t", i, ssa)
				if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				kc := NewClient(connect.NewGetter(cfg, ns, false), NewFieldValidation())
				kc.Namespace, kc.HookOrigin = ns, tt.origin
				list, err := kc.Build(bytes.NewBufferString(tt.manifest), false)
				if err != nil {
					t.Fatal(err)
				}
				name := list[0].Name
				if tt.existing != "-" {
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"helm.sh/hook": "post-install"}}}
					if tt.existing != "" {
						cm.Annotations[hookcleanup.OriginAnnotation] = tt.existing
					}
					if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := kc.Create(list, helmkube.ClientCreateOptionServerSideApply(ssa, false)); err != nil {
					t.Fatal(err)
				}
				live, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := live.Annotations[hookcleanup.OriginAnnotation]; got != tt.wantMark {
					t.Errorf("mark %q, want %q", got, tt.wantMark)
				}
			})
		}
	}

	t.Run("kinds never deleted are not marked", func(t *testing.T) {
		kc := NewClient(connect.NewGetter(cfg, "default", false), NewFieldValidation())
		kc.Namespace, kc.HookOrigin = "default", ours
		list, err := kc.Build(bytes.NewBufferString("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: stamp-hook-ns\n  annotations:\n    helm.sh/hook: pre-install\n"), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kc.Create(list); err != nil {
			t.Fatal(err)
		}
		live, err := cs.CoreV1().Namespaces().Get(ctx, "stamp-hook-ns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if mark, ok := live.Annotations[hookcleanup.OriginAnnotation]; ok {
			t.Errorf("Namespace marked %q, want no mark", mark)
		}
	})
}
