package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestSharding runs two shard controllers beside the shared one: each
// reconciles the HelmReleases labelled for its shard and never touches the
// other's, and each holds a Lease of its own.
func TestSharding(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)

	// Each shard runs with leader election on, as a sharded deployment
	// would, so the test can see each shard's Lease. When the test ends,
	// each uninstalls its release, then stops.
	shards := map[string]*framework.Controller{}
	releases := map[string]*v2.HelmRelease{}
	for _, shard := range []string{"shard1", "shard2"} {
		c := env.StartShard(t, ns, framework.ControllerOptions{Shard: shard, LeaderElection: true})
		framework.LogsOnFailure(t, c)
		// A shard a failed step left stopped comes back to uninstall.
		t.Cleanup(func() {
			if c.Running() != nil {
				framework.Restart(t, c)
			}
		})
		shards[shard] = c
		releases[shard] = framework.Sharded(env.PodinfoRelease(ns, "app-"+shard, repo.Name, ""), c)
	}

	for _, hr := range releases {
		if err := env.Client.Create(ctx, hr); err != nil {
			t.Fatalf("creating %s: %v", hr.Name, err)
		}
	}
	for _, hr := range releases {
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	}

	t.Run("each shard has its own Lease", func(t *testing.T) {
		holders := map[string]string{}
		for shard := range shards {
			// Upstream's naming: helm-controller-leader-election-<sha256(selector)[:8]>.
			selector := framework.ShardLabel + "=" + shard
			name := fmt.Sprintf("helm-controller-leader-election-%x", sha256.Sum256([]byte(selector)))[:len("helm-controller-leader-election-")+8]
			lease := &coordinationv1.Lease{}
			env.Eventually(t, time.Minute, "Lease "+name+" held", func(ctx context.Context) error {
				if err := env.Get(ctx, lease, framework.LeaseNamespace, name); err != nil {
					return err
				}
				if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
					return fmt.Errorf("Lease %s has no holder", name)
				}
				return nil
			})
			holders[name] = *lease.Spec.HolderIdentity
		}
		if len(holders) != 2 {
			t.Fatalf("leases %v: the shards share one", holders)
		}
		t.Logf("leases: %v", holders)
	})

	t.Run("each shard reconciles only its own HelmReleases", func(t *testing.T) {
		for shard, c := range shards {
			log, err := c.Log()
			if err != nil {
				t.Fatalf("reading the %s controller log: %v", shard, err)
			}
			for other, hr := range releases {
				mentioned := strings.Contains(log, `"name":"`+hr.Name+`"`)
				if mentioned != (other == shard) {
					t.Errorf("%s controller log mentions %s: %v, want %v", shard, hr.Name, mentioned, other == shard)
				}
			}
		}
		if log, err := env.Controller.Log(); err != nil {
			t.Errorf("reading the shared controller log: %v", err)
		} else if strings.Contains(log, ns) {
			t.Errorf("the shared controller (selector !%s) acted in %s", framework.ShardLabel, ns)
		}
	})

	t.Run("a stopped shard's HelmReleases wait for it", func(t *testing.T) {
		if err := shards["shard2"].Stop(); err != nil {
			t.Fatalf("stopping shard2: %v", err)
		}
		token1 := env.RequestReconcile(t, releases["shard1"])
		token2 := env.RequestReconcile(t, releases["shard2"])
		env.WaitReconcileHandled(t, releases["shard1"], token1, time.Minute)
		// shard1 has handled its request; nobody may handle shard2's.
		env.Consistently(t, 10*time.Second, "shard2's reconcile request stays unhandled without shard2", func(ctx context.Context) error {
			hr := &v2.HelmRelease{}
			if err := env.Get(ctx, hr, ns, releases["shard2"].Name); err != nil {
				return err
			}
			if hr.Status.LastHandledReconcileAt == token2 {
				return fmt.Errorf("request %s was handled while shard2's controller was stopped", token2)
			}
			return nil
		})

		framework.Restart(t, shards["shard2"])
		env.WaitReconcileHandled(t, releases["shard2"], token2, time.Minute)
	})

	// Objects of both shards stayed where their controllers put them.
	var list v2.HelmReleaseList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, hr := range list.Items {
		if latest := hr.Status.History.Latest(); latest == nil || latest.Version != 1 {
			t.Errorf("%s history %s, want one revision", hr.Name, framework.Snapshots(hr.Status.History))
		}
	}
}
