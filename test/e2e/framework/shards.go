package framework

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// StartShard starts a controller of the test's own for the HelmReleases of
// one shard, so that it can be killed, restarted or swapped without
// touching other tests. The options' Shard is required; Binary and
// Kubeconfig default to the controller under test and the test cluster.
//
// When the test ends, the controller gets to uninstall the shard's
// releases in ns (so that the namespace can go), then stops.
func (e *Env) StartShard(t testing.TB, ns string, opts ControllerOptions) *Controller {
	t.Helper()
	if opts.Shard == "" {
		t.Fatal("StartShard needs a shard name")
	}
	if opts.Binary == "" {
		opts.Binary = e.Binary
	}
	if opts.Kubeconfig == "" {
		opts.Kubeconfig = e.Cluster.Kubeconfig()
	}
	if opts.LogDir == "" {
		opts.LogDir = t.TempDir()
	}
	if opts.LeaderElection {
		e.ensureLeaseNamespace(t)
	}
	c, err := StartController(opts)
	if err != nil {
		t.Fatalf("starting the %s controller: %v", opts.Shard, err)
	}
	t.Cleanup(func() {
		if c.Running() == nil {
			e.uninstallShard(ns, opts.Shard)
		}
		if err := c.StopAll(); err != nil && !strings.Contains(err.Error(), "exited") {
			t.Errorf("stopping the %s controller: %v", opts.Shard, err)
		}
	})
	return c
}

func (e *Env) ensureLeaseNamespace(t testing.TB) {
	t.Helper()
	err := e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LeaseNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the lease namespace: %v", err)
	}
}

// uninstallShard deletes the shard's HelmReleases in ns and gives their
// controller 30 s to uninstall them and drop its finalizers.
func (e *Env) uninstallShard(ns, shard string) {
	e.DeleteReleases(ns, map[string]string{ShardLabel: shard}, 30*time.Second)
}

// DeleteReleases deletes the HelmReleases in ns (those with the labels,
// when given) and waits up to timeout for their controller to uninstall
// them and drop its finalizers. It is for cleanups: it reports nothing.
func (e *Env) DeleteReleases(ns string, labels map[string]string, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	selector := client.MatchingLabels(labels)
	_ = e.Client.DeleteAllOf(ctx, &v2.HelmRelease{}, client.InNamespace(ns), selector)
	for ctx.Err() == nil {
		var list v2.HelmReleaseList
		if err := e.Client.List(ctx, &list, client.InNamespace(ns), selector); err != nil || len(list.Items) == 0 {
			return
		}
		time.Sleep(PollInterval)
	}
}

// LogsOnFailure marks the start of a step for c and shows the logs of the
// step's controller processes if t fails.
func LogsOnFailure(t testing.TB, c *Controller) {
	t.Helper()
	c.Mark()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var b strings.Builder
		c.DumpLogs(&b, 60)
		t.Log(b.String())
	})
}

// EnsureRunning starts c again if its last process is gone (an earlier
// step failed and left it killed), then marks the start of a step as
// LogsOnFailure does.
func EnsureRunning(t testing.TB, c *Controller) {
	t.Helper()
	if c.Running() != nil {
		Restart(t, c)
	}
	LogsOnFailure(t, c)
}

// MustRun fails the test when c died on its own.
func MustRun(t testing.TB, c *Controller) {
	t.Helper()
	if err := c.Running(); err != nil {
		t.Fatalf("controller %s: %v", c.Options().Shard, err)
	}
}

// Kill kills c with SIGKILL and lets requests already on the wire land
// before the test reads.
func Kill(t testing.TB, c *Controller) {
	t.Helper()
	if err := c.Kill(); err != nil {
		t.Fatalf("killing controller %s: %v", c.Options().Shard, err)
	}
	time.Sleep(300 * time.Millisecond)
}

// Restart starts c again after a kill or stop.
func Restart(t testing.TB, c *Controller) {
	t.Helper()
	if err := c.Start(); err != nil {
		t.Fatalf("starting controller %s again: %v", c.Options().Shard, err)
	}
}
