package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/postrender"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// podinfoPostRenderers patches the podinfo Deployment with a JSON6902
// patch, the Service in ns with a strategic merge patch, and points the
// podinfo image at tag. The strategic merge patch has no target, so it
// names its object in full: podinfo's templates set the namespace.
func podinfoPostRenderers(ns, tag string) []helmv2.PostRenderer {
	return []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{
		Patches: []kustomize.Patch{
			{
				Target: &kustomize.Selector{Group: "apps", Version: "v1", Kind: "Deployment", Name: "podinfo"},
				Patch: `- op: add
  path: /metadata/annotations/e2e.afterhooks.dev~1patched
  value: json6902
`,
			},
			{
				Patch: fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: podinfo
  namespace: %s
  annotations:
    e2e.afterhooks.dev/patched: strategic-merge
`, ns),
			},
		},
		Images: []kustomize.Image{{Name: "ghcr.io/stefanprodan/podinfo", NewName: "registry.e2e.local/podinfo", NewTag: tag}},
	}}}
}

// TestPostRenderers installs podinfo with Kustomize post renderers, checks
// the patches and the image override landed, that a change of post renderer
// upgrades the release and that a bad one fails the upgrade with nothing
// applied.
func TestPostRenderers(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	hr := env.PodinfoRelease(ns, "podinfo", env.HelmRepository(t, ns).Name, "")
	hr.Spec.PostRenderers = podinfoPostRenderers(ns, "6.9.1")
	if err := env.Client.Create(ctx, hr); err != nil {
		t.Fatalf("creating HelmRelease: %v", err)
	}
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	waitObservedDigests(t, hr)
	framework.WantHistory(t, hr, 1, env.Podinfo.Version)
	wantPodinfoPostRendered(t, ns, "registry.e2e.local/podinfo:6.9.1")
	firstDigest := hr.Status.ObservedPostRenderersDigest

	t.Run("unchanged reconcile does not upgrade", func(t *testing.T) {
		env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), time.Minute)
		if got := len(env.Storage(t, ns, "podinfo")); got != 1 {
			t.Errorf("%d Helm revisions, want 1", got)
		}
	})

	t.Run("a changed post renderer upgrades", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.PostRenderers = podinfoPostRenderers(ns, "6.9.2") })
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 3 * time.Minute})
		waitObservedDigests(t, hr)
		wantPodinfoPostRendered(t, ns, "registry.e2e.local/podinfo:6.9.2")
		if d := hr.Status.ObservedPostRenderersDigest; d == firstDigest {
			t.Errorf("observedPostRenderersDigest %q unchanged by the change", d)
		}
		env.WaitEvent(t, hr.Namespace, hr.Name, framework.EventWant{Reason: helmv2.UpgradeSucceededReason, Revision: true})
	})

	t.Run("a bad target selector stalls before any upgrade, nothing applied", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
			hr.Spec.PostRenderers = podinfoPostRenderers(ns, "6.9.3")
			hr.Spec.PostRenderers[0].Kustomize.Patches[0].Target.LabelSelector = "app in (podinfo"
		})
		env.Eventually(t, 2*time.Minute, "Stalled and Ready=False/InvalidPostRenderers naming the bad selector", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			c := conditions.Get(hr, meta.ReadyCondition)
			if c == nil || c.ObservedGeneration != hr.Generation || c.Status != metav1.ConditionFalse || c.Reason != "InvalidPostRenderers" {
				return fmt.Errorf("Ready condition %+v", c)
			}
			if !strings.Contains(c.Message, "spec.postRenderers[0].kustomize.patches[0].target: labelSelector") {
				return fmt.Errorf("message does not name the field: %s", c.Message)
			}
			if !conditions.IsStalled(hr) {
				return fmt.Errorf("not Stalled: %+v", hr.Status.Conditions)
			}
			return nil
		})
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: "InvalidPostRenderers",
			Contains: "labelSelector",
		})
		if got := len(env.Storage(t, ns, "podinfo")); got != 2 {
			t.Errorf("%d Helm revisions after the refused upgrade, want 2", got)
		}
		if hr.Status.UpgradeFailures != 0 || hr.Status.Failures != 0 {
			t.Errorf("upgradeFailures %d, failures %d: a spec error is not an upgrade failure", hr.Status.UpgradeFailures, hr.Status.Failures)
		}
		wantPodinfoPostRendered(t, ns, "registry.e2e.local/podinfo:6.9.2")
	})
}

// waitObservedDigests waits until the status records the digests of the
// spec's post renderers and common metadata. Ready can show up a moment
// before them: the controller patches conditions and the rest of the status
// separately.
func waitObservedDigests(t *testing.T, hr *v2.HelmRelease) {
	t.Helper()
	env.Eventually(t, 30*time.Second, "observed post render digests", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
			return err
		}
		st := hr.Status
		if want := postrender.PostRenderersDigest(hr.Spec.PostRenderers); st.ObservedPostRenderersDigest != want {
			return fmt.Errorf("observedPostRenderersDigest %q, want %q", st.ObservedPostRenderersDigest, want)
		}
		if want := postrender.CommonMetadataDigest(hr.Spec.CommonMetadata); st.ObservedCommonMetadataDigest != want {
			return fmt.Errorf("observedCommonMetadataDigest %q, want %q", st.ObservedCommonMetadataDigest, want)
		}
		return nil
	})
}

// wantPodinfoPostRendered checks the post renderers' effects on the live
// objects.
func wantPodinfoPostRendered(t *testing.T, ns, image string) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := env.Get(ctx, d, ns, "podinfo"); err != nil {
		t.Fatal(err)
	}
	if got := d.Annotations["e2e.afterhooks.dev/patched"]; got != "json6902" {
		t.Errorf("Deployment annotation from the JSON6902 patch = %q", got)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("Deployment image %q, want %q", got, image)
	}
	svc := &corev1.Service{}
	if err := env.Get(ctx, svc, ns, "podinfo"); err != nil {
		t.Fatal(err)
	}
	if got := svc.Annotations["e2e.afterhooks.dev/patched"]; got != "strategic-merge" {
		t.Errorf("Service annotation from the strategic merge patch = %q", got)
	}
}

// TestCommonMetadata installs podinfo with commonMetadata and checks every
// object of the release carries it, with the origin labels, and that a
// change upgrades the release and relabels every object.
func TestCommonMetadata(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	hr := env.PodinfoRelease(ns, "podinfo", env.HelmRepository(t, ns).Name, "")
	// A ServiceAccount too, so the release has more than two kinds.
	hr.Spec.Values = framework.JSON(`{"serviceAccount": {"enabled": true}}`)
	hr.Spec.CommonMetadata = &helmv2.CommonMetadata{
		Labels:      map[string]string{"e2e.afterhooks.dev/team": "blue"},
		Annotations: map[string]string{"e2e.afterhooks.dev/owner": "platform"},
	}
	if err := env.Client.Create(ctx, hr); err != nil {
		t.Fatalf("creating HelmRelease: %v", err)
	}
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	waitObservedDigests(t, hr)
	first := hr.Status.ObservedCommonMetadataDigest
	if first == "" || hr.Status.ObservedPostRenderersDigest != "" {
		t.Errorf("observed digests: commonMetadata %q, postRenderers %q (none set)", first, hr.Status.ObservedPostRenderersDigest)
	}
	framework.WantInventory(t, hr, ns+"_podinfo_apps_Deployment", ns+"_podinfo__Service", ns+"_podinfo__ServiceAccount")
	wantMetadataOnInventory(t, hr, "blue", "platform")

	t.Run("a change upgrades and relabels every object", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
			hr.Spec.CommonMetadata.Labels["e2e.afterhooks.dev/team"] = "red"
			hr.Spec.CommonMetadata.Annotations["e2e.afterhooks.dev/owner"] = "apps"
		})
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 3 * time.Minute})
		waitObservedDigests(t, hr)
		if d := hr.Status.ObservedCommonMetadataDigest; d == first {
			t.Errorf("observedCommonMetadataDigest %q unchanged by the change", d)
		}
		wantMetadataOnInventory(t, hr, "red", "apps")
	})
}

// wantMetadataOnInventory reads every object in status.inventory and checks
// its labels and annotations.
func wantMetadataOnInventory(t *testing.T, hr *v2.HelmRelease, team, owner string) {
	t.Helper()
	if hr.Status.Inventory == nil || len(hr.Status.Inventory.Entries) == 0 {
		t.Fatal("status.inventory is empty")
	}
	for _, e := range hr.Status.Inventory.Entries {
		parts := strings.Split(e.ID, "_")
		if len(parts) != 4 {
			t.Fatalf("inventory ID %q is not namespace_name_group_kind", e.ID)
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(schema.GroupVersionKind{Group: parts[2], Version: e.Version, Kind: parts[3]})
		if err := env.Get(context.Background(), obj, parts[0], parts[1]); err != nil {
			t.Fatalf("inventory object %s: %v", e.ID, err)
		}
		labels, annotations := obj.GetLabels(), obj.GetAnnotations()
		if labels["e2e.afterhooks.dev/team"] != team || annotations["e2e.afterhooks.dev/owner"] != owner {
			t.Errorf("%s: labels %v annotations %v, want team=%s owner=%s", e.ID, labels, annotations, team, owner)
		}
		if labels[postrender.OriginNameLabel] != hr.Name || labels[postrender.OriginNamespaceLabel] != hr.Namespace {
			t.Errorf("%s: origin labels missing: %v", e.ID, labels)
		}
	}
}

// TestPostRenderersWithAfterHooks checks that install and upgrade with
// waitStrategy afterHooks, which run Helm on their own storage wrapper, get
// the post renderer too.
func TestPostRenderersWithAfterHooks(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	hr := env.PodinfoRelease(ns, "podinfo", env.HelmRepository(t, ns).Name, "")
	hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
	hr.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
	hr.Spec.PostRenderers = podinfoPostRenderers(ns, "6.9.1")
	hr.Spec.CommonMetadata = &helmv2.CommonMetadata{
		Labels:      map[string]string{"e2e.afterhooks.dev/team": "blue"},
		Annotations: map[string]string{"e2e.afterhooks.dev/owner": "platform"},
	}
	if err := env.Client.Create(ctx, hr); err != nil {
		t.Fatalf("creating HelmRelease: %v", err)
	}
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	// Ready is written before the rest of the status; the digests come
	// with the inventory.
	waitObservedDigests(t, hr)
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{
		Type: corev1.EventTypeNormal, Reason: framework.AfterHooksStartedReason,
		Contains: "Helm install of podinfo started with waitStrategy afterHooks",
	})
	wantPodinfoPostRendered(t, ns, "registry.e2e.local/podinfo:6.9.1")
	wantMetadataOnInventory(t, hr, "blue", "platform")

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.PostRenderers = podinfoPostRenderers(ns, "6.9.2") })
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 3 * time.Minute})
	waitObservedDigests(t, hr)
	wantPodinfoPostRendered(t, ns, "registry.e2e.local/podinfo:6.9.2")
	wantMetadataOnInventory(t, hr, "blue", "platform")
}
