package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/connect"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// typedTestMapper knows Secrets, Deployments, HelmReleases, CRDs
// (cluster-scoped) and example.com/v1 Widgets, and nothing else.
func typedTestMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper(nil)
	m.Add(corev1.SchemeGroupVersion.WithKind("Secret"), apimeta.RESTScopeNamespace)
	m.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), apimeta.RESTScopeNamespace)
	m.Add(v2.GroupVersion.WithKind("HelmRelease"), apimeta.RESTScopeNamespace)
	m.Add(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"), apimeta.RESTScopeRoot)
	m.Add(widgetGVK, apimeta.RESTScopeNamespace)
	return m
}

func typedTestScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := depTestScheme(t)
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// widget is a custom resource with a Ready condition of status ready ("" for
// none) for generation gen, observed at observed, and status.phase.
func widget(namespace, name string, gen, observed int64, ready, phase string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetGeneration(gen)
	st := map[string]any{"observedGeneration": observed, "phase": phase}
	if ready != "" {
		st["conditions"] = []any{map[string]any{
			"type": "Ready", "status": ready, "reason": "Testing", "message": "widget says " + ready,
			"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": observed,
		}}
	}
	u.Object["status"] = st
	return u
}

// deployment is a Deployment wanting replicas, with available of them
// available and updated.
func deployment(namespace, name string, replicas, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: available,
			ReadyReplicas: available, AvailableReplicas: available,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
		},
	}
}

func typedRef(apiVersion, kind, namespace, name string, ready bool, readyExpr string) v2.DependencyReference {
	return v2.DependencyReference{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name, Ready: ready, ReadyExpr: readyExpr}
}

