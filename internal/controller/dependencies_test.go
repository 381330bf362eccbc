package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// depOutcome is the kind of result a checkDependencies case expects.
type depOutcome int

const (
	depAllReady depOutcome = iota
	depNotReady
	depInvalid
	depOtherError
)

func (o depOutcome) String() string {
	return [...]string{"nil", "*DependencyNotReadyError", "*InvalidDependencyError", "another error"}[o]
}

// depRelease returns a HelmRelease at generation gen, reconciled up to
// observed, with a Ready condition of the given status ("" for none).
func depRelease(namespace, name string, gen, observed int64, ready metav1.ConditionStatus, msg string) *v2.HelmRelease {
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: gen}}
	hr.Status.ObservedGeneration = observed
	if ready != "" {
		hr.Status.Conditions = []metav1.Condition{{
			Type:               meta.ReadyCondition,
			Status:             ready,
			Reason:             "Testing",
			Message:            msg,
			ObservedGeneration: observed,
			LastTransitionTime: metav1.Now(),
		}}
	}
	return hr
}

// readyRelease returns a HelmRelease that passes the built-in check.
func readyRelease(namespace, name string) *v2.HelmRelease {
	return depRelease(namespace, name, 2, 2, metav1.ConditionTrue, "Helm install succeeded")
}

// withDepValues sets the inline values of hr to raw JSON.
func withDepValues(hr *v2.HelmRelease, raw string) *v2.HelmRelease {
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(raw)}
	return hr
}

func depRef(namespace, name, readyExpr string) v2.DependencyReference {
	return v2.DependencyReference{Namespace: namespace, Name: name, ReadyExpr: readyExpr}
}

func depTestScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := v2.AddToScheme(s); err != nil {
		t.Fatalf("adding HelmRelease types to the scheme: %v", err)
	}
	return s
}

