package controller

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// statusWrite is one status write the API server received.
type statusWrite struct {
	body     string
	metadata bool // the response was asked for as metadata only
}

type finalWrite int

const (
	noWrite finalWrite = iota
	handledWrite
	helperWrite
)

// A reconcile's last status write sends what changed since its last write
// and nothing else: nothing for a reconcile that changed nothing, the
// handled request alone (as the patch helper would send it) for a
// requested reconcile that found the release in sync, the helper's write
// for anything more, including what a write in between left to undo.
func TestFinalWriteSendsWhatChanged(t *testing.T) {
	ready := func(obj *v2.HelmRelease) {
		conditions.MarkTrue(obj, meta.ReadyCondition, helmv2.UpgradeSucceededReason, "Helm upgrade succeeded")
	}
	tests := []struct {
		name string
		// between runs before the last write, with the patcher (to write
		// something in between, as the progress reporter does).
		between func(ctx context.Context, p *releasePatcher, obj *v2.HelmRelease) error
		change  func(obj *v2.HelmRelease)
		// failFirst fails the first write the API server receives.
		failFirst bool
		// want is how the last write goes out: not at all, as the handled
		// request alone (exactly this body, metadata back), or through
		// the helper (one or more writes of the whole object's changes).
		want  finalWrite
		check func(t *testing.T, stored *v2.HelmRelease)
	}{
		{
			name:   "nothing changed: no write",
			change: func(*v2.HelmRelease) {},
			want:   noWrite,
		},
		{
			name:   "handled request alone: that field, metadata back",
			change: func(obj *v2.HelmRelease) { obj.Status.LastHandledReconcileAt = "t2" },
			want:   handledWrite,
			check: func(t *testing.T, stored *v2.HelmRelease) {
				if !conditions.IsReady(stored) || stored.Status.ObservedGeneration != 1 || len(stored.Status.History) != 1 {
					t.Errorf("the rest of the status changed: %+v", stored.Status)
				}
			},
		},
		{
			name: "handled request and a condition: the helper",
			change: func(obj *v2.HelmRelease) {
				obj.Status.LastHandledReconcileAt = "t2"
				conditions.MarkFalse(obj, meta.ReadyCondition, helmv2.UpgradeFailedReason, "upgrade failed")
			},
			want: helperWrite,
			check: func(t *testing.T, stored *v2.HelmRelease) {
				if conditions.IsReady(stored) {
					t.Error("Ready is still True on the server")
				}
			},
		},
		{
			name: "history: the helper",
			change: func(obj *v2.HelmRelease) {
				obj.Status.History = append(helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 2, Status: "deployed"}}, obj.Status.History...)
			},
			want: helperWrite,
			check: func(t *testing.T, stored *v2.HelmRelease) {
				if l := stored.Status.History.Latest(); l == nil || l.Version != 2 {
					t.Errorf("history %+v, want v2 first", stored.Status.History)
				}
			},
		},
		{
			name: "a mark written in between and taken back: the helper undoes it",
			between: func(ctx context.Context, p *releasePatcher, obj *v2.HelmRelease) error {
				conditions.MarkReconciling(obj, meta.ProgressingReason, "Running upgrade")
				return p.Patch(ctx, obj, patch.WithOwnedConditions{Conditions: ownedConditions})
			},
			change: func(obj *v2.HelmRelease) {
				conditions.Delete(obj, meta.ReconcilingCondition)
				obj.Status.LastHandledReconcileAt = "t2"
			},
			want: helperWrite,
			check: func(t *testing.T, stored *v2.HelmRelease) {
				if conditions.Has(stored, meta.ReconcilingCondition) {
					t.Error("Reconciling left on the server")
				}
			},
		},
		{
			name: "after a failed write: the helper, which still holds that change",
			between: func(ctx context.Context, p *releasePatcher, obj *v2.HelmRelease) error {
				obj.Status.LastAttemptedRevision = "2.0.0"
				if err := p.Patch(ctx, obj); err == nil {
					return errors.New("the first write did not fail")
				}
				return nil
			},
			change:    func(obj *v2.HelmRelease) {},
			failFirst: true,
			want:      helperWrite,
			check: func(t *testing.T, stored *v2.HelmRelease) {
				if stored.Status.LastAttemptedRevision != "2.0.0" {
					t.Errorf("lastAttemptedRevision %q, want the change of the failed write", stored.Status.LastAttemptedRevision)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 1,
				Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
			hr.Status.ObservedGeneration = 1
			hr.Status.LastHandledReconcileAt = "t1"
			hr.Status.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 1, Status: "deployed"}}
			ready(hr)
			var writes []statusWrite
			c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr).
				WithStatusSubresource(&v2.HelmRelease{}).WithInterceptorFuncs(interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					data, err := p.Data(obj)
					if err != nil {
						return err
					}
					_, metadata := obj.(*metav1.PartialObjectMetadata)
					if tc.failFirst && len(writes) == 0 {
						writes = append(writes, statusWrite{body: "failed"})
						return errors.New("the API server is away")
					}
					writes = append(writes, statusWrite{body: string(data), metadata: metadata})
					return c.SubResource(sub).Patch(ctx, obj, p, opts...)
				},
			}).Build()
			obj := &v2.HelmRelease{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(hr), obj); err != nil {
				t.Fatal(err)
			}
			p := newReleasePatcher(obj, c, ControllerName)
			if tc.between != nil {
				if err := tc.between(ctx, p, obj); err != nil {
					t.Fatal(err)
				}
			}
			before := len(writes)
			tc.change(obj)
			if err := p.PatchFinal(ctx, obj, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(ControllerName)); err != nil {
				t.Fatalf("PatchFinal: %v", err)
			}

			final := writes[before:]
			switch tc.want {
			case noWrite:
				if len(final) != 0 {
					t.Errorf("wrote %+v, want nothing", final)
				}
			case handledWrite:
				want := statusWrite{body: `{"status":{"lastHandledReconcileAt":"t2"}}`, metadata: true}
				if len(final) != 1 || final[0] != want {
					t.Errorf("wrote %+v, want only %+v", final, want)
				}
			case helperWrite:
				if len(final) == 0 {
					t.Error("nothing written, want the helper's write")
				}
				for _, w := range final {
					if w.metadata {
						t.Errorf("the handled request alone was written (%s), want the helper's write", w.body)
					}
				}
			}
			stored := &v2.HelmRelease{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(hr), stored); err != nil {
				t.Fatal(err)
			}
			if stored.Status.LastHandledReconcileAt != obj.Status.LastHandledReconcileAt {
				t.Errorf("stored lastHandledReconcileAt %q, want %q", stored.Status.LastHandledReconcileAt, obj.Status.LastHandledReconcileAt)
			}
			if tc.check != nil {
				tc.check(t, stored)
			}
		})
	}
}

