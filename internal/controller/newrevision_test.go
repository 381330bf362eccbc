package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

func newRevisionScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v2.AddToScheme, sourcev1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// newRevisionFixture is a HelmRelease reading its chart from an
// OCIRepository and values from a ConfigMap, all in namespace apps.
func newRevisionFixture(t *testing.T, configWatch bool) (*HelmReleaseReconciler, *v2.HelmRelease, *sourcev1.OCIRepository, *corev1.ConfigMap) {
	t.Helper()
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 1,
		Annotations: map[string]string{meta.ReconcileRequestAnnotation: "one"}}}
	hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "repo"}
	hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "common"}}
	repo := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "repo"}}
	repo.Status.Artifact = &meta.Artifact{Revision: "1.0.0@sha256:aaa", Digest: "sha256:aaa"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "common"}, Data: map[string]string{"k": "v"}}
	c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr, repo, cm).
		WithStatusSubresource(&sourcev1.OCIRepository{}).Build()
	r := &HelmReleaseReconciler{Client: c}
	if configWatch {
		r.ConfigWatch = ConfigWatchOptions{Selector: labels.Everything()}
	}
	// The reconcile works on what it read.
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	return r, hr, repo, cm
}

func TestNewRevisionTrigger(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		configWatch bool
		change      func(t *testing.T, c client.Client, hr *v2.HelmRelease, repo *sourcev1.OCIRepository, cm *corev1.ConfigMap)
		want        string
	}{
		{name: "nothing changed", configWatch: true,
			change: func(*testing.T, client.Client, *v2.HelmRelease, *sourcev1.OCIRepository, *corev1.ConfigMap) {}},
		{name: "spec changed", change: func(t *testing.T, c client.Client, hr *v2.HelmRelease, _ *sourcev1.OCIRepository, _ *corev1.ConfigMap) {
			hr = hr.DeepCopy()
			hr.Generation = 2
			mustUpdate(t, c, hr)
		}, want: "HelmRelease/apps/web"},
		{name: "reconcile requested", change: func(t *testing.T, c client.Client, hr *v2.HelmRelease, _ *sourcev1.OCIRepository, _ *corev1.ConfigMap) {
			hr = hr.DeepCopy()
			hr.Annotations[meta.ReconcileRequestAnnotation] = "two"
			mustUpdate(t, c, hr)
		}, want: "HelmRelease/apps/web"},
		{name: "other annotation", change: func(t *testing.T, c client.Client, hr *v2.HelmRelease, _ *sourcev1.OCIRepository, _ *corev1.ConfigMap) {
			hr = hr.DeepCopy()
			hr.Annotations["example.com/note"] = "x"
			mustUpdate(t, c, hr)
		}},
		{name: "new artifact", change: func(t *testing.T, c client.Client, _ *v2.HelmRelease, repo *sourcev1.OCIRepository, _ *corev1.ConfigMap) {
			repo.Status.Artifact = &meta.Artifact{Revision: "1.0.1@sha256:bbb", Digest: "sha256:bbb"}
			if err := c.Status().Update(context.Background(), repo); err != nil {
				t.Fatal(err)
			}
		}, want: "OCIRepository/apps/repo"},
		{name: "watched ConfigMap changed", configWatch: true,
			change: func(t *testing.T, c client.Client, _ *v2.HelmRelease, _ *sourcev1.OCIRepository, cm *corev1.ConfigMap) {
				cm.Data["k"] = "w"
				mustUpdate(t, c, cm)
			}, want: "ConfigMap/apps/common"},
		{name: "ConfigMap changed without config watches",
			change: func(t *testing.T, c client.Client, _ *v2.HelmRelease, _ *sourcev1.OCIRepository, cm *corev1.ConfigMap) {
				cm.Data["k"] = "w"
				mustUpdate(t, c, cm)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, hr, repo, cm := newRevisionFixture(t, tt.configWatch)
			r.CancelHealthCheckOnNewRevision = true
			base := r.baselineOf(ctx, hr, repo.Status.Artifact)
			tt.change(t, r.Client, hr, repo, cm)
			if got := r.newRevisionTrigger(ctx, base); got != tt.want {
				t.Errorf("trigger %q, want %q", got, tt.want)
			}
		})
	}
}