func TestCheckDependencies(t *testing.T) {
	const versionExpr = "dep.spec.values.version == self.spec.values.version"

	cases := []struct {
		name string
		// self is the dependent HelmRelease, default/app unless set.
		self    *v2.HelmRelease
		deps    []v2.DependencyReference
		objects []*v2.HelmRelease
		opts    dependencyOptions

		want depOutcome
		// notReady lists, in order, the keys a *DependencyNotReadyError must name.
		notReady []string
		// contains and absent are substrings the error text must and must not hold.
		contains []string
		absent   []string
		// warns are substrings of the warnings, one each, in order.
		warns []string
	}{
		{
			name:    "no dependencies",
			objects: []*v2.HelmRelease{depRelease("default", "db", 1, 0, metav1.ConditionFalse, "broken")},
			want:    depAllReady,
		},
		{
			name:    "ready dependency",
			deps:    []v2.DependencyReference{depRef("", "db", "")},
			objects: []*v2.HelmRelease{readyRelease("default", "db")},
			want:    depAllReady,
		},
		{
			name:     "missing dependency",
			deps:     []v2.DependencyReference{depRef("", "db", "")},
			objects:  []*v2.HelmRelease{readyRelease("other", "db")},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"dependency 'default/db' not found"},
		},
		{
			name:     "stale observed generation",
			deps:     []v2.DependencyReference{depRef("", "db", "")},
			objects:  []*v2.HelmRelease{depRelease("default", "db", 3, 2, metav1.ConditionTrue, "Helm upgrade succeeded")},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"dependency 'default/db' is not ready: latest generation 3 is not reconciled yet (observed generation 2)"},
		},
		{
			name:     "never reconciled",
			deps:     []v2.DependencyReference{depRef("", "db", "")},
			objects:  []*v2.HelmRelease{depRelease("default", "db", 1, -1, "", "")},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"dependency 'default/db' is not ready: it has no Ready condition yet"},
		},
		{
			name:     "ready condition false includes its message",
			deps:     []v2.DependencyReference{depRef("", "db", "")},
			objects:  []*v2.HelmRelease{depRelease("default", "db", 1, 1, metav1.ConditionFalse, "Helm install failed: timed out")},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"dependency 'default/db' is not ready: Ready condition is False: Helm install failed: timed out"},
		},
		{
			name:     "ready condition unknown",
			deps:     []v2.DependencyReference{depRef("", "db", "")},
			objects:  []*v2.HelmRelease{depRelease("default", "db", 1, 1, metav1.ConditionUnknown, "Reconciliation in progress")},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"Ready condition is Unknown: Reconciliation in progress"},
		},
		{
			name: "dependency in another namespace is looked up there",
			deps: []v2.DependencyReference{depRef("infra", "db", "")},
			// A missing default/db proves the namespace of the reference is used.
			objects: []*v2.HelmRelease{readyRelease("infra", "db")},
			want:    depAllReady,
		},
		{
			name:     "missing dependency in another namespace",
			deps:     []v2.DependencyReference{depRef("infra", "db", "")},
			objects:  []*v2.HelmRelease{readyRelease("default", "db")},
			want:     depNotReady,
			notReady: []string{"infra/db"},
			contains: []string{"dependency 'infra/db' not found"},
		},
		// Upstream checks dependsOn across namespaces whatever
		// --no-cross-namespace-refs says; so does this controller, with
		// a warning.
		{
			name:    "cross-namespace dependency without cross-namespace refs",
			deps:    []v2.DependencyReference{depRef("infra", "db", "")},
			objects: []*v2.HelmRelease{readyRelease("infra", "db")},
			opts:    dependencyOptions{NoCrossNamespaceRefs: true},
			want:    depAllReady,
			warns:   []string{"dependency 'infra/db' is in another namespace than the HelmRelease while cross-namespace references are disabled (--no-cross-namespace-refs)"},
		},
		{
			name:     "cross-namespace dependency without cross-namespace refs, not ready",
			deps:     []v2.DependencyReference{depRef("infra", "db", "")},
			objects:  []*v2.HelmRelease{depRelease("infra", "db", 2, 1, metav1.ConditionTrue, "")},
			opts:     dependencyOptions{NoCrossNamespaceRefs: true},
			want:     depNotReady,
			notReady: []string{"infra/db"},
			warns:    []string{"'infra/db' is in another namespace"},
		},
		{
			name:    "explicit own namespace allowed without cross-namespace refs",
			deps:    []v2.DependencyReference{depRef("default", "db", "")},
			objects: []*v2.HelmRelease{readyRelease("default", "db")},
			opts:    dependencyOptions{NoCrossNamespaceRefs: true},
			want:    depAllReady,
		},
		{
			name:    "namespace defaults to the HelmRelease's",
			self:    depRelease("team-a", "app", 1, 1, "", ""),
			deps:    []v2.DependencyReference{depRef("", "db", "")},
			objects: []*v2.HelmRelease{readyRelease("team-a", "db")},
			opts:    dependencyOptions{NoCrossNamespaceRefs: true},
			want:    depAllReady,
		},
		{
			name:     "defaulted namespace is not another one",
			self:     depRelease("team-a", "app", 1, 1, "", ""),
			deps:     []v2.DependencyReference{depRef("", "db", "")},
			objects:  []*v2.HelmRelease{readyRelease("default", "db")},
			want:     depNotReady,
			notReady: []string{"team-a/db"},
		},
		{
			name:     "dependency on itself",
			deps:     []v2.DependencyReference{depRef("", "app", "")},
			objects:  []*v2.HelmRelease{readyRelease("default", "app")},
			want:     depInvalid,
			contains: []string{"dependency 'default/app' is the HelmRelease itself"},
		},
		{
			name:     "dependency on itself with explicit namespace",
			deps:     []v2.DependencyReference{depRef("default", "app", "")},
			objects:  []*v2.HelmRelease{readyRelease("default", "app")},
			want:     depInvalid,
			contains: []string{"'default/app' is the HelmRelease itself"},
		},
		// A readyExpr alone judges a dependency, itself included, as
		// upstream's does.
		{
			name:    "dependency on itself judged by readyExpr",
			deps:    []v2.DependencyReference{depRef("", "app", "dep.metadata.name == self.metadata.name")},
			objects: []*v2.HelmRelease{depRelease("default", "app", 1, 1, "", "")},
			want:    depAllReady,
		},
		{
			name:     "dependency on itself judged by readyExpr and the built-in check",
			deps:     []v2.DependencyReference{depRef("", "app", "dep.metadata.name == self.metadata.name")},
			objects:  []*v2.HelmRelease{depRelease("default", "app", 1, 1, "", "")},
			opts:     dependencyOptions{AdditiveCEL: true},
			want:     depInvalid,
			contains: []string{"dependency 'default/app' is the HelmRelease itself"},
		},
		{
			name:    "same name in another namespace is not itself",
			deps:    []v2.DependencyReference{depRef("other", "app", "")},
			objects: []*v2.HelmRelease{readyRelease("other", "app")},
			want:    depAllReady,
		},
		{
			name:     "missing name",
			deps:     []v2.DependencyReference{depRef("", "db", ""), depRef("", "", "")},
			objects:  []*v2.HelmRelease{readyRelease("default", "db")},
			want:     depInvalid,
			contains: []string{"spec.dependsOn[1].name"},
		},
		{
			name: "invalid entries are all reported, before readiness",
			deps: []v2.DependencyReference{
				depRef("", "missing", ""),
				depRef("", "app", ""),
				depRef("infra", "db", ""),
				depRef("", "cache", "dep.status.ready =="),
			},
			opts:     dependencyOptions{NoCrossNamespaceRefs: true},
			want:     depInvalid,
			contains: []string{"'default/app' is the HelmRelease itself", "readyExpr of dependency 'default/cache'"},
			absent:   []string{"'default/missing'", "'infra/db'"},
			warns:    []string{"'infra/db' is in another namespace"},
		},
		{
			name: "readyExpr true replaces a failing built-in check",
			deps: []v2.DependencyReference{depRef("", "db", versionExpr)},
			objects: []*v2.HelmRelease{
				withDepValues(depRelease("default", "db", 4, 3, metav1.ConditionFalse, "upgrade failed"), `{"version":"1.2.3"}`),
			},
			want: depAllReady,
		},
		{
			name: "readyExpr false replaces a passing built-in check",
			deps: []v2.DependencyReference{depRef("", "db", versionExpr)},
			objects: []*v2.HelmRelease{
				withDepValues(readyRelease("default", "db"), `{"version":"1.2.2"}`),
			},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"dependency 'default/db' is not ready: readyExpr '" + versionExpr + "' evaluated to false"},
		},
		{
			name: "readyExpr sees apiVersion and kind",
			deps: []v2.DependencyReference{depRef("", "db",
				"dep.kind == 'HelmRelease' && self.apiVersion == 'helm.toolkit.fluxcd.io/v2' && dep.metadata.namespace == self.metadata.namespace")},
			objects: []*v2.HelmRelease{readyRelease("default", "db")},
			want:    depAllReady,
		},
		{
			name:     "multi-line readyExpr is quoted on one line",
			deps:     []v2.DependencyReference{depRef("", "db", "dep.metadata.generation == 1 &&\n  dep.metadata.name == 'db'\n")},
			objects:  []*v2.HelmRelease{readyRelease("default", "db")},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"readyExpr 'dep.metadata.generation == 1 && dep.metadata.name == 'db'' evaluated to false"},
		},
		{
			name: "additive: readyExpr true does not hide a failing built-in check",
			deps: []v2.DependencyReference{depRef("", "db", versionExpr)},
			objects: []*v2.HelmRelease{
				withDepValues(depRelease("default", "db", 1, 1, metav1.ConditionFalse, "upgrade failed"), `{"version":"1.2.3"}`),
			},
			opts:     dependencyOptions{AdditiveCEL: true},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"Ready condition is False: upgrade failed"},
			absent:   []string{"evaluated to false"},
		},
		{
			name: "additive: passing built-in check does not hide readyExpr false",
			deps: []v2.DependencyReference{depRef("", "db", versionExpr)},
			objects: []*v2.HelmRelease{
				withDepValues(readyRelease("default", "db"), `{"version":"1.2.2"}`),
			},
			opts:     dependencyOptions{AdditiveCEL: true},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"readyExpr '" + versionExpr + "' evaluated to false"},
			absent:   []string{"Ready condition"},
		},
		{
			name: "additive: both failing are both reported",
			deps: []v2.DependencyReference{depRef("", "db", versionExpr)},
			objects: []*v2.HelmRelease{
				withDepValues(depRelease("default", "db", 2, 1, metav1.ConditionTrue, "ok"), `{"version":"1.2.2"}`),
			},
			opts:     dependencyOptions{AdditiveCEL: true},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"latest generation 2 is not reconciled yet", "evaluated to false"},
		},
		{
			name: "additive: both passing",
			deps: []v2.DependencyReference{depRef("", "db", versionExpr)},
			objects: []*v2.HelmRelease{
				withDepValues(readyRelease("default", "db"), `{"version":"1.2.3"}`),
			},
			opts: dependencyOptions{AdditiveCEL: true},
			want: depAllReady,
		},
		{
			name:     "readyExpr syntax error",
			deps:     []v2.DependencyReference{depRef("", "db", "dep.metadata.name ==")},
			objects:  []*v2.HelmRelease{readyRelease("default", "db")},
			want:     depInvalid,
			contains: []string{"readyExpr of dependency 'default/db' is not a valid CEL expression", "dep.metadata.name =="},
		},
		{
			name:     "readyExpr with an undeclared variable",
			deps:     []v2.DependencyReference{depRef("", "db", "obj.status.ready == true")},
			objects:  []*v2.HelmRelease{readyRelease("default", "db")},
			want:     depInvalid,
			contains: []string{"undeclared reference", "variables: self, dep"},
		},
		{
			name:     "readyExpr not returning a bool",
			deps:     []v2.DependencyReference{depRef("", "db", "size(dep.metadata.name)")},
			objects:  []*v2.HelmRelease{readyRelease("default", "db")},
			want:     depInvalid,
			contains: []string{"returning a bool", "expected bool"},
		},
		{
			name: "invalid readyExpr is reported even when the dependency is missing",
			deps: []v2.DependencyReference{depRef("", "db", "dep.metadata.name ==")},
			want: depInvalid,
		},
		{
			name:     "readyExpr failing to evaluate keeps waiting",
			deps:     []v2.DependencyReference{depRef("", "db", "dep.status.history[0].chartVersion == '1.0.0'")},
			objects:  []*v2.HelmRelease{readyRelease("default", "db")},
			want:     depNotReady,
			notReady: []string{"default/db"},
			contains: []string{"dependency 'default/db' is not ready: readyExpr could not be evaluated", "history"},
		},
		{
			name: "several unready dependencies are listed together",
			deps: []v2.DependencyReference{
				depRef("", "ready", ""),
				depRef("", "missing", ""),
				depRef("", "failing", ""),
				depRef("infra", "stale", ""),
				depRef("", "picky", "dep.metadata.name == 'nope'"),
			},
			objects: []*v2.HelmRelease{
				readyRelease("default", "ready"),
				depRelease("default", "failing", 1, 1, metav1.ConditionFalse, "chart not found"),
				depRelease("infra", "stale", 5, 4, metav1.ConditionTrue, "ok"),
				readyRelease("default", "picky"),
			},
			want:     depNotReady,
			notReady: []string{"default/missing", "default/failing", "infra/stale", "default/picky"},
			contains: []string{
				"dependency 'default/missing' not found; " +
					"dependency 'default/failing' is not ready: Ready condition is False: chart not found; " +
					"dependency 'infra/stale' is not ready: latest generation 5 is not reconciled yet (observed generation 4); " +
					"dependency 'default/picky' is not ready: readyExpr 'dep.metadata.name == 'nope'' evaluated to false",
			},
			absent: []string{"'default/ready'"},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			self := tc.self
			if self == nil {
				self = depRelease("default", "app", 1, 1, "", "")
			}
			self = self.DeepCopy()
			self.Spec.DependsOn = tc.deps
			withDepValues(self, `{"version":"1.2.3"}`)

			builder := fake.NewClientBuilder().WithScheme(depTestScheme(t))
			for _, obj := range tc.objects {
				builder = builder.WithObjects(obj.DeepCopy())
			}
			var warned []string
			opts := tc.opts
			opts.Warn = func(msg string) { warned = append(warned, msg) }
			err := checkDependencies(context.Background(), builder.Build(), self, opts)
			assertDependencyResult(t, err, tc.want, tc.notReady, tc.contains, tc.absent)
			if len(warned) != len(tc.warns) {
				t.Fatalf("warnings %q, want %d", warned, len(tc.warns))
			}
			for i, w := range tc.warns {
				if !strings.Contains(warned[i], w) {
					t.Errorf("warning %q does not contain %q", warned[i], w)
				}
			}
		})
	}
}

