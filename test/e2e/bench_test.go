package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
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
			ns := env.Namespace(b)
			repo := env.HelmRepository(b, ns)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				hr := env.PodinfoRelease(ns, fmt.Sprintf("podinfo-%d", i), repo.Name, "")
				hr.Spec.Install = &v2.Install{WaitStrategy: strategy}
				if err := env.Client.Create(ctx, hr); err != nil {
					b.Fatal(err)
				}
				// Polling every 50ms keeps the measurement's resolution.
				env.WaitRelease(b, hr, framework.ReleaseWant{
					Reason: helmv2.InstallSucceededReason, Timeout: 2 * time.Minute, PollInterval: 50 * time.Millisecond,
				})
			}
		})
	}
}
