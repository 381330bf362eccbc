package v2_test

import (
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// readHelper is one of our read-only helpers next to what callers wrote
// before it existed: the same question asked of Upstream().
type readHelper struct {
	name     string
	ours     func(*v2.HelmRelease) any
	upstream func(*helmv2.HelmRelease) any
}

// readHelpers lists every helper of upstream.go, and the per-action
// timeouts callers derive from GetTimeout.
var readHelpers = []readHelper{
	{"GetReleaseName",
		func(o *v2.HelmRelease) any { return o.GetReleaseName() },
		func(u *helmv2.HelmRelease) any { return u.GetReleaseName() }},
	{"GetReleaseNamespace",
		func(o *v2.HelmRelease) any { return o.GetReleaseNamespace() },
		func(u *helmv2.HelmRelease) any { return u.GetReleaseNamespace() }},
	{"GetStorageNamespace",
		func(o *v2.HelmRelease) any { return o.GetStorageNamespace() },
		func(u *helmv2.HelmRelease) any { return u.GetStorageNamespace() }},
	{"GetMaxHistory",
		func(o *v2.HelmRelease) any { return o.GetMaxHistory() },
		func(u *helmv2.HelmRelease) any { return u.GetMaxHistory() }},
	{"GetTimeout",
		func(o *v2.HelmRelease) any { return o.GetTimeout() },
		func(u *helmv2.HelmRelease) any { return u.GetTimeout() }},
	{"UsePersistentClient",
		func(o *v2.HelmRelease) any { return o.UsePersistentClient() },
		func(u *helmv2.HelmRelease) any { return u.UsePersistentClient() }},
	{"GetValues",
		func(o *v2.HelmRelease) any { return o.GetValues() },
		func(u *helmv2.HelmRelease) any { return u.GetValues() }},
	{"GetDriftDetection",
		func(o *v2.HelmRelease) any { return o.GetDriftDetection() },
		func(u *helmv2.HelmRelease) any { return u.GetDriftDetection() }},
	{"GetTest",
		func(o *v2.HelmRelease) any { return o.GetTest() },
		func(u *helmv2.HelmRelease) any { return u.GetTest() }},
	{"GetWaitStrategy",
		func(o *v2.HelmRelease) any { return o.GetWaitStrategy() },
		func(u *helmv2.HelmRelease) any { return u.GetWaitStrategy() }},
	{"GetPostRenderStrategy",
		func(o *v2.HelmRelease) any { return o.GetPostRenderStrategy() },
		func(u *helmv2.HelmRelease) any { return u.GetPostRenderStrategy() }},
	{"GetActiveRemediation",
		func(o *v2.HelmRelease) any { return o.GetActiveRemediation() },
		func(u *helmv2.HelmRelease) any { return u.GetActiveRemediation() }},
	{"GetActiveRetry(false)",
		func(o *v2.HelmRelease) any { return o.GetActiveRetry(false) },
		func(u *helmv2.HelmRelease) any { return u.GetActiveRetry(false) }},
	{"GetActiveRetry(true)",
		func(o *v2.HelmRelease) any { return o.GetActiveRetry(true) },
		func(u *helmv2.HelmRelease) any { return u.GetActiveRetry(true) }},
	{"FailureCount(install remediation)",
		func(o *v2.HelmRelease) any { return o.FailureCount(o.GetInstall().GetRemediation()) },
		func(u *helmv2.HelmRelease) any { return u.GetInstall().GetRemediation().GetFailureCount(u) }},
	{"FailureCount(upgrade remediation)",
		func(o *v2.HelmRelease) any { return o.FailureCount(o.GetUpgrade().GetRemediation()) },
		func(u *helmv2.HelmRelease) any { return u.GetUpgrade().GetRemediation().GetFailureCount(u) }},
	{"RetriesExhausted(install remediation)",
		func(o *v2.HelmRelease) any { return o.RetriesExhausted(o.GetInstall().GetRemediation()) },
		func(u *helmv2.HelmRelease) any { return u.GetInstall().GetRemediation().RetriesExhausted(u) }},
	{"RetriesExhausted(upgrade remediation)",
		func(o *v2.HelmRelease) any { return o.RetriesExhausted(o.GetUpgrade().GetRemediation()) },
		func(u *helmv2.HelmRelease) any { return u.GetUpgrade().GetRemediation().RetriesExhausted(u) }},
	{"install timeout",
		func(o *v2.HelmRelease) any { return o.GetInstall().GetTimeout(o.GetTimeout()) },
		func(u *helmv2.HelmRelease) any { return u.GetInstall().GetTimeout(u.GetTimeout()) }},
	{"upgrade timeout",
		func(o *v2.HelmRelease) any { return o.GetUpgrade().GetTimeout(o.GetTimeout()) },
		func(u *helmv2.HelmRelease) any { return u.GetUpgrade().GetTimeout(u.GetTimeout()) }},
	{"rollback timeout",
		func(o *v2.HelmRelease) any { return o.GetRollback().GetTimeout(o.GetTimeout()) },
		func(u *helmv2.HelmRelease) any { return u.GetRollback().GetTimeout(u.GetTimeout()) }},
	{"uninstall timeout",
		func(o *v2.HelmRelease) any { return o.GetUninstall().GetTimeout(o.GetTimeout()) },
		func(u *helmv2.HelmRelease) any { return u.GetUninstall().GetTimeout(u.GetTimeout()) }},
	{"test timeout",
		func(o *v2.HelmRelease) any { return o.GetTest().GetTimeout(o.GetTimeout()) },
		func(u *helmv2.HelmRelease) any { return u.GetTest().GetTimeout(u.GetTimeout()) }},
}

// helperObject is a HelmRelease "app" in namespace "apps", changed by
// each of edits.
func helperObject(edits ...func(*v2.HelmRelease)) *v2.HelmRelease {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "apps"}}
	for _, edit := range edits {
		edit(obj)
	}
	return obj
}

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func ptrTo[T any](v T) *T { return &v }