func assertDependencyResult(t *testing.T, err error, want depOutcome, notReady, contains, absent []string) {
	t.Helper()
	var notReadyErr *DependencyNotReadyError
	var invalidErr *InvalidDependencyError
	var got depOutcome
	switch {
	case err == nil:
		got = depAllReady
	case errors.As(err, &notReadyErr):
		got = depNotReady
	case errors.As(err, &invalidErr):
		got = depInvalid
	default:
		got = depOtherError
	}
	if got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
	if err == nil {
		return
	}
	t.Logf("error: %v", err)

	if want == depNotReady {
		var keys []string
		for _, d := range notReadyErr.Dependencies {
			keys = append(keys, d.Key.String())
		}
		if strings.Join(keys, ",") != strings.Join(notReady, ",") {
			t.Errorf("not ready dependencies = %v, want %v", keys, notReady)
		}
	}
	msg := err.Error()
	for _, s := range contains {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not contain %q", msg, s)
		}
	}
	for _, s := range absent {
		if strings.Contains(msg, s) {
			t.Errorf("error %q contains %q", msg, s)
		}
	}
}

func TestCheckDependenciesGetError(t *testing.T) {
	forbidden := apierrors.NewForbidden(v2.GroupVersion.WithResource("helmreleases").GroupResource(), "db", errors.New("no access"))
	c := fake.NewClientBuilder().
		WithScheme(depTestScheme(t)).
		WithObjects(readyRelease("default", "db")).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				return forbidden
			},
		}).
		Build()

	self := depRelease("default", "app", 1, 1, "", "")
	self.Spec.DependsOn = []v2.DependencyReference{depRef("", "db", "")}
	err := checkDependencies(context.Background(), c, self, dependencyOptions{})
	assertDependencyResult(t, err, depOtherError, nil, []string{"failed to get dependency 'default/db'"}, nil)
	if !apierrors.IsForbidden(err) {
		t.Errorf("error %v does not wrap the API error", err)
	}
}

