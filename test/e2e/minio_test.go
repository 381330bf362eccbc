package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/testcharts"
)

// The shared minio chart installed as release "minio": its fullname, and so
// its Deployment, is "minio" and its post-install/post-upgrade hook Job
// (present because buckets are set) is "minio-post-job".
const (
	minioRelease = "minio"
	minioPostJob = "minio-post-job"
	// minioReadySecret is what the post job "creates" in the simulator and
	// the minio pods mount (non-optional): the pods cannot become ready
	// before the post job has run.
	minioReadySecret = "minio-bucket-ready"
	// minioAppDelay keeps a minio pod running-but-unready for a while once
	// its Secret exists, so the window between "post job done" and
	// "resources ready" is wide enough to be observed.
	minioAppDelay = "5s"
)

// minioValuesJSON are the values of the shared minio chart for the simulated
// cluster: one standalone pod without a PVC, a bucket so that the post job
// exists, and a real-world style dependency of the minio pods on a Secret
// that only the post job creates. rollout goes into the pod template so
// that changing it rolls out new pods.
func minioValuesJSON(t *testing.T, rollout string) string {
	t.Helper()
	readySecret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\nstringData:\n  bucket: data\n", minioReadySecret)
	values := map[string]any{
		"mode":         "standalone",
		"replicas":     1,
		"persistence":  map[string]any{"enabled": false},
		"resources":    map[string]any{"requests": map[string]any{"memory": "128Mi"}},
		"rootUser":     "e2e-admin",
		"rootPassword": "e2e-not-a-secret",
		"buckets":      []any{map[string]any{"name": "data", "policy": "none", "purge": false}},
		"podAnnotations": map[string]any{
			"sim.afterhooks.io/delay":   minioAppDelay,
			"e2e.afterhooks.io/rollout": rollout,
		},
		"extraVolumes": []any{map[string]any{
			"name":   "bucket-ready",
			"secret": map[string]any{"secretName": minioReadySecret},
		}},
		"extraVolumeMounts": []any{map[string]any{
			"name": "bucket-ready", "mountPath": "/etc/minio/bucket-ready", "readOnly": true,
		}},
		"postJob": map[string]any{
			"podAnnotations": map[string]any{"sim.afterhooks.io/creates": readySecret},
		},
	}
	raw, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestMinioAfterHooks installs and upgrades the shared minio chart with
// waitStrategy afterHooks. The minio pods mount a Secret that only the
// chart's post-install/post-upgrade Job creates, so Helm's own order (wait
// for readiness, then run post hooks) deadlocks, which a beforeHooks
// release installed alongside shows. With afterHooks the post job runs
// first: the test sees the Secret appear while the revision is still
// pending, then the release recorded deployed after the hook completed.
func TestMinioAfterHooks(t *testing.T) {
	t.Parallel()
	start := time.Now()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref, err := env.Charts.AddChart(testcharts.External(t, "minio"), chartserver.WithVersion("5.4.0-"+ns))
	if err != nil {
		t.Fatalf("publishing the minio chart: %v", err)
	}

	// The control: the same chart and values with Helm's wait order. It
	// runs alongside and is judged at the end.
	controlNS := env.Namespace(t)
	controlRepo := env.HelmRepository(t, controlNS)
	control := framework.Release(controlNS, minioRelease, controlRepo.Name, ref.Name, ref.Version, minioValuesJSON(t, "1"))
	control.Spec.Install = &v2.Install{
		Install: helmv2.Install{
			Timeout:     &metav1.Duration{Duration: 10 * time.Second},
			Remediation: &helmv2.InstallRemediation{Retries: 0},
		},
		WaitStrategy: v2.BeforeHooks,
	}
	env.Create(t, control)

	hr := framework.WithWaitStrategy(framework.Release(ns, minioRelease, repo.Name, ref.Name, ref.Version, minioValuesJSON(t, "1")),
		v2.AfterHooks, 90*time.Second)
	env.Create(t, hr)

	var installed *corev1.Secret
	framework.Step(t, "install", func(t *testing.T) {
		// The post job runs while the revision is still pending.
		installed = minioWaitHookDone(t, ns, "", "pending-install")
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
		env.WantStorage(t, ns, minioRelease, "deployed")
		env.WantDeploymentAvailable(t, ns, minioRelease)
		minioWantSecretMount(t, ns)
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
			Contains: "Post-install hooks of minio.v1 completed",
		})
		minioWantHookBeforeReady(t, ns, 1, "1", installed)
	})

	framework.Step(t, "upgrade", func(t *testing.T) {
		// The running minio pod keeps running without the Secret; the new
		// pod of the upgrade needs it again, and only the post-upgrade job
		// creates it.
		if err := env.Client.Delete(context.Background(), installed); err != nil {
			t.Fatalf("deleting Secret %s: %v", minioReadySecret, err)
		}
		env.Eventually(t, 30*time.Second, "Secret "+minioReadySecret+" deleted", func(ctx context.Context) error {
			return env.Gone(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: minioReadySecret}})
		})
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(minioValuesJSON(t, "2")) })

		upgraded := minioWaitHookDone(t, ns, installed.UID, "deployed", "pending-upgrade")
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2})
		env.WantStorage(t, ns, minioRelease, "superseded", "deployed")
		env.WantDeploymentAvailable(t, ns, minioRelease)
		if a := env.PodTemplateAnnotations(t, ns, minioRelease); a["e2e.afterhooks.io/rollout"] != "2" {
			t.Errorf("pod template annotations %v, want the upgraded rollout annotation", a)
		}
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
			Contains: "Post-upgrade hooks of minio.v2 completed",
		})
		minioWantHookBeforeReady(t, ns, 2, "2", upgraded)
	})

	framework.Step(t, "beforeHooks-control-deadlocks", func(t *testing.T) {
		env.Eventually(t, 60*time.Second, "control install fails with Helm's wait order", func(ctx context.Context) error {
			if err := env.Get(ctx, control, controlNS, control.Name); err != nil {
				return err
			}
			return framework.Condition(control, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
		})
		env.WantNoSecret(t, controlNS, minioReadySecret)
		env.WantStorage(t, controlNS, minioRelease, "failed")
		if env.HasEvent(t, controlNS, control.Name, framework.AfterHooksWaitingReason) {
			t.Errorf("%s event for the beforeHooks release", framework.AfterHooksWaitingReason)
		}
	})
	t.Logf("minio installed and upgraded with afterHooks in %s", time.Since(start).Round(100*time.Millisecond))
}

