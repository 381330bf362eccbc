package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/testcharts"
)

// ChartsDir holds the charts the tests install, one place for every suite:
// charts written for the tests and the repository's copy of podinfo (see
// package testcharts for charts from outside the repository).
var ChartsDir = testcharts.Dir

// PublishChart publishes ChartsDir/<dir> as version base-<ns>, a
// version no other test uses, so that tests may change a chart freely.
func (e *Env) PublishChart(t testing.TB, dir, base, ns string, opts ...chartserver.Option) chartserver.ChartRef {
	t.Helper()
	opts = append(opts, chartserver.WithVersion(base+"-"+ns))
	ref, err := e.Charts.AddChart(filepath.Join(ChartsDir, dir), opts...)
	if err != nil {
		t.Fatalf("publishing %s: %v", dir, err)
	}
	return ref
}

// HelmRepository creates the HelmRepository "local" in ns, serving the
// chart server's index.
func (e *Env) HelmRepository(t testing.TB, ns string) *sourcev1.HelmRepository {
	t.Helper()
	repo := &sourcev1.HelmRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns},
		Spec: sourcev1.HelmRepositorySpec{
			URL:      e.Charts.HelmRepositoryURL(),
			Interval: metav1.Duration{Duration: time.Minute},
		},
	}
	if err := e.Client.Create(context.Background(), repo); err != nil {
		t.Fatalf("creating HelmRepository: %v", err)
	}
	return repo
}

// Release returns a HelmRelease of chart@version from the HelmRepository
// repo with the values (JSON, none when empty), reconciled every ten
// minutes so that only changes make it act.
func Release(ns, name, repo, chart, version, values string) *v2.HelmRelease {
	hr := &v2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v2.HelmReleaseSpec{HelmReleaseSpec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: 10 * time.Minute},
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart:     chart,
				Version:   version,
				SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: repo},
				OCIRepositorySpec: sourcev1.OCIRepositorySpec{
					Interval: &metav1.Duration{Duration: time.Minute},
				},
			}},
		}},
	}
	if values != "" {
		hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	}
	return hr
}

// PodinfoRelease is Release of the shared podinfo chart.
func (e *Env) PodinfoRelease(ns, name, repo, values string) *v2.HelmRelease {
	return Release(ns, name, repo, e.Podinfo.Name, e.Podinfo.Version, values)
}

// Sharded labels hr for the shard of c and returns it.
func Sharded(hr *v2.HelmRelease, c *Controller) *v2.HelmRelease {
	if hr.Labels == nil {
		hr.Labels = map[string]string{}
	}
	hr.Labels[ShardLabel] = c.Options().Shard
	return hr
}

// JSON wraps raw JSON values.
func JSON(raw string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(raw)} }

// Create creates obj or fails the test.
func (e *Env) Create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// PatchSpec reads hr, applies mutate and patches the difference.
func (e *Env) PatchSpec(t testing.TB, hr *v2.HelmRelease, mutate func(*v2.HelmRelease)) {
	t.Helper()
	ctx := context.Background()
	if err := e.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
		t.Fatalf("getting HelmRelease: %v", err)
	}
	before := hr.DeepCopy()
	mutate(hr)
	if err := e.Client.Patch(ctx, hr, client.MergeFrom(before)); err != nil {
		t.Fatalf("patching HelmRelease: %v", err)
	}
}

// Annotate merges annotations into obj's metadata.
func (e *Env) Annotate(t testing.TB, obj client.Object, annotations map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("annotating %s: %v", obj.GetName(), err)
	}
}

// RequestReconcile asks for a reconcile of obj now, as `flux reconcile`
// does, and returns the token the controller acknowledges in
// lastHandledReconcileAt.
func (e *Env) RequestReconcile(t testing.TB, obj client.Object) string {
	t.Helper()
	token := strconv.FormatInt(time.Now().UnixNano(), 10)
	e.Annotate(t, obj, map[string]string{meta.ReconcileRequestAnnotation: token})
	return token
}