// Once its dependencies are ready, a HelmRelease that was waiting for them
// no longer reads DependencyNotReady: as upstream, Ready turns Unknown
// until this attempt's outcome is known.
func TestMetDependenciesClearTheWait(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(depTestScheme(t)).WithObjects(readyRelease("default", "db")).Build()
	r := &HelmReleaseReconciler{Client: c, EventRecorder: eventlog.New(1)}
	self := depRelease("default", "app", 1, 1, "", "")
	self.Spec.DependsOn = []v2.DependencyReference{depRef("", "db", "")}
	conditions.MarkFalse(self, meta.ReadyCondition, helmv2.DependencyNotReadyReason, "dependency 'default/db' is not ready")

	if _, wait, _ := r.waitForDependencies(context.Background(), self); wait {
		t.Fatal("waits for a ready dependency")
	}
	ready := conditions.Get(self, meta.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionUnknown || ready.Reason != meta.ProgressingReason {
		t.Errorf("Ready %+v, want Unknown/Progressing", ready)
	}
}

// TestInvalidDependenciesStall: a spec.dependsOn that cannot work as
// written stalls the HelmRelease, as upstream's terminal error does: the
// generation counts as reconciled (kstatus reads Stalled only then), and a
// readyExpr that does not compile is reported with upstream's reason,
// InvalidCELExpression, which alerts key on.
func TestInvalidDependenciesStall(t *testing.T) {
	tests := []struct {
		name      string
		dep       v2.DependencyReference
		reason    string
		inMessage string
	}{
		{name: "readyExpr not CEL", dep: depRef("", "db", "dep.status =="), reason: meta.InvalidCELExpressionReason,
			inMessage: "readyExpr of dependency 'default/db' is not a valid CEL expression"},
		{name: "readyExpr not a bool", dep: depRef("", "db", "dep.metadata.name"), reason: meta.InvalidCELExpressionReason,
			inMessage: "readyExpr of dependency 'default/db'"},
		{name: "itself", dep: depRef("", "app", ""), reason: invalidDependencyReason,
			inMessage: "dependency 'default/app' is the HelmRelease itself"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app", Generation: 3,
				Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
			hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
			hr.Spec.DependsOn = []v2.DependencyReference{tc.dep}
			c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr, readyRelease("default", "db")).
				WithStatusSubresource(&v2.HelmRelease{}).Build()
			events := eventlog.New(10)
			r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: events, FieldManager: ControllerName,
				RequeueDependency: time.Second}

			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hr)})
			if !errors.Is(err, ctrlreconcile.TerminalError(nil)) || !res.IsZero() {
				t.Errorf("Reconcile = %+v, %v; want no requeue and a terminal error, as upstream: nothing changes until the spec does", res, err)
			}
			got := &v2.HelmRelease{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(hr), got); err != nil {
				t.Fatal(err)
			}
			for _, typ := range []string{meta.ReadyCondition, meta.StalledCondition} {
				want := metav1.ConditionFalse
				if typ == meta.StalledCondition {
					want = metav1.ConditionTrue
				}
				c := conditions.Get(got, typ)
				if c == nil || c.Status != want || c.Reason != tc.reason || !strings.Contains(c.Message, tc.inMessage) {
					t.Errorf("%s = %+v, want %s/%s naming %q", typ, c, want, tc.reason, tc.inMessage)
				}
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d at generation %d: a stalled HelmRelease must observe its generation",
					got.Status.ObservedGeneration, got.Generation)
			}
			if conditions.Has(got, meta.ReconcilingCondition) {
				t.Errorf("Reconciling still set on a stalled HelmRelease: %s", conditions.GetMessage(got, meta.ReconcilingCondition))
			}
			select {
			case e := <-events.Events:
				if !strings.HasPrefix(e, "Warning "+tc.reason+" ") || !strings.Contains(e, tc.inMessage) {
					t.Errorf("event %q, want a Warning %s naming %q", e, tc.reason, tc.inMessage)
				}
			default:
				t.Errorf("no event, want a Warning %s", tc.reason)
			}
		})
	}
}