// On a real API server the handled request alone is written under the
// controller's field manager, leaves the rest of the status as it was, and
// the metadata that comes back carries the new resourceVersion.
func TestHandledRequestWriteOnAnAPIServer(t *testing.T) {
	ctx := context.Background()
	cfg := apiServer(t)
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: newRevisionScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "statuswrite"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "statuswrite", Name: "web"}}
	hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo",
		SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
	if err := c.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	hr.Status.ObservedGeneration = hr.Generation
	hr.Status.LastHandledReconcileAt = "t1"
	conditions.MarkTrue(hr, meta.ReadyCondition, helmv2.InstallSucceededReason, "Helm install succeeded")
	if err := c.Status().Update(ctx, hr, client.FieldOwner(ControllerName)); err != nil {
		t.Fatal(err)
	}

	obj := &v2.HelmRelease{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(hr), obj); err != nil {
		t.Fatal(err)
	}
	read := obj.ResourceVersion
	p := newReleasePatcher(obj, c, ControllerName)
	obj.Status.LastHandledReconcileAt = "t2"
	if err := p.PatchFinal(ctx, obj, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(ControllerName)); err != nil {
		t.Fatalf("PatchFinal: %v", err)
	}

	stored := &v2.HelmRelease{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(hr), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.LastHandledReconcileAt != "t2" {
		t.Errorf("stored lastHandledReconcileAt %q, want t2", stored.Status.LastHandledReconcileAt)
	}
	if !conditions.IsReady(stored) || stored.Status.ObservedGeneration != hr.Generation {
		t.Errorf("the rest of the status changed: %+v", stored.Status)
	}
	if obj.ResourceVersion == read || obj.ResourceVersion != stored.ResourceVersion {
		t.Errorf("resourceVersion in memory %s (read %s), want the written %s", obj.ResourceVersion, read, stored.ResourceVersion)
	}
	var owned bool
	for _, m := range stored.ManagedFields {
		if m.Manager == ControllerName && m.Subresource == "status" && m.FieldsV1 != nil &&
			strings.Contains(string(m.FieldsV1.Raw), `"f:lastHandledReconcileAt"`) {
			owned = true
		}
	}
	if !owned {
		t.Errorf("lastHandledReconcileAt not owned by %s on the status subresource: %+v", ControllerName, stored.ManagedFields)
	}
}
