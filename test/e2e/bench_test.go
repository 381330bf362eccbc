package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// BenchmarkInstallStrategy measures podinfo (no hook deadlock) from
// HelmRelease creation to Ready under each wait strategy, so the cost of
// afterHooks over Helm's order can be compared. Not part of `make test`:
//
//	go test ./test/e2e -run '^$' -bench InstallStrategy -benchtime 10x
func BenchmarkInstallStrategy(b *testing.B) {
	for _, strategy := range []v2.HookWaitStrategy{v2.BeforeHooks, v2.AfterHooks} {
		b.Run(string(strategy), func(b *testing.B) {
			ctx := context.Background()
			ns := benchNamespace(b)
			repo := createHelmRepository(b, ns)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				hr := podinfoRelease(ns, fmt.Sprintf("podinfo-%d", i), repo)
				hr.Spec.Install = &v2.Install{WaitStrategy: strategy}
				if err := env.Client.Create(ctx, hr); err != nil {
					b.Fatal(err)
				}
				benchWaitReady(b, hr)
			}
		})
	}
}

func benchNamespace(b *testing.B) string {
	b.Helper()
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return name
}

func benchWaitReady(b *testing.B, hr *v2.HelmRelease) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := env.Get(context.Background(), hr, hr.Namespace, hr.Name); err == nil {
			if c := conditions.Get(hr, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue && c.Reason == helmv2.InstallSucceededReason {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("%s/%s not Ready within 2m", hr.Namespace, hr.Name)
}