// TestDependencyCycle: HelmReleases that depend on each other wait, as
// upstream's do (DependencyNotReady, rechecked), with a message that names
// the cycle and stays the same from one check to the next. Quoting the
// other's Ready message, which quotes this one's, made both messages grow
// at every recheck until the status no longer fitted its schema.
func TestDependencyCycle(t *testing.T) {
	a := depRelease("default", "a", 1, 0, "", "")
	a.Spec.DependsOn = []v2.DependencyReference{depRef("", "b", "")}
	b := depRelease("default", "b", 1, 0, "", "")
	b.Spec.DependsOn = []v2.DependencyReference{depRef("", "c", "")}
	c := depRelease("default", "c", 1, 0, "", "")
	c.Spec.DependsOn = []v2.DependencyReference{depRef("", "a", ""), depRef("", "missing", "")}
	// d depends on the cycle without being part of it.
	d := depRelease("default", "d", 1, 0, "", "")
	d.Spec.DependsOn = []v2.DependencyReference{depRef("", "a", "")}
	cl := fake.NewClientBuilder().WithScheme(depTestScheme(t)).WithObjects(a, b, c, d).WithStatusSubresource(&v2.HelmRelease{}).Build()
	ctx := context.Background()

	// check runs one dependency check of name, as its reconcile would,
	// and writes the outcome into its Ready condition.
	check := func(name string) string {
		t.Helper()
		hr := &v2.HelmRelease{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, hr); err != nil {
			t.Fatal(err)
		}
		err := checkDependencies(ctx, cl, hr, dependencyOptions{})
		var notReady *DependencyNotReadyError
		if !errors.As(err, &notReady) {
			t.Fatalf("%s: got %v, want a *DependencyNotReadyError", name, err)
		}
		conditions.MarkFalse(hr, meta.ReadyCondition, helmv2.DependencyNotReadyReason, "%s", err)
		if err := cl.Status().Update(ctx, hr); err != nil {
			t.Fatal(err)
		}
		return err.Error()
	}
	var last map[string]string
	for round := range 5 {
		msgs := map[string]string{}
		for _, name := range []string{"a", "b", "c", "d"} {
			msgs[name] = check(name)
		}
		if round >= 2 {
			for name, msg := range msgs {
				if msg != last[name] {
					t.Errorf("round %d: %s's message changed from %q to %q", round, name, last[name], msg)
				}
			}
		}
		last = msgs
	}
	want := map[string]string{
		"a": "dependency 'default/b' is not ready: it depends on this HelmRelease in turn (dependency cycle default/a -> default/b -> default/c -> default/a)",
		"b": "dependency 'default/c' is not ready: it depends on this HelmRelease in turn (dependency cycle default/b -> default/c -> default/a -> default/b)",
		"c": "dependency 'default/a' is not ready: it depends on this HelmRelease in turn (dependency cycle default/c -> default/a -> default/b -> default/c); " +
			"dependency 'default/missing' not found",
		"d": "dependency 'default/a' is not ready: Ready condition is False: " + last["a"],
	}
	for name, w := range want {
		if last[name] != w {
			t.Errorf("%s: message %q, want %q", name, last[name], w)
		}
	}
}