func TestCheckTypedDependencies(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "creds"}}
	forbidden := func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if key.Name == "secret-of-others" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name,
				errors.New(`User "system:serviceaccount:default:tenant" cannot get resource "secrets"`))
		}
		return c.Get(ctx, key, obj, opts...)
	}

	cases := []struct {
		name     string
		deps     []v2.DependencyReference
		objects  []client.Object
		opts     dependencyOptions
		get      func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error
		want     depOutcome
		contains []string
		absent   []string
		// bodyRead, when set, is whether the check may read objects whole
		// (false: metadata only).
		bodyRead *bool
	}{
		{
			name:     "a CRD that exists is met, without a namespace and from its metadata alone",
			deps:     []v2.DependencyReference{typedRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", false, "")},
			objects:  []client.Object{crd},
			want:     depAllReady,
			bodyRead: new(false),
		},
		{
			name:     "a missing CRD is named without a namespace",
			deps:     []v2.DependencyReference{typedRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets.example.com", false, "")},
			want:     depNotReady,
			contains: []string{"dependency 'apiextensions.k8s.io/v1/CustomResourceDefinition/gadgets.example.com' not found"},
		},
		{
			name:    "a Secret that exists is met (existence only)",
			deps:    []v2.DependencyReference{typedRef("v1", "Secret", "", "creds", false, "")},
			objects: []client.Object{secret},
			want:    depAllReady,
		},
		{
			name:     "a missing Secret is named with its namespace defaulted",
			deps:     []v2.DependencyReference{typedRef("v1", "Secret", "", "absent", false, "")},
			want:     depNotReady,
			contains: []string{"dependency 'v1/Secret/default/absent' not found"},
		},
		{
			name:    "ready: true on a Widget whose Ready is True for its generation is met",
			deps:    []v2.DependencyReference{typedRef("example.com/v1", "Widget", "", "w", true, "")},
			objects: []client.Object{widget("default", "w", 2, 2, "True", "Up")},
			want:    depAllReady,
		},
		{
			name:     "ready: true on a Widget whose Ready is False is not met, with kstatus' reason",
			deps:     []v2.DependencyReference{typedRef("example.com/v1", "Widget", "", "w", true, "")},
			objects:  []client.Object{widget("default", "w", 2, 2, "False", "Down")},
			want:     depNotReady,
			contains: []string{"dependency 'example.com/v1/Widget/default/w' is not ready: it is InProgress: widget says False"},
		},
		{
			name:     "ready: true on a Widget whose generation is not observed yet is not met",
			deps:     []v2.DependencyReference{typedRef("example.com/v1", "Widget", "", "w", true, "")},
			objects:  []client.Object{widget("default", "w", 3, 2, "True", "Up")},
			want:     depNotReady,
			contains: []string{"dependency 'example.com/v1/Widget/default/w' is not ready: it is InProgress:", "generation"},
		},
		{
			name:     "ready: false on a Widget whose Ready is False is met: it exists",
			deps:     []v2.DependencyReference{typedRef("example.com/v1", "Widget", "", "w", false, "")},
			objects:  []client.Object{widget("default", "w", 2, 2, "False", "Down")},
			want:     depAllReady,
			bodyRead: new(false),
		},
		{
			name:     "ready: true on a Deployment with too few replicas available is not met",
			deps:     []v2.DependencyReference{typedRef("apps/v1", "Deployment", "", "api", true, "")},
			objects:  []client.Object{deployment("default", "api", 3, 1)},
			want:     depNotReady,
			contains: []string{"dependency 'apps/v1/Deployment/default/api' is not ready: it is InProgress:"},
		},
		{
			name:    "ready: true on an available Deployment is met",
			deps:    []v2.DependencyReference{typedRef("apps/v1", "Deployment", "", "api", true, "")},
			objects: []client.Object{deployment("default", "api", 3, 3)},
			want:    depAllReady,
		},
		{
			name:    "readyExpr on a Widget's status field is met when true, whatever kstatus says",
			deps:    []v2.DependencyReference{typedRef("example.com/v1", "Widget", "", "w", true, "dep.status.phase == 'Up'")},
			objects: []client.Object{widget("default", "w", 2, 2, "False", "Up")},
			want:    depAllReady,
		},
		{
			name:     "readyExpr on a Widget is not met when false, and sees self",
			deps:     []v2.DependencyReference{typedRef("example.com/v1", "Widget", "", "w", false, "dep.status.phase == self.spec.values.version")},
			objects:  []client.Object{widget("default", "w", 2, 2, "True", "Up")},
			want:     depNotReady,
			contains: []string{"dependency 'example.com/v1/Widget/default/w' is not ready: readyExpr 'dep.status.phase == self.spec.values.version' evaluated to false"},
		},
		{
			name:     "readyExpr with AdditiveCEL must pass kstatus too",
			deps:     []v2.DependencyReference{typedRef("example.com/v1", "Widget", "", "w", true, "dep.status.phase == 'Up'")},
			objects:  []client.Object{widget("default", "w", 2, 2, "False", "Up")},
			opts:     dependencyOptions{AdditiveCEL: true},
			want:     depNotReady,
			contains: []string{"dependency 'example.com/v1/Widget/default/w' is not ready: it is InProgress: widget says False"},
		},
		{
			// Most often a CRD another release installs: waited for, as
			// a missing object is, not stalled.
			name:     "a kind the cluster does not serve yet is waited for, naming the reference",
			deps:     []v2.DependencyReference{typedRef("example.com/v1", "Gizmo", "", "g", false, "")},
			want:     depNotReady,
			contains: []string{"dependency 'example.com/v1/Gizmo/default/g' is not ready: the cluster serves no kind Gizmo in example.com/v1 (yet)"},
		},
		{
			name:     "an apiVersion the cluster does not serve for a known kind is waited for",
			deps:     []v2.DependencyReference{typedRef("example.com/v9", "Widget", "", "w", false, "")},
			want:     depNotReady,
			contains: []string{"dependency 'example.com/v9/Widget/default/w' is not ready: the cluster serves no kind Widget in example.com/v9 (yet)"},
		},
		{
			name:     "a kind without apiVersion is invalid",
			deps:     []v2.DependencyReference{typedRef("", "Secret", "", "creds", false, "")},
			want:     depInvalid,
			contains: []string{"has a kind but no apiVersion: set spec.dependsOn[0].apiVersion"},
		},
		{
			name:     "an apiVersion without kind is invalid",
			deps:     []v2.DependencyReference{typedRef("v1", "", "", "creds", false, "")},
			want:     depInvalid,
			contains: []string{"dependency 'v1//default/creds' has an apiVersion but no kind"},
		},
		{
			name:     "a namespace on a cluster-scoped kind is invalid",
			deps:     []v2.DependencyReference{typedRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "default", "widgets.example.com", false, "")},
			objects:  []client.Object{crd},
			want:     depInvalid,
			contains: []string{"is of a cluster-scoped kind: remove spec.dependsOn[0].namespace"},
		},
		{
			name:     "--no-cross-namespace-refs refuses another namespace for a kind",
			deps:     []v2.DependencyReference{typedRef("v1", "Secret", "infra", "creds", false, "")},
			opts:     dependencyOptions{NoCrossNamespaceRefs: true},
			want:     depInvalid,
			contains: []string{"dependency 'v1/Secret/infra/creds' is in another namespace than the HelmRelease while cross-namespace references are disabled (--no-cross-namespace-refs)"},
		},
		{
			name:    "--no-cross-namespace-refs allows a cluster-scoped kind",
			deps:    []v2.DependencyReference{typedRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", false, "")},
			objects: []client.Object{crd},
			opts:    dependencyOptions{NoCrossNamespaceRefs: true},
			want:    depAllReady,
		},
		{
			name:     "a forbidden read is not met and says forbidden",
			deps:     []v2.DependencyReference{typedRef("v1", "Secret", "", "secret-of-others", false, "")},
			get:      forbidden,
			want:     depNotReady,
			contains: []string{"dependency 'v1/Secret/default/secret-of-others' is not ready: reading it as tester is forbidden:", "cannot get resource"},
		},
		{
			name: "HelmRelease entries keep today's words beside entries of other kinds",
			deps: []v2.DependencyReference{
				depRef("", "db", ""),
				typedRef("v1", "Secret", "", "absent", false, ""),
				typedRef("example.com/v1", "Widget", "", "w", true, ""),
			},
			objects: []client.Object{depRelease("default", "db", 1, 1, metav1.ConditionFalse, "install failed"), widget("default", "w", 1, 1, "False", "")},
			want:    depNotReady,
			contains: []string{"dependency 'default/db' is not ready: Ready condition is False: install failed; " +
				"dependency 'v1/Secret/default/absent' not found; " +
				"dependency 'example.com/v1/Widget/default/w' is not ready: it is InProgress: widget says False"},
		},
		{
			name:    "a kind entry named like the HelmRelease itself is no self-dependency",
			deps:    []v2.DependencyReference{typedRef("v1", "Secret", "", "app", false, "")},
			objects: []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"}}},
			want:    depAllReady,
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			self := depRelease("default", "app", 1, 1, "", "")
			self.Spec.DependsOn = tc.deps
			withDepValues(self, `{"version":"1.2.3"}`)

			var sawBody bool
			get := tc.get
			if get == nil {
				get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					return c.Get(ctx, key, obj, opts...)
				}
			}
			objs := append([]client.Object{}, tc.objects...)
			c := fake.NewClientBuilder().WithScheme(typedTestScheme(t)).WithRESTMapper(typedTestMapper()).
				WithObjects(objs...).
				WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*unstructured.Unstructured); ok {
						sawBody = true
					}
					return get(ctx, c, key, obj, opts...)
				}}).Build()
			opts := tc.opts
			opts.Typed = func(context.Context) (*typedAccess, error) {
				return &typedAccess{Mapper: typedTestMapper(), Reader: c, Identity: "tester"}, nil
			}
			err := checkDependencies(context.Background(), c, self, opts)
			assertTypedResult(t, err, tc.want, tc.contains, tc.absent)
			if tc.bodyRead != nil && sawBody != *tc.bodyRead {
				t.Errorf("read the object whole: %v, want %v", sawBody, *tc.bodyRead)
			}
		})
	}
}

