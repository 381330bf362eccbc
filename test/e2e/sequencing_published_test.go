package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// The tests of this file are those of ordered charts as they reach a
// cluster: packaged with the real `helm package`, upgraded, uninstalled
// with something stuck, and watched while they are applied.

// packagedChart orders its subcharts in Chart.yaml's annotations (kept by
// packaging) and in HIP-0025's depends-on fields (dropped by it).
const packagedChart = "sequencing-packaged"

// packagedOrder is the order its batches are applied in.
var packagedOrder = []string{"db/server (1/5)", "db/info (2/5)", "api/migrate (3/5)", "api/done (4/5)", "unsequenced (5/5)"}

// TestSequencingPackagedCharts applies a chart packaged by `helm package`
// from the HTTP repository and from the OCI registry in its declared
// subchart order; the same chart written with only HIP-0025's depends-on
// fields loses its order in packaging, which a warning says.
func TestSequencingPackagedCharts(t *testing.T) {
	t.Parallel()
	for _, source := range []string{"helm-repository", "oci-registry"} {
		t.Run(source, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			archive := framework.PackageWithHelm(t, packagedChart, "0.1.0-"+ns)
			chartYAML := fileInArchive(t, archive, packagedChart+"/Chart.yaml")
			if strings.Contains(chartYAML, "depends-on:") || !strings.Contains(chartYAML, "helm.sh/depends-on/dependencies") {
				t.Fatalf("packaged Chart.yaml:\n%s\nwant depends-on dropped and the annotations kept, as helm package does", chartYAML)
			}
			hr := packagedRelease(t, ns, source, env.PublishArchive(t, archive))
			env.Create(t, hr)

			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			env.WantDeploymentAvailable(t, ns, "platform-app")
			wantGroupEvents(t, ns, hr.Name, framework.ResourceGroupAppliedReason, packagedOrder)
			wantAfterReady(t, ns, hr.Name, "db/info (2/5)", "api/migrate (3/5)")
			wantAfterReady(t, ns, hr.Name, "api/done (4/5)", "unsequenced (5/5)")
			env.WantNoEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceGroupWarningReason})
		})
	}

	t.Run("order-lost-warns", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		dir := filepath.Join(t.TempDir(), packagedChart)
		if err := os.CopyFS(dir, os.DirFS(filepath.Join(framework.ChartsDir, packagedChart))); err != nil {
			t.Fatal(err)
		}
		// The order as HIP-0025 writes it, and nothing else.
		hipOnly := "apiVersion: v2\nname: " + packagedChart + "\nversion: 0.1.0\ndependencies:\n" +
			"  - name: db\n    version: 0.1.0\n  - name: api\n    version: 0.1.0\n    depends-on: [db]\n"
		if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(hipOnly), 0o644); err != nil {
			t.Fatal(err)
		}
		hr := packagedRelease(t, ns, "helm-repository", env.PublishArchive(t, framework.PackageWithHelm(t, dir, "0.1.0-"+ns)))
		hr.Spec.Install.Timeout = &metav1.Duration{Duration: 20 * time.Second}
		env.Create(t, hr)

		const lost = `chart sequencing-packaged: subchart(s) "api", "db" order their resources with resource groups, but Chart.yaml declares no order`
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: framework.ResourceGroupWarningReason, Contains: lost})
		env.Eventually(t, time.Minute, "the warning in status.sequence", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if seq := hr.Status.Sequence; seq == nil || !slices.ContainsFunc(seq.Warnings, func(w string) bool { return strings.Contains(w, lost) }) {
				return fmt.Errorf("status.sequence %+v has no lost-order warning", hr.Status.Sequence)
			}
			return nil
		})
	})
}

// packagedRelease is an ordered HelmRelease "platform" of ref, from the
// HelmRepository or, for "oci-registry", an OCIRepository.
func packagedRelease(t *testing.T, ns, source string, ref chartserver.ChartRef) *v2.HelmRelease {
	t.Helper()
	var hr *v2.HelmRelease
	if source == "oci-registry" {
		oci := env.OCIRepository(t, ns, "packaged", ref.Name, ref.Version)
		hr = framework.Release(ns, "platform", "", "", "", "")
		hr.Spec.Chart = nil
		hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: oci.Name}
	} else {
		repo := env.HelmRepository(t, ns)
		hr = framework.Release(ns, "platform", repo.Name, ref.Name, ref.Version, "")
	}
	hr = framework.WithWaitStrategy(hr, v2.BeforeHooks, 90*time.Second)
	hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
	return hr
}

