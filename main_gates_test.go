package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fluxcd/pkg/auth"
	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/controller"
	"github.com/afterhooks/helm-controller/internal/features"
)

// builtConfig is everything flags and feature gates decide before a
// manager starts.
type builtConfig struct {
	reconciler *controller.HelmReleaseReconciler
	manager    ctrl.Options
	// ctx is the context the manager would run under.
	ctx context.Context
	// objectLevelIdentity is the provider library's process-wide switch.
	objectLevelIdentity bool
}

// buildConfig parses args as main does and builds the configuration
// without a cluster. Feature gates are process-wide, so tests using it
// must not run in parallel.
func buildConfig(t *testing.T, parent context.Context, args ...string) builtConfig {
	t.Helper()
	var opts options
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	opts.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %v: %v", args, err)
	}
	if err := validate(&opts); err != nil {
		t.Fatalf("validating %v: %v", args, err)
	}
	mgrOpts, err := managerOptions(&opts)
	if err != nil {
		t.Fatalf("manager options for %v: %v", args, err)
	}
	ctx, err := watchMemory(parent, &opts, logr.Discard())
	if err != nil {
		t.Fatalf("watchMemory for %v: %v", args, err)
	}
	configureProviderAuth(&opts)
	return builtConfig{reconciler: newReconciler(&opts), manager: mgrOpts, ctx: ctx,
		objectLevelIdentity: auth.IsObjectLevelWorkloadIdentityEnabled()}
}

// cachedDirectly lists the kinds the manager's client reads past the cache.
func cachedDirectly(o ctrl.Options) []string {
	var kinds []string
	if o.Client.Cache != nil {
		for _, obj := range o.Client.Cache.DisableFor {
			kinds = append(kinds, reflect.TypeOf(obj).Elem().Name())
		}
	}
	return kinds
}

// metadataInformerKinds lists the kinds watched through label-restricted
// metadata informers (the valuesFrom config watches).
func metadataInformerKinds(o ctrl.Options) []string {
	var kinds []string
	for obj := range o.Cache.ByObject {
		if _, typed := obj.(*v2.HelmRelease); !typed {
			kinds = append(kinds, obj.GetObjectKind().GroupVersionKind().Kind)
		}
	}
	return kinds
}

// TestFeatureGateEffects shows, gate by gate, what enabling (or, for a
// default-on gate, disabling) a gate changes in the configuration main
// builds.
func TestFeatureGateEffects(t *testing.T) {
	// OOMWatch reads a memory cgroup; this one is at 99% of its limit.
	cgroup := t.TempDir()
	limitFile, usageFile := filepath.Join(cgroup, "memory.max"), filepath.Join(cgroup, "memory.current")
	for path, content := range map[string]string{limitFile: "1000", usageFile: "990"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oomArgs := []string{"--oom-watch-max-memory-path=" + limitFile, "--oom-watch-current-memory-path=" + usageFile,
		"--oom-watch-interval=10ms"}

	tests := []struct {
		gate string
		// value is what the row sets the gate to: the opposite of its default.
		value string
		// check fails unless the configuration shows the gate's effect; off
		// is built with the gate at its default, on with value.
		check func(t *testing.T, off, on builtConfig)
	}{
		{features.DefaultToAfterHooks, "true", func(t *testing.T, off, on builtConfig) {
			want(t, "DefaultHookOrder", off.reconciler.DefaultHookOrder, v2.BeforeHooks, on.reconciler.DefaultHookOrder, v2.AfterHooks)
		}},
		{"CacheSecretsAndConfigMaps", "true", func(t *testing.T, off, on builtConfig) {
			want(t, "kinds read past the cache", cachedDirectly(off.manager), []string{"Secret", "ConfigMap"}, cachedDirectly(on.manager), []string(nil))
			// Cached reads must see unlabelled objects too, so the config
			// watches can no longer narrow the informers.
			want(t, "label-restricted metadata informers", len(metadataInformerKinds(off.manager)), 2, len(metadataInformerKinds(on.manager)), 0)
		}},
		{"ExternalArtifact", "true", func(t *testing.T, off, on builtConfig) {
			want(t, "WatchExternalArtifacts", off.reconciler.WatchExternalArtifacts, false, on.reconciler.WatchExternalArtifacts, true)
		}},
		{"AdditiveCELDependencyCheck", "true", func(t *testing.T, off, on builtConfig) {
			want(t, "AdditiveCELDependencyCheck", off.reconciler.AdditiveCELDependencyCheck, false, on.reconciler.AdditiveCELDependencyCheck, true)
		}},
		{features.AllowDNSLookups, "true", func(t *testing.T, off, on builtConfig) {
			want(t, "ActionConfig.AllowDNSLookups", off.reconciler.ActionConfig.AllowDNSLookups, false, on.reconciler.ActionConfig.AllowDNSLookups, true)
		}},
		{features.OOMWatch, "true", func(t *testing.T, off, on builtConfig) {
			if off.ctx != context.Background() {
				t.Error("without OOMWatch the manager context is not the signal context")
			}
			select {
			case <-on.ctx.Done():
			case <-time.After(5 * time.Second):
				t.Error("with OOMWatch and usage at 99% of the limit, the manager context was not cancelled")
			}
		}},
		{features.DisableChartDigestTracking, "true", func(t *testing.T, off, on builtConfig) {
			want(t, "DisableChartDigestTracking", off.reconciler.DisableChartDigestTracking, false, on.reconciler.DisableChartDigestTracking, true)
		}},
		{features.UseHelm3Defaults, "true", func(t *testing.T, off, on builtConfig) {
			want(t, "ActionConfig.UseHelm3Defaults", off.reconciler.ActionConfig.UseHelm3Defaults, false, on.reconciler.ActionConfig.UseHelm3Defaults, true)
		}},
		{features.DefaultToRetryOnFailure, "true", func(t *testing.T, off, on builtConfig) {
			want(t, "DefaultToRetryOnFailure", off.reconciler.DefaultToRetryOnFailure, false, on.reconciler.DefaultToRetryOnFailure, true)
		}},
		{"DisableConfigWatchers", "true", func(t *testing.T, off, on builtConfig) {
			want(t, "ConfigWatch.Enabled", off.reconciler.ConfigWatch.Enabled(), true, on.reconciler.ConfigWatch.Enabled(), false)
			want(t, "label-restricted metadata informers", len(metadataInformerKinds(off.manager)), 2, len(metadataInformerKinds(on.manager)), 0)
		}},
		{"DirectSourceFetch", "true", func(t *testing.T, off, on builtConfig) {
			want(t, "DirectSourceFetch", off.reconciler.DirectSourceFetch, false, on.reconciler.DirectSourceFetch, true)
		}},
		{features.CancelHealthCheckOnNewRevision, "true", func(t *testing.T, off, on builtConfig) {
			want(t, "CancelHealthCheckOnNewRevision", off.reconciler.CancelHealthCheckOnNewRevision, false, on.reconciler.CancelHealthCheckOnNewRevision, true)
		}},
		{features.RecreateImmutableResources, "true", func(t *testing.T, off, on builtConfig) {
			want(t, "ActionConfig.RecreateImmutable", off.reconciler.ActionConfig.RecreateImmutable, false, on.reconciler.ActionConfig.RecreateImmutable, true)
		}},
		{features.ObjectLevelWorkloadIdentity, "true", func(t *testing.T, off, on builtConfig) {
			want(t, "provider auth object-level workload identity", off.objectLevelIdentity, false, on.objectLevelIdentity, true)
		}},
		// Upstream ignores these gates (AdoptLegacyReleases since v1.5.0,
		// DetectDrift and CorrectDrift since spec.driftDetection); so do we.
		{features.AdoptLegacyReleases, "true", noEffect},
		{features.DetectDrift, "true", noEffect},
		{features.CorrectDrift, "true", noEffect},
	}

	defaults := gateDefaults(t)
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.gate] = true
		t.Run(tt.gate, func(t *testing.T) {
			if def, ok := defaults[tt.gate]; !ok {
				t.Fatalf("gate %s is not supported", tt.gate)
			} else if (tt.value == "true") == def {
				t.Fatalf("the row sets %s=%s, its default", tt.gate, tt.value)
			}
			off := buildConfig(t, context.Background(), oomArgs...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel() // ends the OOM watch goroutine
			on := buildConfig(t, ctx, append(oomArgs, "--feature-gates="+tt.gate+"="+tt.value)...)
			tt.check(t, off, on)
		})
	}

	for gate := range defaults {
		if !covered[gate] {
			t.Errorf("feature gate %s has no row in TestFeatureGateEffects", gate)
		}
	}
}

