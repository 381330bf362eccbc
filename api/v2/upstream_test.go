package v2_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// answersDiffer are the methods ours shares with upstream's HelmRelease
// whose answers differ on purpose, and why.
var answersDiffer = map[string]string{
	"GetObjectKind":    "Upstream() sets upstream's kind and version, ours keeps the object's",
	"GroupVersionKind": "Upstream() sets upstream's kind and version, ours keeps the object's",
	"DeepCopyObject":   "each copies into its own type",
}

// upstreamGoHelpers are the helpers of upstream.go named as upstream's
// (FailureCount and RetriesExhausted are compared by compareDerived).
var upstreamGoHelpers = []string{
	"GetReleaseName", "GetReleaseNamespace", "GetStorageNamespace", "GetMaxHistory", "GetTimeout",
	"UsePersistentClient", "GetValues", "GetDriftDetection", "GetTest", "GetWaitStrategy",
	"GetPostRenderStrategy", "GetActiveRemediation", "GetActiveRetry",
}

// helperArgs are the arguments each helper that takes some is asked with.
var helperArgs = map[string][][]any{
	"GetActiveRetry": {{false}, {true}},
}

// sharedHelpers are the names of the methods of *v2.HelmRelease that
// *helmv2.HelmRelease has too, with the same signature and some result
// (which leaves the setters out): the helpers of upstream.go, those ours
// had already, and ObjectMeta's getters.
func sharedHelpers() []string {
	ours, upstream := reflect.TypeFor[*v2.HelmRelease](), reflect.TypeFor[*helmv2.HelmRelease]()
	var names []string
	for m := range ours.Methods() {
		up, ok := upstream.MethodByName(m.Name)
		if !ok || answersDiffer[m.Name] != "" {
			continue
		}
		sameIns := slices.Equal(slices.Collect(m.Type.Ins())[1:], slices.Collect(up.Type.Ins())[1:])
		sameOuts := slices.Equal(slices.Collect(m.Type.Outs()), slices.Collect(up.Type.Outs()))
		if sameIns && sameOuts && m.Type.NumOut() > 0 {
			names = append(names, m.Name)
		}
	}
	return names
}

// compareSharedHelpers asks obj and the upstream object oracle each
// shared helper.
func compareSharedHelpers(t *testing.T, obj *v2.HelmRelease, oracle upstreamOracle) {
	t.Helper()
	names := sharedHelpers()
	for _, helper := range upstreamGoHelpers {
		if !slices.Contains(names, helper) {
			t.Fatalf("%s is not among the shared helpers %v", helper, names)
		}
	}
	for _, name := range names {
		argLists, ok := helperArgs[name]
		if !ok {
			argLists = [][]any{nil}
		}
		for _, args := range argLists {
			got, err := callMethod(obj, name, args)
			if err != nil {
				t.Fatalf("%s: %v (add its arguments to helperArgs)", name, err)
			}
			want, _ := callMethod(oracle.obj, name, args)
			if !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("%s%v: ours %#v, %s %#v", name, args, got, oracle.name, want)
			}
		}
	}
}

// callMethod calls the method name of receiver with args, and returns its
// results.
func callMethod(receiver any, name string, args []any) ([]any, error) {
	method := reflect.ValueOf(receiver).MethodByName(name)
	if method.Type().NumIn() != len(args) {
		return nil, fmt.Errorf("takes %d arguments, %d given", method.Type().NumIn(), len(args))
	}
	in := make([]reflect.Value, len(args))
	for i, arg := range args {
		in[i] = reflect.ValueOf(arg)
	}
	var results []any
	for _, out := range method.Call(in) {
		results = append(results, out.Interface())
	}
	return results, nil
}

