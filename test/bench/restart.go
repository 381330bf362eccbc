package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restartTimeout: a restart reconciles every release once, each with
// nothing to do.
func restartTimeout(n int) time.Duration { return noopTimeout(n) }

// restartPhase stops the controllers and starts them again, as a rollout
// of the controller would, then waits until the new processes have
// reconciled every release once: the time to steady state after a
// restart. No release may get a new revision on the way.
func (r *run) restartPhase(ctx context.Context) error {
	if err := r.ctls.stop(); err != nil {
		return fmt.Errorf("stopping the controllers for the restart: %w", err)
	}
	began := time.Now()
	ctls, err := startControllers(restarted(r.configs))
	if err != nil {
		return err
	}
	r.ctls = ctls
	if err := r.ctls.waitServing(ctx); err != nil {
		return err
	}
	fmt.Fprintf(r.progress, "restart: serving metrics after %s\n", time.Since(began).Round(100*time.Millisecond))
	profile := r.startCPUProfile(ctx, restartProfileSeconds, "restart-cpu")
	if err := r.waitAllReconciled(ctx); err != nil {
		return err
	}
	r.row.RestartTime = time.Since(began)
	if err := profile.wait(); err != nil {
		return err
	}
	if r.row.RestartCPU, err = r.ctls.cpuTime(); err != nil {
		return err
	}
	revisions, err := r.env.countRevisions(ctx)
	if err != nil {
		return err
	}
	r.row.NewRevisions = revisions - r.releases
	fmt.Fprintf(r.progress, "restart: all %d reconciled in %s, controller CPU %s, new revisions since the install %d\n",
		r.releases, r.row.RestartTime.Round(100*time.Millisecond), r.row.RestartCPU, r.row.NewRevisions)
	if r.row.NewRevisions != 0 {
		return fmt.Errorf("%d new Helm revisions after the install phase; a fleet at rest must make none", r.row.NewRevisions)
	}
	return nil
}

// restarted are configs with logs of their own, so that the first
// processes' logs are kept.
func restarted(configs []controllerConfig) []controllerConfig {
	out := slices.Clone(configs)
	for i := range out {
		out[i].logPath = strings.TrimSuffix(out[i].logPath, ".log") + "-restarted.log"
	}
	return out
}

// waitAllReconciled polls the controllers' per-object reconcile metric
// until together they show every release of the fleet.
func (r *run) waitAllReconciled(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx, restartTimeout(r.releases), "restart: every release reconciled")
	defer cancel()
	seen := 0
	err := pollEvery(ctx, time.Second, func(ctx context.Context) (bool, error) {
		if err := r.ctls.alive(); err != nil {
			return false, err
		}
		reconciled, err := r.reconciled(ctx)
		if err != nil {
			return false, err
		}
		seen = 0
		for i := range r.releases {
			if reconciled[fleetNamespace+"/"+releaseName(i)] > 0 {
				seen++
			}
		}
		return seen == r.releases, nil
	})
	if err != nil {
		return fmt.Errorf("%w; %d of %d releases reconciled", err, seen, r.releases)
	}
	return nil
}

// reconciled counts, per release, how many of the controllers reconciled it.
func (r *run) reconciled(ctx context.Context) (map[string]int, error) {
	counts := map[string]int{}
	for _, c := range r.ctls {
		names, err := c.reconciledReleases(ctx)
		if err != nil {
			return nil, err
		}
		for name := range names {
			counts[name]++
		}
	}
	return counts, nil
}

// checkShards fails a sharded run in which a controller reconciled a
// release of another shard.
func (r *run) checkShards(ctx context.Context) error {
	if r.shards == 0 {
		return nil
	}
	byShard := make([]map[string]bool, len(r.ctls))
	for shard, c := range r.ctls {
		names, err := c.reconciledReleases(ctx)
		if err != nil {
			return err
		}
		byShard[shard] = names
	}
	if wrong := outsideTheirShard(byShard, r.releases); len(wrong) > 0 {
		return fmt.Errorf("releases handled outside their shard: %s", strings.Join(wrong, "; "))
	}
	fmt.Fprintf(r.progress, "shards: each of %d controllers reconciled only its own releases\n", r.shards)
	return nil
}

// outsideTheirShard lists the releases that shard controllers reconciled
// though the fleet of n dealt them to another shard (or to none), given
// what each shard's controller reconciled.
func outsideTheirShard(reconciledByShard []map[string]bool, n int) []string {
	owner := make(map[string]int, n)
	for i := range n {
		owner[fleetNamespace+"/"+releaseName(i)] = shardOf(i, len(reconciledByShard))
	}
	var wrong []string
	for shard, names := range reconciledByShard {
		for name := range names {
			if own, ok := owner[name]; !ok || own != shard {
				wrong = append(wrong, fmt.Sprintf("%s reconciled by %s", name, shardKey(shard)))
			}
		}
	}
	slices.Sort(wrong)
	return wrong
}

// countRevisions is the number of Helm release records in the fleet's
// namespace: one per revision of every release.
func (env *environment) countRevisions(ctx context.Context) (int, error) {
	var secrets corev1.SecretList
	if err := env.client.List(ctx, &secrets, client.InNamespace(fleetNamespace), client.MatchingLabels{"owner": "helm"}); err != nil {
		return 0, fmt.Errorf("listing the Helm release records: %w", err)
	}
	return len(secrets.Items), nil
}
