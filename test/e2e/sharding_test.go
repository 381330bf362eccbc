package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// leaseNamespace is RUNTIME_NAMESPACE of the controllers startController runs.
const leaseNamespace = "flux-system"

// shardController is a controller process reconciling one shard.
type shardController struct {
	shard string
	// args are extra controller flags.
	args []string
	proc *controllerProcess
	log  string
}

func startShard(t *testing.T, shard string, args ...string) *shardController {
	t.Helper()
	// Leader election needs the Lease namespace.
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the lease namespace: %v", err)
	}
	c := &shardController{shard: shard, args: args, log: filepath.Join(t.TempDir(), shard+".log")}
	c.start(t)
	return c
}

// start runs the controller with leader election on, as a sharded
// deployment would, so the test can see each shard's Lease.
func (c *shardController) start(t *testing.T) {
	t.Helper()
	p, err := startController(env.Binary, env.Cluster.Kubeconfig(), c.log, append([]string{
		"--watch-label-selector=" + crashShardLabel + "=" + c.shard,
		"--enable-leader-election=true"}, c.args...)...)
	if err != nil {
		t.Fatalf("starting the %s controller: %v", c.shard, err)
	}
	c.proc = p
}

func (c *shardController) logText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(c.log)
	if err != nil {
		t.Fatalf("reading the %s controller log: %v", c.shard, err)
	}
	return string(b)
}

// TestSharding runs two shard controllers beside the shared one: each
// reconciles the HelmReleases labelled for its shard and never touches the
// other's, and each holds a Lease of its own.
func TestSharding(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := createHelmRepository(t, ns)

	shards := map[string]*shardController{}
	releases := map[string]*v2.HelmRelease{}
	for _, shard := range []string{"shard1", "shard2"} {
		shards[shard] = startShard(t, shard)
		hr := podinfoRelease(ns, "app-"+shard, repo)
		hr.Labels = map[string]string{crashShardLabel: shard}
		releases[shard] = hr
	}
	t.Cleanup(func() {
		// Uninstall while the shard controllers still run, so the
		// finalizers go, then stop them.
		for shard, hr := range releases {
			_ = env.Client.Delete(context.Background(), hr)
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) && env.Gone(context.Background(), hr) != nil {
				if shards[shard].proc.running() != nil {
					shards[shard].start(t)
				}
				time.Sleep(framework.PollInterval)
			}
		}
		for shard, c := range shards {
			if c.proc.running() == nil {
				if err := c.proc.stop(); err != nil {
					t.Errorf("stopping the %s controller: %v", shard, err)
				}
			}
			if t.Failed() {
				var b strings.Builder
				c.proc.dumpLog(&b, 40)
				t.Logf("%s controller:\n%s", shard, b.String())
			}
		}
	})

	for _, hr := range releases {
		if err := env.Client.Create(ctx, hr); err != nil {
			t.Fatalf("creating %s: %v", hr.Name, err)
		}
	}
	for _, hr := range releases {
		waitReady(t, hr, helmv2.InstallSucceededReason, 3*time.Minute)
	}

	t.Run("each shard has its own Lease", func(t *testing.T) {
		holders := map[string]string{}
		for shard := range shards {
			// Upstream's naming: helm-controller-leader-election-<sha256(selector)[:8]>.
			selector := crashShardLabel + "=" + shard
			name := fmt.Sprintf("helm-controller-leader-election-%x", sha256.Sum256([]byte(selector)))[:len("helm-controller-leader-election-")+8]
			lease := &coordinationv1.Lease{}
			env.Eventually(t, time.Minute, "Lease "+name+" held", func(ctx context.Context) error {
				if err := env.Get(ctx, lease, leaseNamespace, name); err != nil {
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
			log := c.logText(t)
			for other, hr := range releases {
				mentioned := strings.Contains(log, `"name":"`+hr.Name+`"`)
				if mentioned != (other == shard) {
					t.Errorf("%s controller log mentions %s: %v, want %v", shard, hr.Name, mentioned, other == shard)
				}
			}
		}
		if log, err := os.ReadFile(env.Controller.LogPath()); err != nil {
			t.Errorf("reading the shared controller log: %v", err)
		} else if strings.Contains(string(log), ns) {
			t.Errorf("the shared controller (selector !%s) acted in %s", crashShardLabel, ns)
		}
	})

	t.Run("a stopped shard's HelmReleases wait for it", func(t *testing.T) {
		if err := shards["shard2"].proc.stop(); err != nil {
			t.Fatalf("stopping shard2: %v", err)
		}
		token1 := requestReconcile(t, releases["shard1"])
		token2 := requestReconcile(t, releases["shard2"])
		waitReconcileHandled(t, releases["shard1"], token1, time.Minute)
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

		shards["shard2"].start(t)
		waitReconcileHandled(t, releases["shard2"], token2, time.Minute)
	})

	// Objects of both shards stayed where their controllers put them.
	var list v2.HelmReleaseList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, hr := range list.Items {
		if latest := hr.Status.History.Latest(); latest == nil || latest.Version != 1 {
			t.Errorf("%s history %s, want one revision", hr.Name, remSnapshots(hr.Status.History))
		}
	}
}