// compareDerived checks what callers compute from our helpers and our
// action configurations (GetInstall...) against the same computed from
// oracle: the per-action timeouts and the failure counts.
func compareDerived(t *testing.T, obj *v2.HelmRelease, oracle upstreamOracle) {
	t.Helper()
	up := oracle.obj
	timeouts := map[string][2]metav1.Duration{
		"install":   {obj.GetInstall().GetTimeout(obj.GetTimeout()), up.GetInstall().GetTimeout(up.GetTimeout())},
		"upgrade":   {obj.GetUpgrade().GetTimeout(obj.GetTimeout()), up.GetUpgrade().GetTimeout(up.GetTimeout())},
		"rollback":  {obj.GetRollback().GetTimeout(obj.GetTimeout()), up.GetRollback().GetTimeout(up.GetTimeout())},
		"uninstall": {obj.GetUninstall().GetTimeout(obj.GetTimeout()), up.GetUninstall().GetTimeout(up.GetTimeout())},
		"test":      {obj.GetTest().GetTimeout(obj.GetTimeout()), up.GetTest().GetTimeout(up.GetTimeout())},
	}
	for action, pair := range timeouts {
		if pair[0] != pair[1] {
			t.Errorf("%s timeout: ours %v, %s %v", action, pair[0], oracle.name, pair[1])
		}
	}
	remediations := map[string][2]helmv2.Remediation{
		"install": {obj.GetInstall().GetRemediation(), up.GetInstall().GetRemediation()},
		"upgrade": {obj.GetUpgrade().GetRemediation(), up.GetUpgrade().GetRemediation()},
	}
	for action, pair := range remediations {
		if got, want := obj.FailureCount(pair[0]), pair[1].GetFailureCount(up); got != want {
			t.Errorf("%s FailureCount: ours %d, %s %d", action, got, oracle.name, want)
		}
		if got, want := obj.RetriesExhausted(pair[0]), pair[1].RetriesExhausted(up); got != want {
			t.Errorf("%s RetriesExhausted: ours %t, %s %t", action, got, oracle.name, want)
		}
	}
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
	// 75 characters: with the target namespace, or twice as releaseName,
	// longer than Helm allows (our callers shorten it, upstream does not).
	longName := "a-very-long-release-name-a-very-long-release-name-a-very-long-release-name-"
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

// TestReadHelpersMatchUpstream checks each helper of upstream.go (and
// every other method ours shares with upstream's type) against the same
// question asked of Upstream(), on objects that set what the helpers read,
// and that asking leaves the object as it was.
func TestReadHelpersMatchUpstream(t *testing.T) {
	t.Logf("shared helpers: %v", sharedHelpers())
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

// upstreamOracle is an upstream object that our helpers must answer as.
type upstreamOracle struct {
	name string
	obj  *helmv2.HelmRelease
}

// compareReadHelpers compares obj's helpers with those of its Upstream()
// and, since Upstream() is built from the same view as the helpers, with
// those of upstream's type decoded from obj's JSON; and checks they left
// obj as it was.
func compareReadHelpers(t *testing.T, obj *v2.HelmRelease) {
	t.Helper()
	before := obj.DeepCopy()
	decoded := &helmv2.HelmRelease{}
	mustUnmarshal(t, mustMarshal(t, obj), decoded)
	for _, oracle := range []upstreamOracle{{"Upstream()", obj.Upstream()}, {"upstream's decoding", decoded}} {
		compareSharedHelpers(t, obj, oracle)
		compareDerived(t, obj, oracle)
	}
	if !apiequality.Semantic.DeepEqual(before, obj) {
		t.Errorf("the helpers changed the object:\nbefore: %s\nafter:  %s", mustMarshal(t, before), mustMarshal(t, obj))
	}
}

// TestReadHelpersDoNotCopyTheObject: the read helpers run many times in
// every reconcile; the view they call upstream's helper on stays on the
// stack, so reading a value allocates nothing.
func TestReadHelpersDoNotCopyTheObject(t *testing.T) {
	maxHistory := 3
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}}
	hr.Spec.ReleaseName = "web"
	hr.Spec.TargetNamespace = "prod"
	hr.Spec.MaxHistory = &maxHistory
	reads := map[string]func(){
		"GetReleaseName":      func() { _ = hr.GetReleaseName() },
		"GetReleaseNamespace": func() { _ = hr.GetReleaseNamespace() },
		"GetStorageNamespace": func() { _ = hr.GetStorageNamespace() },
		"GetMaxHistory":       func() { _ = hr.GetMaxHistory() },
		"GetTimeout":          func() { _ = hr.GetTimeout() },
		"UsePersistentClient": func() { _ = hr.UsePersistentClient() },
		"GetDriftDetection":   func() { _ = hr.GetDriftDetection() },
	}
	for name, read := range reads {
		if n := testing.AllocsPerRun(100, read); n != 0 {
			t.Errorf("%s made %v allocations, want 0", name, n)
		}
	}
}