// TestDependenciesOutsideTheCache: the controller's cache holds only the
// HelmReleases of its shard (--watch-label-selector) and, without
// --watch-all-namespaces, of its namespace. A dependency outside it (in
// another shard, say) is read from the API server, as upstream reads every
// dependency, instead of being reported missing forever.
func TestDependenciesOutsideTheCache(t *testing.T) {
	notCached := errors.New(`unable to get: other/db because of unknown namespace for the cache`)
	cases := []struct {
		name     string
		cacheErr error
	}{
		{name: "another shard: not found in the cache", cacheErr: apierrors.NewNotFound(v2.GroupVersion.WithResource("helmreleases").GroupResource(), "db")},
		{name: "another namespace: not in the cache", cacheErr: notCached},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := fake.NewClientBuilder().WithScheme(depTestScheme(t)).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
						return tc.cacheErr
					},
				}).Build()
			api := fake.NewClientBuilder().WithScheme(depTestScheme(t)).WithObjects(readyRelease("other", "db")).Build()
			self := depRelease("default", "app", 1, 1, "", "")
			self.Spec.DependsOn = []v2.DependencyReference{depRef("other", "db", "")}
			if err := checkDependencies(context.Background(), dependencyReader{cache: cache, api: api}, self, dependencyOptions{}); err != nil {
				t.Errorf("a ready dependency outside the cache: %v", err)
			}
			gone := fake.NewClientBuilder().WithScheme(depTestScheme(t)).Build()
			err := checkDependencies(context.Background(), dependencyReader{cache: cache, api: gone}, self, dependencyOptions{})
			assertDependencyResult(t, err, depNotReady, []string{"other/db"}, []string{"dependency 'other/db' not found"}, nil)
		})
	}
}