// fileInArchive returns a file of a chart archive.
func fileInArchive(t *testing.T, archive []byte, name string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s is not in the archive", name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
}

// wantAfterReady checks that the batch next was applied after the batch
// first was ready.
func wantAfterReady(t *testing.T, ns, name, first, next string) {
	t.Helper()
	ready := env.WaitEvent(t, ns, name, framework.EventWant{Reason: framework.ResourceGroupReadyReason, Contains: "Resource group " + first + " is ready"})
	applied := env.WaitEvent(t, ns, name, framework.EventWant{Reason: framework.ResourceGroupAppliedReason, Contains: "Resource group " + next + " applied"})
	if eventMoment(applied).Before(eventMoment(ready)) {
		t.Errorf("%s applied at %s, before %s was ready at %s", next, eventMoment(applied).Format(time.StampMicro), first, eventMoment(ready).Format(time.StampMicro))
	}
}

// lifecycleRelease is an ordered HelmRelease "lc" of the first → second →
// third chart with the values, not created yet.
func lifecycleRelease(t *testing.T, values string, timeout time.Duration) (string, *v2.HelmRelease) {
	t.Helper()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, "sequencing-lifecycle", "0.1.0", ns)
	hr := framework.WithWaitStrategy(framework.Release(ns, "lc", repo.Name, ref.Name, ref.Version, values), v2.BeforeHooks, timeout)
	hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
	return ns, hr
}

