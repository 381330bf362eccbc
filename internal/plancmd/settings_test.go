package plancmd

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/features"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/scheme"
)

// controllerDeployment is flux-system/helm-controller with containers.
func controllerDeployment(ctrs ...corev1.Container) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "helm-controller"},
		Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: ctrs}}},
	}
}

// used is the value and origin the plan shows for a setting.
func used(s *preview.Settings, name string) string {
	for _, u := range s.Used {
		if u.Name == name {
			return u.Value + " from " + u.From
		}
	}
	return "not shown"
}

// wantUsed checks the settings shown against want, "value from origin"
// by name.
func wantUsed(t *testing.T, shown *preview.Settings, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := used(shown, name); got != w {
			t.Errorf("%s: %s, want %s", name, got, w)
		}
	}
}

func TestSettingsReadFromTheDeployment(t *testing.T) {
	t.Setenv(runtimeNamespaceEnv, "")
	const deployment = "Deployment flux-system/helm-controller"
	forbidden := interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "helm-controller", nil)
	}}
	tests := []struct {
		name        string
		objs        []client.Object
		intercept   *interceptor.Funcs
		want        map[string]string // setting: "value from origin"
		wantNote    string
		wantHooks   v2.HookWaitStrategy
		wantManager []string
	}{{
		name: "gates and override managers in args",
		objs: []client.Object{controllerDeployment(corev1.Container{Name: "manager", Args: []string{
			"--events-addr", "http://notification-controller", "--watch-all-namespaces",
			"--feature-gates=DefaultToRetryOnFailure=true,RecreateImmutableResources=true",
			"--override-manager=kubectl-edit", "--log-level=info"}})},
		want: map[string]string{
			features.DefaultToRetryOnFailure:    "true from " + deployment,
			features.RecreateImmutableResources: "true from " + deployment,
			features.UseHelm3Defaults:           "false from default",
			"override managers":                 "kubectl-edit from " + deployment,
		},
		wantHooks: v2.BeforeHooks, wantManager: []string{"kubectl-edit"},
	}, {
		name: "flags in command, a sidecar beside the manager, a repeated --feature-gates",
		objs: []client.Object{controllerDeployment(
			corev1.Container{Name: "proxy", Args: []string{"--feature-gates=UseHelm3Defaults=true"}},
			corev1.Container{Name: "manager", Command: []string{"/helm-controller", "--feature-gates=DefaultToAfterHooks=true"},
				Args: []string{"--feature-gates=AllowDNSLookups=true"}})},
		want: map[string]string{
			features.AllowDNSLookups:  "true from " + deployment,
			features.UseHelm3Defaults: "false from default",
			"default wait strategy":   "afterHooks from DefaultToAfterHooks gate: " + deployment,
		},
		wantHooks: v2.AfterHooks,
	}, {
		name:     "not found",
		want:     map[string]string{features.DefaultToRetryOnFailure: "false from default", "override managers": "none from default"},
		wantNote: "Deployment flux-system/helm-controller not found; the plan predicts with the defaults",
	}, {
		name:      "forbidden",
		objs:      []client.Object{controllerDeployment(corev1.Container{Name: "manager", Args: []string{"--feature-gates=DefaultToRetryOnFailure=true"}})},
		intercept: &forbidden,
		want:      map[string]string{features.DefaultToRetryOnFailure: "false from default"},
		wantNote:  "reading Deployment flux-system/helm-controller is forbidden",
	}, {
		name:     "a gate this controller does not know",
		objs:     []client.Object{controllerDeployment(corev1.Container{Name: "manager", Args: []string{"--feature-gates=DefaultToRetryOnFailure=true,Teleport=true"}})},
		want:     map[string]string{features.DefaultToRetryOnFailure: "false from default"},
		wantNote: "feature-gate 'Teleport' not supported",
	}, {
		name:     "several containers, none the manager",
		objs:     []client.Object{controllerDeployment(corev1.Container{Name: "a"}, corev1.Container{Name: "b"})},
		want:     map[string]string{features.DefaultToRetryOnFailure: "false from default"},
		wantNote: `has no container "manager"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tt.objs...)
			if tt.intercept != nil {
				b = b.WithInterceptorFuncs(*tt.intercept)
			}
			o := mustParse(t, "web")
			s, err := controllerSettings(context.Background(), b.Build(), o)
			if err != nil {
				t.Fatal(err)
			}
			shown := s.show()
			wantUsed(t, shown, tt.want)
			wantNote(t, shown.Notes, tt.wantNote)
			if tt.wantHooks != "" && s.runner().DefaultHookOrder != tt.wantHooks {
				t.Errorf("default hook order %s, want %s", s.runner().DefaultHookOrder, tt.wantHooks)
			}
			if got := s.runner().OverrideManagers; strings.Join(got, ",") != strings.Join(tt.wantManager, ",") {
				t.Errorf("override managers %q, want %q", got, tt.wantManager)
			}
		})
	}
}

func wantNote(t *testing.T, notes []string, want string) {
	t.Helper()
	switch {
	case want == "" && len(notes) > 0:
		t.Errorf("notes %q, want none", notes)
	case want != "" && (len(notes) != 1 || !strings.Contains(notes[0], want)):
		t.Errorf("notes %q, want one saying %q", notes, want)
	}
}

func mustParse(t *testing.T, args ...string) *options {
	t.Helper()
	o, err := parse(args)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The plan's flags win over the Deployment's arguments, which win over
// the defaults, setting by setting.
func TestSettingsPrecedence(t *testing.T) {
	t.Setenv(runtimeNamespaceEnv, "")
	const deployment = "Deployment flux-system/helm-controller"
	deploy := controllerDeployment(corev1.Container{Name: "manager", Args: []string{
		"--feature-gates=DefaultToRetryOnFailure=true,DefaultToAfterHooks=true", "--override-manager", "kubectl-edit",
		"--default-service-account=tenant"}})
	tests := []struct {
		name  string
		flags []string
		want  map[string]string
	}{{
		name: "the Deployment's",
		want: map[string]string{
			features.DefaultToRetryOnFailure:    "true from " + deployment,
			features.RecreateImmutableResources: "false from default",
			"default wait strategy":             "afterHooks from DefaultToAfterHooks gate: " + deployment,
			"override managers":                 "kubectl-edit from " + deployment,
			"default service account":           "tenant from " + deployment,
		},
	}, {
		name:  "a flag turns a gate off, another on; the others stay the Deployment's",
		flags: []string{"--feature-gates=DefaultToRetryOnFailure=false", "--feature-gates", "RecreateImmutableResources=true"},
		want: map[string]string{
			features.DefaultToRetryOnFailure:    "false from plan flag --feature-gates",
			features.RecreateImmutableResources: "true from plan flag --feature-gates",
			"default wait strategy":             "afterHooks from DefaultToAfterHooks gate: " + deployment,
		},
	}, {
		name:  "--default-wait-strategy wins over DefaultToAfterHooks",
		flags: []string{"--default-wait-strategy", "beforeHooks"},
		want:  map[string]string{"default wait strategy": "beforeHooks from plan flag --default-wait-strategy"},
	}, {
		name:  "DefaultToAfterHooks off by flag",
		flags: []string{"--feature-gates=DefaultToAfterHooks=false"},
		want:  map[string]string{"default wait strategy": "beforeHooks from DefaultToAfterHooks gate: plan flag --feature-gates"},
	}, {
		name:  "--default-service-account wins",
		flags: []string{"--default-service-account", "ops"},
		want:  map[string]string{"default service account": "ops from plan flag --default-service-account"},
	}, {
		name:  "--override-manager wins",
		flags: []string{"--override-manager", "a", "--override-manager", "b"},
		want:  map[string]string{"override managers": "a,b from plan flag --override-manager"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(deploy.DeepCopy()).Build()
			s, err := controllerSettings(context.Background(), c, mustParse(t, append([]string{"web"}, tt.flags...)...))
			if err != nil {
				t.Fatal(err)
			}
			shown := s.show()
			wantUsed(t, shown, tt.want)
			wantNote(t, shown.Notes, "")
			cfg := s.runner().Config
			if cfg.RecreateImmutable != s.gates[features.RecreateImmutableResources] {
				t.Errorf("action config %+v, gates %v", cfg, s.gates)
			}
		})
	}
}

// The Deployment is looked for where the flags say, else in
// RUNTIME_NAMESPACE, else in flux-system.
func TestControllerKey(t *testing.T) {
	tests := []struct {
		env   string
		flags []string
		want  string
	}{
		{want: "flux-system/helm-controller"},
		{env: "flux", want: "flux/helm-controller"},
		{env: "flux", flags: []string{"--controller-namespace", "ops", "--controller-name", "hc-shard1"}, want: "ops/hc-shard1"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Setenv(runtimeNamespaceEnv, tt.env)
			if got := mustParse(t, append([]string{"web"}, tt.flags...)...).settings.controllerKey().String(); got != tt.want {
				t.Errorf("controller %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBadFeatureGatesFlag(t *testing.T) {
	for _, arg := range []string{"--feature-gates=Teleport=true", "--feature-gates=DefaultToRetryOnFailure=maybe"} {
		if _, err := parse([]string{"web", arg}); err == nil {
			t.Errorf("%s: no error", arg)
		}
	}
}
