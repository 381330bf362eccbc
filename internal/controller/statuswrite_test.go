package controller

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
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
	clientgometadata "k8s.io/client-go/metadata"
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
// the metadata that comes back carries the new resourceVersion, through
// either writer: the controller-runtime client's (the default) and
// client-go's metadata client (the controller's, SetMetadataClient).
func TestHandledRequestWriteOnAnAPIServer(t *testing.T) {
	writers := map[string]func(t *testing.T, c client.Client) statusWriter{
		"controller-runtime client": func(_ *testing.T, c client.Client) statusWriter { return clientStatusWriter{c} },
		"metadata client": func(t *testing.T, _ client.Client) statusWriter {
			m, err := clientgometadata.NewForConfig(apiServer(t))
			if err != nil {
				t.Fatal(err)
			}
			return newMetadataStatusWriter(m)
		},
	}
	for name, writer := range writers {
		t.Run(name, func(t *testing.T) {
			namespace := "statuswrite-" + strings.ReplaceAll(name, " ", "-")
			c, obj := settledReleaseOnAPIServer(t, namespace)
			testHandledRequestWrite(t, c, obj, writer(t, c))
		})
	}
}

func testHandledRequestWrite(t *testing.T, c client.Client, obj *v2.HelmRelease, writer statusWriter) {
	ctx := context.Background()
	hr := obj.DeepCopy()
	read := obj.ResourceVersion
	p := newReleasePatcher(obj, c, ControllerName)
	p.status = writer
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

// settledReleaseOnAPIServer creates, on the shared API server, a HelmRelease
// whose status reads as a settled fleet's: Ready, five revisions of history,
// a handled request t1, written by the controller; it returns the object as
// a reconcile reads it back.
func settledReleaseOnAPIServer(tb testing.TB, namespace string) (client.Client, *v2.HelmRelease) {
	tb.Helper()
	ctx := context.Background()
	cfg := apiServer(tb)
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfPathMissing: true}); err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: newRevisionScheme(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"}}
	hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo",
		SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
	if err := c.Create(ctx, hr); err != nil {
		tb.Fatal(err)
	}
	hr.Status.ObservedGeneration = hr.Generation
	hr.Status.LastHandledReconcileAt = "t1"
	hr.Status.HelmChart = namespace + "/" + namespace + "-web"
	for v := 5; v >= 1; v-- {
		hr.Status.History = append(hr.Status.History, &helmv2.Snapshot{Name: "web", Namespace: namespace, Version: v,
			Status: "superseded", ChartName: "podinfo", ChartVersion: fmt.Sprintf("6.%d.0", v),
			ConfigDigest:  "sha256:1dc5f5ba5fd7e3c9d1b7a5b0d5c5f5e5d5c5b5a5f5e5d5c5b5a5f5e5d5c5b5a5",
			Digest:        "sha256:0bd4d4b5f7c0a5c1e0f4b3b7f4a6d7c2e1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6",
			FirstDeployed: metav1.Now(), LastDeployed: metav1.Now()})
	}
	hr.Status.History[0].Status = "deployed"
	conditions.MarkTrue(hr, meta.ReadyCondition, helmv2.UpgradeSucceededReason, "Helm upgrade succeeded for release %s/web.v5 with chart podinfo@6.5.0", namespace)
	conditions.MarkTrue(hr, helmv2.ReleasedCondition, helmv2.UpgradeSucceededReason, "Helm upgrade succeeded for release %s/web.v5 with chart podinfo@6.5.0", namespace)
	if err := c.Status().Update(ctx, hr, client.FieldOwner(ControllerName)); err != nil {
		tb.Fatal(err)
	}
	read := &v2.HelmRelease{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(hr), read); err != nil {
		tb.Fatal(err)
	}
	return c, read
}

// BenchmarkHandledRequestWrite is the last write of a requested reconcile
// that found the release in sync, through Flux's patch helper (as before
// issue 32's last lever) and as PatchFinal sends it. The API server is the
// shared test server, another process: allocs/op and cpu-µs/op are the
// controller's side alone.
func BenchmarkHandledRequestWrite(b *testing.B) {
	ctx := context.Background()
	c, read := settledReleaseOnAPIServer(b, "statuswrite-bench")
	m, err := clientgometadata.NewForConfig(apiServer(b))
	if err != nil {
		b.Fatal(err)
	}
	metadataWriter := newMetadataStatusWriter(m)
	opts := []patch.Option{patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(ControllerName)}
	writes := map[string]func(obj *v2.HelmRelease) error{
		"helper": func(obj *v2.HelmRelease) error {
			p := patch.NewSerialPatcher(obj, c)
			obj.Status.LastHandledReconcileAt = fmt.Sprint(time.Now().UnixNano())
			return p.Patch(ctx, obj, opts...)
		},
		"final": func(obj *v2.HelmRelease) error {
			p := newReleasePatcher(obj, c, ControllerName)
			obj.Status.LastHandledReconcileAt = fmt.Sprint(time.Now().UnixNano())
			return p.PatchFinal(ctx, obj, opts...)
		},
		"final-metadata": func(obj *v2.HelmRelease) error {
			p := newReleasePatcher(obj, c, ControllerName)
			p.status = metadataWriter
			obj.Status.LastHandledReconcileAt = fmt.Sprint(time.Now().UnixNano())
			return p.PatchFinal(ctx, obj, opts...)
		},
	}
	for _, name := range []string{"helper", "final", "final-metadata"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			start := processCPU(b)
			for b.Loop() {
				if err := writes[name](read.DeepCopy()); err != nil {
					b.Fatal(err)
				}
			}
			// The API server is another process: this is the
			// controller's side of the write.
			b.ReportMetric(float64((processCPU(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(tb testing.TB) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