// noEffect fails when a gate changes anything in the configuration.
func noEffect(t *testing.T, off, on builtConfig) {
	if !reflect.DeepEqual(off.reconciler, on.reconciler) {
		t.Errorf("the reconciler changed:\n off %+v\n on  %+v", off.reconciler, on.reconciler)
	}
	if off.objectLevelIdentity != on.objectLevelIdentity {
		t.Error("the provider authentication changed")
	}
}

// want reports a field that does not differ between off and on as expected.
func want(t *testing.T, what string, gotOff, wantOff, gotOn, wantOn any) {
	t.Helper()
	if !reflect.DeepEqual(gotOff, wantOff) {
		t.Errorf("%s at the default: %v, want %v", what, gotOff, wantOff)
	}
	if !reflect.DeepEqual(gotOn, wantOn) {
		t.Errorf("%s with the gate changed: %v, want %v", what, gotOn, wantOn)
	}
}

// A missing memory limit does not stop the controller: it says so and runs
// without the watch.
func TestOOMWatchWithoutLimit(t *testing.T) {
	cgroup := t.TempDir()
	limitFile, usageFile := filepath.Join(cgroup, "memory.max"), filepath.Join(cgroup, "memory.current")
	for path, content := range map[string]string{limitFile: "max\n", usageFile: "990"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := buildConfig(t, context.Background(), "--feature-gates=OOMWatch=true",
		"--oom-watch-max-memory-path="+limitFile, "--oom-watch-current-memory-path="+usageFile)
	if c.ctx != context.Background() {
		t.Error("without a memory limit the manager context was wrapped")
	}
}

// The Lease names must be upstream's, so upstream and this controller never
// lead at the same time during an image swap; shards get their own.
func TestLeaderElectionID(t *testing.T) {
	tests := map[string]string{
		"": "helm-controller-leader-election",
		// leaderelection.GenerateID: the first 8 hex digits of sha256(selector).
		"sharding.fluxcd.io/key=shard1": "helm-controller-leader-election-" + shortSHA256("sharding.fluxcd.io/key=shard1"),
	}
	for selector, want := range tests {
		if got := leaderElectionID(selector); got != want {
			t.Errorf("leaderElectionID(%q) = %q, want %q", selector, got, want)
		}
	}
	if leaderElectionID("sharding.fluxcd.io/key=shard1") == leaderElectionID("sharding.fluxcd.io/key=shard2") {
		t.Error("two shards share a Lease")
	}
}

func shortSHA256(s string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))[:8]
}
