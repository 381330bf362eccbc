package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// TestArtifactDownloadFailure: a chart download that fails is reported as
// upstream reports it, with Ready=False/ArtifactFailed naming the artifact
// and the generation not observed, and is retried as upstream retries it:
//
//   - a failure of the artifact server or the network (an error status, a
//     connection cut or stalled mid-body) returns the error, so that the
//     reconcile is retried with backoff. Waiting for the interval instead
//     (ten minutes in the reliability suite, hours in many clusters) left
//     a release uninstalled or not upgraded long after source-controller
//     was back: nothing else brings it back, since a healthy source gets no
//     new artifact. Found by test/reliability TestFaultsArtifactServer.
//   - an artifact that is gone (404: garbage collected after a newer one
//     was stored) is looked at again after --requeue-dependency, when the
//     source points at its new artifact.
func TestArtifactDownloadFailure(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		// wantErr: retried with backoff; otherwise requeued after
		// --requeue-dependency.
		wantErr bool
		wantMsg string
	}{
		{name: "server error", wantErr: true, wantMsg: "unexpected HTTP status 503",
			handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }},
		{name: "connection cut mid-body", wantErr: true, wantMsg: "unexpected EOF",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", "1000")
				_, _ = w.Write([]byte{0x1f, 0x8b})
				w.(http.Flusher).Flush()
				conn, _, _ := w.(http.Hijacker).Hijack()
				_ = conn.Close()
			}},
		{name: "download stalled mid-body", wantErr: true, wantMsg: "Client.Timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "1000")
				_, _ = w.Write([]byte{0x1f, 0x8b})
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}},
		{name: "artifact gone", wantMsg: "artifact not found",
			handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()

			hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 2,
				Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
			hr.Spec.Interval = metav1.Duration{Duration: 10 * time.Minute}
			hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "repo"}
			hr.Status.ObservedGeneration = 1
			repo := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "repo", Generation: 1}}
			repo.Status.ObservedGeneration = 1
			repo.Status.Artifact = &meta.Artifact{Revision: "1.0.0@sha256:aaa", URL: srv.URL + "/ocirepository/apps/repo/chart.tgz",
				Digest: "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}
			c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr, repo).
				WithStatusSubresource(&v2.HelmRelease{}, &sourcev1.OCIRepository{}).Build()
			events := eventlog.New(20)
			r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: events, FieldManager: ControllerName,
				RequeueDependency: 5 * time.Second, Charts: chartsource.New(chartsource.Options{Retries: 0, Timeout: time.Second})}

			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hr)})

			if tc.wantErr {
				if err == nil || res.RequeueAfter != 0 {
					t.Errorf("Reconcile = %+v, %v; want the error, to be retried with backoff", res, err)
				}
			} else if err != nil || res.RequeueAfter != r.RequeueDependency {
				t.Errorf("Reconcile = %+v, %v; want a requeue after --requeue-dependency (%s)", res, err, r.RequeueDependency)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not name %q", err, tc.wantMsg)
			}
			got := &v2.HelmRelease{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(hr), got); err != nil {
				t.Fatal(err)
			}
			ready := conditions.Get(got, meta.ReadyCondition)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != helmv2.ArtifactFailedReason ||
				!strings.Contains(ready.Message, "1.0.0@sha256:aaa") || !strings.Contains(ready.Message, tc.wantMsg) {
				t.Errorf("Ready %+v, want False/ArtifactFailed naming the artifact and %q", ready, tc.wantMsg)
			}
			if got.Status.ObservedGeneration != 1 {
				t.Errorf("observedGeneration %d, want 1: a failed download does not reconcile the generation", got.Status.ObservedGeneration)
			}
			if got.Status.Failures != 0 || got.Status.InstallFailures != 0 || got.Status.UpgradeFailures != 0 {
				t.Errorf("failure counters %d/%d/%d, want 0: a download failure is not a release failure",
					got.Status.Failures, got.Status.InstallFailures, got.Status.UpgradeFailures)
			}
			if tc.wantErr && !hasEvent(events, tc.wantMsg) {
				t.Errorf("no Warning event naming %q", tc.wantMsg)
			}
		})
	}
}
