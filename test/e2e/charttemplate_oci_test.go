package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestChartTemplateOCIRepository: a chart template with kind OCIRepository
// (Flux 2.10) against the test OCI registry and the real source-controller
// installs to Ready; switching the template to HelmChart and back replaces
// the source object by its kind; moving to chartRef deletes the template's
// object; and every event the controller sends to its notification
// endpoint carries upstream's v2.Action.
func TestChartTemplateOCIRepository(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	sink := startEventSink(t)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{
		Shard: "oci-template-" + rand.String(8),
		Args:  []string{"--events-addr=" + sink.url},
	})
	framework.LogsOnFailure(t, ctl)
	helmRepo := env.HelmRepository(t, ns)

	hr := framework.Sharded(&v2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "podinfo", Namespace: ns},
		Spec: v2.HelmReleaseSpec{HelmReleaseSpec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: 10 * time.Minute},
			Chart:    ociTemplate(),
		}},
	}, ctl)
	env.Create(t, hr)
	name := ns + "-podinfo"
	ociRepo := &sourcev1.OCIRepository{}
	helmChart := &sourcev1.HelmChart{}

	t.Run("installs from a templated OCIRepository", func(t *testing.T) {
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 3 * time.Minute})
		if err := env.Get(ctx, ociRepo, ns, name); err != nil {
			t.Fatalf("the template's OCIRepository: %v", err)
		}
		if ociRepo.Labels["helm.toolkit.fluxcd.io/name"] != "podinfo" || ociRepo.Labels["helm.toolkit.fluxcd.io/namespace"] != ns {
			t.Errorf("OCIRepository labels %v, want the HelmRelease's owner labels", ociRepo.Labels)
		}
		if want := "OCIRepository/" + ns + "/" + name; hr.Status.HelmChart != want {
			t.Errorf("status.helmChart %q, want %q", hr.Status.HelmChart, want)
		}
		// Digest tracking: the manifest digest pins the chart version.
		_, manifestDigest, _ := strings.Cut(ociRepo.Status.Artifact.Revision, "@")
		want := env.Podinfo.Version + "+" + strings.TrimPrefix(manifestDigest, "sha256:")[:12]
		framework.WantHistory(t, hr, 1, want)
		if hr.Status.History[0].OCIDigest != manifestDigest {
			t.Errorf("snapshot ociDigest %q, want %q", hr.Status.History[0].OCIDigest, manifestDigest)
		}
	})

	t.Run("switch to HelmChart", func(t *testing.T) {
		env.PatchSpec(t, hr, func(o *v2.HelmRelease) {
			o.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart:     env.Podinfo.Name,
				Version:   env.Podinfo.Version,
				SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: helmRepo.Name},
			}}
		})
		env.Eventually(t, 2*time.Minute, "OCIRepository deleted", func(ctx context.Context) error { return env.Gone(ctx, ociRepo) })
		env.Eventually(t, 2*time.Minute, "HelmChart created", func(ctx context.Context) error { return env.Get(ctx, helmChart, ns, name) })
		env.WaitRelease(t, hr, framework.ReleaseWant{Timeout: 3 * time.Minute})
		if want := ns + "/" + name; hr.Status.HelmChart != want {
			t.Errorf("status.helmChart %q, want %q", hr.Status.HelmChart, want)
		}
		wantRevisions(t, hr, 1)
	})

	t.Run("switch back to OCIRepository", func(t *testing.T) {
		env.PatchSpec(t, hr, func(o *v2.HelmRelease) { o.Spec.Chart = ociTemplate() })
		env.Eventually(t, 2*time.Minute, "HelmChart deleted", func(ctx context.Context) error { return env.Gone(ctx, helmChart) })
		env.Eventually(t, 2*time.Minute, "OCIRepository created", func(ctx context.Context) error { return env.Get(ctx, ociRepo, ns, name) })
		env.WaitRelease(t, hr, framework.ReleaseWant{Timeout: 3 * time.Minute})
		wantRevisions(t, hr, 1)
	})

	t.Run("chartRef cleans up", func(t *testing.T) {
		ref := env.OCIRepository(t, ns, "podinfo-ref", env.Podinfo.Name, env.Podinfo.Version)
		env.PatchSpec(t, hr, func(o *v2.HelmRelease) {
			o.Spec.Chart = nil
			o.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: ref.Name}
		})
		env.Eventually(t, 2*time.Minute, "template OCIRepository deleted", func(ctx context.Context) error { return env.Gone(ctx, ociRepo) })
		env.WaitRelease(t, hr, framework.ReleaseWant{Timeout: 3 * time.Minute})
		if hr.Status.HelmChart != "" {
			t.Errorf("status.helmChart %q, want it cleared", hr.Status.HelmChart)
		}
	})

	t.Run("events carry the action", func(t *testing.T) {
		got := sink.events()
		install := slices.IndexFunc(got, func(e eventv1.Event) bool { return e.Reason == helmv2.InstallSucceededReason })
		if install < 0 {
			t.Fatalf("the endpoint got no %s event; got %v", helmv2.InstallSucceededReason, reasons(got))
		}
		if a := got[install].Action; a != helmv2.ActionHelmInstall.String() {
			t.Errorf("%s action %q, want %s", helmv2.InstallSucceededReason, a, helmv2.ActionHelmInstall)
		}
		for _, e := range got {
			if e.Action == "" {
				t.Errorf("event %s %q has no action", e.Reason, e.Message)
			}
			if e.ReportingController != "helm-controller" || e.InvolvedObject.Kind != helmv2.HelmReleaseKind || e.InvolvedObject.Name != "podinfo" {
				t.Errorf("event %s from %q about %+v", e.Reason, e.ReportingController, e.InvolvedObject)
			}
			if e.Severity == eventv1.EventSeverityTrace {
				t.Errorf("trace event %s reached the endpoint", e.Reason)
			}
		}
		t.Logf("events received: %v", reasons(got))
	})
}

// ociTemplate is a chart template of the shared podinfo chart in the test
// OCI registry.
func ociTemplate() *helmv2.HelmChartTemplate {
	return &helmv2.HelmChartTemplate{
		Kind: sourcev1.OCIRepositoryKind,
		Spec: helmv2.HelmChartTemplateSpec{OCIRepositorySpec: sourcev1.OCIRepositorySpec{
			URL:       env.Charts.OCIRepositoryURL() + "/" + env.Podinfo.Name,
			Reference: &sourcev1.OCIRepositoryRef{Tag: env.Podinfo.Version},
			Insecure:  true,
			Interval:  &metav1.Duration{Duration: time.Minute},
		}},
	}
}

// wantRevisions checks the number of Helm revisions of hr in storage.
func wantRevisions(t *testing.T, hr *v2.HelmRelease, want int) {
	t.Helper()
	if got := len(env.Storage(t, hr.Namespace, hr.Name)); got != want {
		t.Errorf("%d Helm revisions in storage, want %d (history %+v)", got, want, hr.Status.History)
	}
}

// eventSink is a notification endpoint on 127.0.0.1: it keeps every Flux
// event the controller posts.
type eventSink struct {
	url string

	mu       sync.Mutex
	received []eventv1.Event
}

func startEventSink(t *testing.T) *eventSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &eventSink{url: fmt.Sprintf("http://%s/", ln.Addr())}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *eventSink) serve(w http.ResponseWriter, r *http.Request) {
	var e eventv1.Event
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.received = append(s.received, e)
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (s *eventSink) events() []eventv1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

func reasons(events []eventv1.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Reason + "/" + e.Action
	}
	return out
}