// TestSequencingKeptObject: an upgrade that drops an object Helm keeps
// (helm.sh/resource-policy: keep) from the second batch does not wait for
// it to disappear, which it never does.
func TestSequencingKeptObject(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Minute
	ns, hr := lifecycleRelease(t, "", timeout)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})

	began := time.Now()
	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"dropKept":true}`) })
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: timeout + 30*time.Second})
	if took := time.Since(began); took > timeout/2 {
		t.Errorf("the upgrade took %s: it waited for the kept object (timeout %s)", took.Round(time.Second), timeout)
	}
	if err := env.Get(context.Background(), &corev1.ConfigMap{}, ns, "lc-kept"); err != nil {
		t.Errorf("the kept ConfigMap: %v, want it kept", err)
	}
}

// TestSequencingStuckUninstall: the second batch has an object a
// finalizer holds. The uninstall reports it, deletes the third and the
// first batch all the same, and ends within the uninstall timeout; with
// spec.waitStrategy.readinessTimeout it gives up on the batch sooner.
func TestSequencingStuckUninstall(t *testing.T) {
	t.Parallel()
	const timeout = 30 * time.Second
	for _, readinessTimeout := range []time.Duration{0, 3 * time.Second} {
		t.Run(fmt.Sprintf("readinessTimeout=%s", readinessTimeout), func(t *testing.T) {
			t.Parallel()
			ns, hr := lifecycleRelease(t, `{"hold":true}`, timeout)
			hr.Spec.Uninstall = &v2.Uninstall{Uninstall: helmv2.Uninstall{Timeout: &metav1.Duration{Duration: timeout}}}
			if readinessTimeout > 0 {
				hr.Spec.WaitStrategy.ReadinessTimeout = &metav1.Duration{Duration: readinessTimeout}
			}
			env.Create(t, hr)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			held := &corev1.ConfigMap{}
			t.Cleanup(func() { releaseFinalizer(t, ns, "lc-held") })

			began := time.Now()
			if err := env.Client.Delete(context.Background(), hr); err != nil {
				t.Fatal(err)
			}
			holder := "ConfigMap/" + ns + "/lc-held: held by finalizer(s) e2e.afterhooks.io/hold"
			var failed corev1.Event
			want := framework.EventWant{Type: corev1.EventTypeWarning, Reason: helmv2.UninstallFailedReason, Contains: holder}
			env.Eventually(t, timeout+30*time.Second, want.String(), func(ctx context.Context) (err error) {
				failed, err = env.FindEvent(ctx, ns, hr.Name, want)
				return err
			})
			stuck := env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: "ResourceGroupStuck", Contains: holder})
			took := eventMoment(failed).Sub(began)
			limit := timeout + 5*time.Second // the events' clock is the API server's, to the second at worst
			if readinessTimeout > 0 {
				limit = readinessTimeout + 10*time.Second
			}
			if took > limit {
				t.Errorf("the uninstall ended %s after it began, want within %s", took.Round(time.Second), limit)
			}
			t.Logf("stuck: %s", stuck.Message)
			for _, name := range []string{"lc-first", "lc-third"} {
				if err := env.Get(context.Background(), &corev1.ConfigMap{}, ns, name); !apierrors.IsNotFound(err) {
					t.Errorf("ConfigMap %s: %v, want it deleted past the stuck batch", name, err)
				}
			}
			if err := env.Get(context.Background(), held, ns, "lc-held"); err != nil || held.DeletionTimestamp == nil {
				t.Errorf("ConfigMap lc-held: %v, deletion %v: want it marked for deletion, held", err, held.DeletionTimestamp)
			}
		})
	}
}

// releaseFinalizer removes the test's finalizer from a ConfigMap so that its
// namespace can go.
func releaseFinalizer(t *testing.T, ns, name string) {
	cm := &corev1.ConfigMap{}
	if err := env.Get(context.Background(), cm, ns, name); err != nil {
		return
	}
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Finalizers = nil
	if err := env.Client.Patch(context.Background(), cm, patch); err != nil {
		t.Logf("releasing ConfigMap %s/%s: %v", ns, name, err)
	}
}

// TestSequencingSiblings: two sibling subcharts, the first group of one
// slow to become ready. The other goes through all its groups meanwhile;
// the status shows the plan and which batch waits for what.
func TestSequencingSiblings(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, "sequencing-siblings", "0.1.0", ns)
	hr := framework.WithWaitStrategy(framework.Release(ns, "sib", repo.Name, ref.Name, ref.Version, ""), v2.BeforeHooks, 2*time.Minute)
	hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
	env.Create(t, hr)

	names := []string{"fast/a", "slow/a", "fast/b", "slow/b"}
	env.Eventually(t, time.Minute, "the plan in the status, slow/a waiting for its Deployment", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		seq := hr.Status.Sequence
		if seq == nil {
			return errors.New("no status.sequence")
		}
		var got []string
		for _, b := range seq.Batches {
			got = append(got, b.Name)
		}
		if seq.Action != "install" || !slices.Equal(got, names) {
			return fmt.Errorf("status.sequence %+v, want the install's batches %v", seq, names)
		}
		slow, fast := seq.Batches[1], seq.Batches[2]
		if slow.Phase != "waiting" || !strings.Contains(slow.Detail, "Deployment/"+ns+"/sib-slow") {
			return fmt.Errorf("slow/a %+v, want waiting for its Deployment", slow)
		}
		if fast.Phase != "applied" {
			return fmt.Errorf("fast/b %+v, want applied while slow/a waits", fast)
		}
		return nil
	})

	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	fastDone := env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceGroupAppliedReason, Contains: "Resource group fast/b (3/4) applied"})
	slowReady := env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceGroupReadyReason, Contains: "Resource group slow/a (2/4) is ready"})
	if !eventMoment(fastDone).Before(eventMoment(slowReady)) {
		t.Errorf("fast/b applied at %s, not before slow/a was ready at %s: the fast subchart waited for the slow one",
			eventMoment(fastDone).Format(time.StampMicro), eventMoment(slowReady).Format(time.StampMicro))
	}
	if err := env.Get(context.Background(), hr, ns, hr.Name); err != nil {
		t.Fatal(err)
	}
	for _, b := range hr.Status.Sequence.Batches {
		if b.Phase != "ready" && b.Phase != "applied" {
			t.Errorf("batch %s is %s after the install, want ready or applied", b.Name, b.Phase)
		}
	}
}