func attempted(action helmv2.ReleaseAction, installFailures, upgradeFailures int64) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) {
		o.Status.LastAttemptedReleaseAction = action
		o.Status.InstallFailures, o.Status.UpgradeFailures = installFailures, upgradeFailures
	}
}

func remediations(install *helmv2.InstallRemediation, upgrade *helmv2.UpgradeRemediation) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) {
		o.Spec.Install = &v2.Install{Install: helmv2.Install{Remediation: install}}
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Remediation: upgrade}}
	}
}

func strategies(install, upgrade string) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) {
		o.Spec.Install = &v2.Install{Install: helmv2.Install{Strategy: &helmv2.InstallStrategy{Name: install, RetryInterval: duration(time.Minute)}}}
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Strategy: &helmv2.UpgradeStrategy{Name: upgrade}}}
	}
}

func waitStrategy(name helmv2.WaitStrategyName, readiness *metav1.Duration) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) {
		o.Spec.WaitStrategy = &v2.WaitStrategy{Name: name, ReadinessTimeout: readiness}
	}
}

func helperObjects() map[string]*v2.HelmRelease {
	longName := strings.Repeat("a-very-long-release-name-", 3)
	return map[string]*v2.HelmRelease{
		"bare":            helperObject(),
		"targetNamespace": helperObject(func(o *v2.HelmRelease) { o.Spec.TargetNamespace = "prod" }),
		"releaseName": helperObject(func(o *v2.HelmRelease) {
			o.Spec.ReleaseName, o.Spec.TargetNamespace = "custom", "prod"
		}),
		"long name and targetNamespace": helperObject(func(o *v2.HelmRelease) {
			o.Name, o.Spec.TargetNamespace = longName, "production-namespace"
		}),
		"long releaseName":   helperObject(func(o *v2.HelmRelease) { o.Spec.ReleaseName = longName + longName }),
		"storageNamespace":   helperObject(func(o *v2.HelmRelease) { o.Spec.StorageNamespace = "helm-storage" }),
		"storage and target": helperObject(func(o *v2.HelmRelease) { o.Spec.StorageNamespace, o.Spec.TargetNamespace = "s", "t" }),
		"timeouts": helperObject(func(o *v2.HelmRelease) {
			o.Spec.Timeout = duration(2 * time.Minute)
			o.Spec.Install = &v2.Install{Install: helmv2.Install{Timeout: duration(30 * time.Second)}, WaitStrategy: v2.AfterHooks}
			o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Timeout: duration(45 * time.Second)}}
			o.Spec.Rollback = &v2.Rollback{Rollback: helmv2.Rollback{Timeout: duration(time.Minute)}}
			o.Spec.Uninstall = &v2.Uninstall{Uninstall: helmv2.Uninstall{Timeout: duration(10 * time.Second)}, DeleteHookResources: true}
			o.Spec.Test = &helmv2.Test{Enable: true, Timeout: duration(3 * time.Minute)}
		}),
		"spec timeout only": helperObject(func(o *v2.HelmRelease) {
			o.Spec.Timeout = duration(90 * time.Second)
			o.Spec.Rollback = &v2.Rollback{}
			o.Spec.Test = &helmv2.Test{Enable: true, IgnoreFailures: true, Filters: &[]helmv2.Filter{{Name: "smoke", Exclude: true}}}
		}),
		"maxHistory zero, not persistent": helperObject(func(o *v2.HelmRelease) {
			o.Spec.MaxHistory, o.Spec.PersistentClient = ptrTo(0), ptrTo(false)
		}),
		"maxHistory, persistent": helperObject(func(o *v2.HelmRelease) {
			o.Spec.MaxHistory, o.Spec.PersistentClient = ptrTo(10), ptrTo(true)
		}),
		"values": helperObject(func(o *v2.HelmRelease) {
			o.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":2,"image":{"tag":"v1"},"list":[1,"a"]}`)}
		}),
		"values not an object": helperObject(func(o *v2.HelmRelease) {
			o.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`[1,2]`)}
		}),
		"driftDetection": helperObject(func(o *v2.HelmRelease) {
			o.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled, Ignore: []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}}}}
		}),
		"postRenderStrategy":                helperObject(func(o *v2.HelmRelease) { o.Spec.PostRenderStrategy = helmv2.PostRenderStrategySeparate }),
		"waitStrategy ordered":              helperObject(waitStrategy(v2.WaitStrategyOrdered, duration(time.Minute))),
		"waitStrategy poller":               helperObject(waitStrategy(helmv2.WaitStrategyPoller, nil)),
		"waitStrategy legacy":               helperObject(waitStrategy(helmv2.WaitStrategyLegacy, nil)),
		"install attempted, no remediation": helperObject(attempted(helmv2.ReleaseActionInstall, 1, 0)),
		"install retries exhausted": helperObject(
			remediations(&helmv2.InstallRemediation{Retries: 2, RemediateLastFailure: ptrTo(true), IgnoreTestFailures: ptrTo(true)}, nil),
			attempted(helmv2.ReleaseActionInstall, 3, 0)),
		"install retries left": helperObject(
			remediations(&helmv2.InstallRemediation{Retries: 2}, nil),
			attempted(helmv2.ReleaseActionInstall, 2, 7)),
		"upgrade uninstall remediation": helperObject(
			remediations(nil, &helmv2.UpgradeRemediation{Retries: 5, Strategy: ptrTo(helmv2.UninstallRemediationStrategy)}),
			attempted(helmv2.ReleaseActionUpgrade, 0, 2)),
		"upgrade retries exhausted": helperObject(
			remediations(&helmv2.InstallRemediation{Retries: 1}, &helmv2.UpgradeRemediation{Retries: 1, RemediateLastFailure: ptrTo(false)}),
			attempted(helmv2.ReleaseActionUpgrade, 0, 2)),
		"infinite retries": helperObject(
			remediations(&helmv2.InstallRemediation{Retries: -1}, &helmv2.UpgradeRemediation{Retries: -1}),
			attempted(helmv2.ReleaseActionUpgrade, 100, 100)),
		"retry on failure, install attempted": helperObject(
			strategies(string(helmv2.ActionStrategyRetryOnFailure), string(helmv2.ActionStrategyRemediateOnFailure)),
			attempted(helmv2.ReleaseActionInstall, 1, 0)),
		"retry on failure, upgrade attempted": helperObject(
			strategies(string(helmv2.ActionStrategyRetryOnFailure), string(helmv2.ActionStrategyRemediateOnFailure)),
			attempted(helmv2.ReleaseActionUpgrade, 0, 1)),
		"no strategy, upgrade attempted": helperObject(attempted(helmv2.ReleaseActionUpgrade, 0, 1)),
		"other action attempted": helperObject(
			remediations(&helmv2.InstallRemediation{Retries: 1}, &helmv2.UpgradeRemediation{Retries: 1}),
			attempted(helmv2.ReleaseAction("rollback"), 5, 5)),
	}
}