func assertTypedResult(t *testing.T, err error, want depOutcome, contains, absent []string) {
	t.Helper()
	var notReady *DependencyNotReadyError
	var invalid *InvalidDependencyError
	got := depOtherError
	switch {
	case err == nil:
		got = depAllReady
	case errors.As(err, &notReady):
		got = depNotReady
	case errors.As(err, &invalid):
		got = depInvalid
	}
	if got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
	if err == nil {
		return
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	for _, s := range absent {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q contains %q", err, s)
		}
	}
}

// TestTypedDependenciesNeedAccess: without a way to read other kinds the
// check fails plainly (retried), and the access is built only when an
// entry has a kind.
func TestTypedDependenciesNeedAccess(t *testing.T) {
	self := depRelease("default", "app", 1, 1, "", "")
	self.Spec.DependsOn = []v2.DependencyReference{depRef("", "db", "")}
	c := fake.NewClientBuilder().WithScheme(typedTestScheme(t)).WithObjects(readyRelease("default", "db")).Build()
	built := 0
	opts := dependencyOptions{Typed: func(context.Context) (*typedAccess, error) {
		built++
		return nil, errors.New("no cluster")
	}}
	if err := checkDependencies(context.Background(), c, self, opts); err != nil {
		t.Fatalf("HelmRelease entries alone: %v", err)
	}
	if built != 0 {
		t.Errorf("access built %d times for HelmRelease entries alone", built)
	}
	self.Spec.DependsOn = append(self.Spec.DependsOn, typedRef("v1", "Secret", "", "s", false, ""))
	err := checkDependencies(context.Background(), c, self, opts)
	assertTypedResult(t, err, depOtherError, []string{"failed to connect for the dependencies of other kinds than HelmRelease: no cluster"}, nil)
	if built != 1 {
		t.Errorf("access built %d times, want once", built)
	}
}