// WaitReconcileHandled waits until the controller acknowledged token,
// leaving hr as last read.
func (e *Env) WaitReconcileHandled(t testing.TB, hr *v2.HelmRelease, token string, timeout time.Duration) {
	t.Helper()
	e.Eventually(t, timeout, "reconcile request handled", func(ctx context.Context) error {
		if err := e.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
			return err
		}
		if hr.Status.LastHandledReconcileAt != token {
			return fmt.Errorf("lastHandledReconcileAt %q, want %q", hr.Status.LastHandledReconcileAt, token)
		}
		return nil
	})
}

// DeploymentReady returns nil when the Deployment ns/name has all its
// replicas ready and up to date.
func (e *Env) DeploymentReady(ctx context.Context, ns, name string) error {
	d := &appsv1.Deployment{}
	if err := e.Get(ctx, d, ns, name); err != nil {
		return fmt.Errorf("Deployment %s: %w", name, err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration != d.Generation || d.Status.ReadyReplicas != want || d.Status.UpdatedReplicas != want {
		return fmt.Errorf("%w: Deployment %s: generation %d observed %d, %d/%d ready, %d updated",
			ErrNotReady, name, d.Generation, d.Status.ObservedGeneration, d.Status.ReadyReplicas, want, d.Status.UpdatedReplicas)
	}
	return nil
}

// ErrNotReady marks a workload read and found not ready, as opposed to one
// that could not be read (a timeout, a throttled client): only the first
// says anything about the application.
var ErrNotReady = errors.New("not ready")

// Charts in ChartsDir that several tests share.
const (
	// DeadlockChart is a Deployment that mounts a Secret only its
	// post-install/post-upgrade hook creates: it deadlocks under Helm's
	// wait order and installs with afterHooks.
	DeadlockChart = "afterhooks-deadlock"
	// HookDelayChart is DeadlockChart with the hook's run time in the
	// value hookDelay, for tests that act while the hook runs.
	HookDelayChart = "crash-afterhooks"
	// WidgetCRD is the CRD the e2e-crds charts ship in crds/; Helm never
	// deletes it.
	WidgetCRD = "widgets.e2e.afterhooks.io"
)

// AfterHooksRelease is an afterHooks install of ref in the shard of c,
// with a minute's timeout and no retries.
func AfterHooksRelease(c *Controller, ns, name, repo string, ref chartserver.ChartRef, values string) *v2.HelmRelease {
	hr := Sharded(Release(ns, name, repo, ref.Name, ref.Version, values), c)
	hr.Spec.Install = install(v2.AfterHooks, time.Minute)
	return hr
}

// WithWaitStrategy gives the install and the upgrade of hr the
// waitStrategy, the timeout and no remediation retries, and returns hr.
func WithWaitStrategy(hr *v2.HelmRelease, strategy v2.HookWaitStrategy, timeout time.Duration) *v2.HelmRelease {
	hr.Spec.Install = install(strategy, timeout)
	hr.Spec.Upgrade = &v2.Upgrade{
		Upgrade: helmv2.Upgrade{
			Timeout:     &metav1.Duration{Duration: timeout},
			Remediation: &helmv2.UpgradeRemediation{Retries: 0},
		},
		WaitStrategy: strategy,
	}
	return hr
}

// install is an install with the waitStrategy, the timeout and no
// remediation retries.
func install(strategy v2.HookWaitStrategy, timeout time.Duration) *v2.Install {
	return &v2.Install{
		Install: helmv2.Install{
			Timeout:     &metav1.Duration{Duration: timeout},
			Remediation: &helmv2.InstallRemediation{Retries: 0},
		},
		WaitStrategy: strategy,
	}
}

// JSONFrom is JSON of v marshalled; it panics on values that do not
// marshal, which only test data can be.
func JSONFrom(v any) *apiextensionsv1.JSON {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshalling test values: %v", err))
	}
	return &apiextensionsv1.JSON{Raw: raw}
}

// OCIRepository creates the OCIRepository name in ns for the chart
// server's chart at tag, selecting the Helm chart layer.
func (e *Env) OCIRepository(t testing.TB, ns, name, chart, tag string) *sourcev1.OCIRepository {
	t.Helper()
	repo := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL:       e.Charts.OCIRepositoryURL() + "/" + chart,
			Reference: &sourcev1.OCIRepositoryRef{Tag: tag},
			Insecure:  true,
			Interval:  &metav1.Duration{Duration: time.Minute},
			LayerSelector: &sourcev1.OCILayerSelector{
				MediaType: "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
				Operation: sourcev1.OCILayerCopy,
			},
		},
	}
	e.Create(t, repo)
	return repo
}