// TestReadHelpersMatchUpstream checks each helper of upstream.go against
// the same question asked of Upstream(), on objects that set what the
// helpers read.
func TestReadHelpersMatchUpstream(t *testing.T) {
	for name, obj := range helperObjects() {
		t.Run(name, func(t *testing.T) { compareReadHelpers(t, obj) })
	}
}

// TestReadHelpersMatchUpstreamAtRandom is TestReadHelpersMatchUpstream on
// objects filled at random.
func TestReadHelpersMatchUpstreamAtRandom(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := newFiller(seed)
	actions := []helmv2.ReleaseAction{helmv2.ReleaseActionInstall, helmv2.ReleaseActionUpgrade, ""}
	for i := 0; i < roundTrips; i++ {
		var filled, obj v2.HelmRelease
		f.Fill(&filled)
		// Decoded, as objects reach the controller: the shadowed upstream
		// fields stay nil (the filler sets them too), which the per-action
		// timeouts, read from our fields, rely on.
		mustUnmarshal(t, mustMarshal(t, &filled), &obj)
		// Random strings never name an action; make the remediation and
		// retry helpers answer something.
		obj.Status.LastAttemptedReleaseAction = actions[i%len(actions)]
		compareReadHelpers(t, &obj)
		if t.Failed() {
			t.Fatalf("object %d differs", i)
		}
	}
}

func compareReadHelpers(t *testing.T, obj *v2.HelmRelease) {
	t.Helper()
	before := obj.DeepCopy()
	for _, h := range readHelpers {
		got, want := h.ours(obj), h.upstream(obj.Upstream())
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: ours %#v, Upstream() %#v", h.name, got, want)
		}
	}
	if diff := cmp.Diff(before, obj); diff != "" {
		t.Errorf("the helpers changed the object (-before +after):\n%s", diff)
	}
}