// TestDependencyAccessIdentity: entries with a kind are read as the
// release is applied: the ServiceAccount it names, else the controller's
// --default-service-account, else the controller itself through its API
// reader.
func TestDependencyAccessIdentity(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(typedTestScheme(t)).WithRESTMapper(typedTestMapper()).Build()
	api := fake.NewClientBuilder().WithScheme(typedTestScheme(t)).Build()
	cases := []struct {
		name, specAccount, defaultAccount string
		want                              string
		own                               bool
	}{
		{name: "no account", want: "the controller's identity", own: true},
		{name: "spec.serviceAccountName", specAccount: "tenant", want: "ServiceAccount 'team/tenant'"},
		{name: "--default-service-account", defaultAccount: "restricted", want: "ServiceAccount 'team/restricted'"},
		{name: "the spec's account wins over the default", specAccount: "tenant", defaultAccount: "restricted", want: "ServiceAccount 'team/tenant'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			targets, err := connect.NewBuilder(connect.Options{
				Local: &rest.Config{Host: "https://127.0.0.1:1"}, Client: c, DefaultServiceAccount: tc.defaultAccount,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := &HelmReleaseReconciler{Client: c, APIReader: api, Targets: targets}
			hr := depRelease("team", "app", 1, 1, "", "")
			hr.Spec.ServiceAccountName = tc.specAccount
			access, err := r.dependencyAccess(context.Background(), hr)
			if err != nil {
				t.Fatal(err)
			}
			if access.Identity != tc.want {
				t.Errorf("identity %q, want %q", access.Identity, tc.want)
			}
			if own := access.Reader == client.Reader(api); own != tc.own {
				t.Errorf("reads through the controller's API reader: %v, want %v", own, tc.own)
			}
		})
	}
}