// minioWaitHookDone waits until the post job of the revision being
// released has run: it created the Secret the minio pods mount (a new one
// when oldUID is set) and Helm deleted the succeeded Job (its
// hook-delete-policy), which Helm does once the hook phase is over. At
// that moment the release's revisions, oldest first, must have the given
// statuses: the hook finished while the new revision was still pending,
// before the readiness wait let it be recorded deployed.
func minioWaitHookDone(t *testing.T, ns string, oldUID types.UID, statuses ...string) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{}
	var stored []framework.Stored
	env.Eventually(t, 60*time.Second, "post job done", func(ctx context.Context) error {
		err := env.Get(ctx, secret, ns, minioReadySecret)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret %s not created yet", minioReadySecret)
		}
		if err != nil {
			return err
		}
		if secret.UID == oldUID {
			return fmt.Errorf("Secret %s is still the one of the previous revision", minioReadySecret)
		}
		err = env.Get(ctx, &batchv1.Job{}, ns, minioPostJob)
		if err == nil {
			return fmt.Errorf("hook Job %s not deleted yet", minioPostJob)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		stored = env.Storage(t, ns, minioRelease)
		return nil
	})
	var got []string
	for _, s := range stored {
		got = append(got, string(s.Release.Info.Status))
	}
	if fmt.Sprint(got) != fmt.Sprint(statuses) {
		t.Errorf("Helm storage %s once the post job was done, want %v", framework.Describe(stored), statuses)
	}
	return secret
}