func mustUpdate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// TestCancelHealthCheckOnNewRevisionGate shows the gate's effect on what the
// Helm actions get: with it off there is no wait context and a cancelled
// wait stays an ordinary failure; with it on a spec change cancels the wait
// context and the action's error names the trigger.
func TestCancelHealthCheckOnNewRevisionGate(t *testing.T) {
	for _, gate := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[gate], func(t *testing.T) {
			r, hr, repo, _ := newRevisionFixture(t, false)
			r.CancelHealthCheckOnNewRevision = gate
			w := r.watchForNewRevision(context.Background(), hr, repo.Status.Artifact)
			defer w.Stop()

			changed := hr.DeepCopy()
			changed.Generation = 2
			mustUpdate(t, r.Client, changed)

			waitErr := errors.Join(errors.New("resource Gadget/apps/web not ready"), context.Canceled)
			var canceled *reconcile.HealthCheckCanceledError
			if !gate {
				if w.Context() != nil {
					t.Fatal("gate off: the actions got a wait context")
				}
				if errors.As(w.canceled(waitErr), &canceled) {
					t.Fatal("gate off: a wait error became a cancellation")
				}
				return
			}
			select {
			case <-w.Context().Done():
			case <-time.After(3 * newRevisionPollInterval):
				t.Fatal("gate on: the wait context was not cancelled after a spec change")
			}
			if !errors.As(w.canceled(waitErr), &canceled) || canceled.Trigger != "HelmRelease/apps/web" {
				t.Fatalf("gate on: error %v, want a cancellation triggered by HelmRelease/apps/web", w.canceled(waitErr))
			}
			if err := errors.New("timed out"); w.canceled(err) != err {
				t.Error("gate on: an error that is not a cancellation was converted")
			}
		})
	}
}

// TestNewRevisionTriggerReadsSourceLikeTheReconcile: with DirectSourceFetch
// the reconcile took its artifact from the API server, ahead of an informer
// cache that has not caught up yet. The watch must compare with the same
// reader, or the lagging cache looks like a new artifact and cancels the
// wait of a revision nothing replaces.
func TestNewRevisionTriggerReadsSourceLikeTheReconcile(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		newerInAP bool // the API server has an artifact the cache lacks
		want      string
	}{
		{name: "cache lags behind the API server"},
		{name: "a newer artifact after the reconcile started", newerInAP: true, want: "OCIRepository/apps/repo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, hr, repo, _ := newRevisionFixture(t, false)
			r.CancelHealthCheckOnNewRevision = true
			// The API server is ahead of r.Client, the cache.
			fresh := repo.DeepCopy()
			fresh.ResourceVersion = ""
			fresh.Status.Artifact = &meta.Artifact{Revision: "1.0.1@sha256:bbb", Digest: "sha256:bbb"}
			api := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr.DeepCopy(), fresh).
				WithStatusSubresource(&sourcev1.OCIRepository{}).Build()
			r.APIReader, r.DirectSourceFetch = api, true

			artifact, err := r.sourceArtifact(ctx, hr)
			if err != nil {
				t.Fatal(err)
			}
			base := r.baselineOf(ctx, hr, artifact)
			if tt.newerInAP {
				if err := api.Get(ctx, client.ObjectKeyFromObject(fresh), fresh); err != nil {
					t.Fatal(err)
				}
				fresh.Status.Artifact = &meta.Artifact{Revision: "1.0.2@sha256:ccc", Digest: "sha256:ccc"}
				if err := api.Status().Update(ctx, fresh); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.newRevisionTrigger(ctx, base); got != tt.want {
				t.Errorf("trigger %q, want %q", got, tt.want)
			}
		})
	}
}