// ServiceAccount creates a ServiceAccount in ns bound to a Role of its
// own with rules, for releases that impersonate it.
func (e *Env) ServiceAccount(t testing.TB, ns, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		},
	} {
		e.Create(t, o)
	}
}

// CleanupWidgetCRD arranges, when the test ends, for the HelmReleases in
// ns to be uninstalled while the Widget kind still exists, and then for
// WidgetCRD to be deleted, which Helm never does and other tests expect.
func (e *Env) CleanupWidgetCRD(t testing.TB, ns string) {
	t.Helper()
	t.Cleanup(func() {
		e.DeleteReleases(ns, nil, time.Minute)
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: WidgetCRD}}
		_ = e.Client.Delete(context.Background(), crd)
	})
}

// WantHistory checks the latest snapshot of hr, as last read, is revision
// version of chartVersion, deployed, with its digests.
func WantHistory(t testing.TB, hr *v2.HelmRelease, version int, chartVersion string) {
	t.Helper()
	latest := hr.Status.History.Latest()
	if latest == nil || latest.Version != version || latest.ChartVersion != chartVersion || latest.Status != "deployed" ||
		latest.ConfigDigest == "" || latest.Digest == "" {
		t.Fatalf("latest snapshot %+v, want version %d of chart %s deployed", latest, version, chartVersion)
	}
}

// WantInventory checks status.inventory of hr, as last read, lists the
// object IDs (<namespace>_<name>_<group>_<kind>).
func WantInventory(t testing.TB, hr *v2.HelmRelease, ids ...string) {
	t.Helper()
	if hr.Status.Inventory == nil {
		t.Fatal("status.inventory is empty")
	}
	have := map[string]bool{}
	for _, e := range hr.Status.Inventory.Entries {
		have[e.ID] = true
	}
	for _, id := range ids {
		if !have[id] {
			t.Errorf("inventory lacks %s: %+v", id, hr.Status.Inventory.Entries)
		}
	}
}

// PackageWithHelm packages the chart directory dir (absolute, or below
// ChartsDir) with the helm CLI of the tool cache, built from the Helm SDK
// the controller uses, as `helm package --version <version>` would for a
// chart author, and returns the archive.
func PackageWithHelm(t testing.TB, dir, version string) []byte {
	t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(ChartsDir, dir)
	}
	out := t.TempDir()
	cmd := exec.Command(ToolPath(t, "helm"), "package", dir, "--version", version, "--destination", out)
	// The CLI must read nothing of the machine's own Helm setup.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm package %s: %v\n%s", dir, err, output)
	}
	archives, err := filepath.Glob(filepath.Join(out, "*.tgz"))
	if err != nil || len(archives) != 1 {
		t.Fatalf("helm package %s left %v (%v), want one archive", dir, archives, err)
	}
	data, err := os.ReadFile(archives[0])
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// PublishArchive publishes a packaged chart byte for byte on the chart
// server's HTTP repository and OCI registry, under the name and version of
// its Chart.yaml.
func (e *Env) PublishArchive(t testing.TB, archive []byte) chartserver.ChartRef {
	t.Helper()
	ref, err := e.Charts.AddArchive(archive)
	if err != nil {
		t.Fatalf("publishing a chart archive: %v", err)
	}
	return ref
}