// minioWantHookBeforeReady checks revision version recorded the post job as
// succeeded, that the job completed and its Secret existed before the minio
// pod of the revision (the one with the rollout annotation) became ready,
// and, for revision 1, before the revision was recorded deployed. Helm's
// modifiedAt storage label is that time (in seconds) only for revision 1:
// Helm copies the system labels of the previous revision into later ones.
func minioWantHookBeforeReady(t *testing.T, ns string, version int, rollout string, secret *corev1.Secret) {
	t.Helper()
	var rev *framework.Stored
	for _, s := range env.Storage(t, ns, minioRelease) {
		if s.Release.Version == version {
			rev = &s
		}
	}
	if rev == nil {
		t.Fatalf("no revision %d in Helm storage", version)
	}
	var hook *releasev1.Hook
	for _, h := range rev.Release.Hooks {
		if h.Kind == "Job" && h.Name == minioPostJob {
			hook = h
		}
	}
	if hook == nil {
		t.Fatalf("revision %d has no hook Job %s", version, minioPostJob)
	}
	run := hook.LastRun
	if run.Phase != releasev1.HookPhaseSucceeded || run.CompletedAt.IsZero() {
		t.Fatalf("revision %d hook %s last run %+v, want Succeeded", version, minioPostJob, run)
	}
	completed := run.CompletedAt.Truncate(time.Second)

	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{"app": "minio", "release": minioRelease}); err != nil {
		t.Fatal(err)
	}
	var ready *metav1.Time
	for _, p := range pods.Items {
		if p.Annotations["e2e.afterhooks.io/rollout"] != rollout {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = c.LastTransitionTime.DeepCopy()
			}
		}
	}
	if ready == nil {
		t.Fatalf("no ready minio pod with rollout %s among %d pods", rollout, len(pods.Items))
	}
	if completed.After(ready.Time) {
		t.Errorf("revision %d hook %s completed at %s, after the minio pod became ready at %s",
			version, minioPostJob, run.CompletedAt, ready)
	}
	if secret.CreationTimestamp.After(ready.Time) {
		t.Errorf("Secret %s created at %s, after the minio pod became ready at %s", minioReadySecret, secret.CreationTimestamp, ready)
	}
	deployed := "-"
	if version == 1 {
		modifiedAt, err := strconv.ParseInt(rev.Secret.Labels["modifiedAt"], 10, 64)
		if err != nil {
			t.Fatalf("revision 1 storage labels %v: modifiedAt: %v", rev.Secret.Labels, err)
		}
		at := time.Unix(modifiedAt, 0)
		if completed.After(at) {
			t.Errorf("revision 1 hook %s completed at %s, after the revision was recorded deployed at %s", minioPostJob, run.CompletedAt, at)
		}
		deployed = at.UTC().Format(time.RFC3339)
	}
	t.Logf("revision %d: post job ran %s to %s, Secret created %s, minio pod ready %s, recorded deployed %s",
		version, run.StartedAt.UTC().Format(time.RFC3339Nano), run.CompletedAt.UTC().Format(time.RFC3339Nano),
		secret.CreationTimestamp.UTC().Format(time.RFC3339), ready.UTC().Format(time.RFC3339), deployed)
}

// minioWantSecretMount checks the chart rendered the dependency: the minio
// pod template mounts the post job's Secret, not optional.
func minioWantSecretMount(t *testing.T, ns string) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.Get(context.Background(), d, ns, minioRelease); err != nil {
		t.Fatalf("Deployment %s: %v", minioRelease, err)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == minioReadySecret {
			if v.Secret.Optional != nil && *v.Secret.Optional {
				t.Errorf("volume %s mounts Secret %s as optional", v.Name, minioReadySecret)
			}
			return
		}
	}
	t.Errorf("Deployment %s mounts no Secret %s: volumes %+v", minioRelease, minioReadySecret, d.Spec.Template.Spec.Volumes)
}
