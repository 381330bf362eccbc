package action

import (
	"context"
	"strings"
	"sync"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr/testr"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// immutableChart has a plain Job (a migration that is part of the
// release), a Service whose type comes from values and a ConfigMap.
// values.force, when set, annotates the Job and the Service
// helm.toolkit.fluxcd.io/force.
func immutableChart(version string) *chartv2.Chart {
	const job = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  {{- with .Values.force }}
  annotations:
    helm.toolkit.fluxcd.io/force: {{ . }}
  {{- end }}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: {{ .Values.image }}
`
	const svc = `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-svc
  {{- with .Values.force }}
  annotations:
    helm.toolkit.fluxcd.io/force: {{ . }}
  {{- end }}
spec:
  {{- if .Values.headless }}
  clusterIP: None
  {{- else }}
  type: NodePort
  {{- end }}
  selector:
    app: web
  ports:
    - port: 80
`
	return &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "immutable", Version: version},
		Templates: []*common.File{
			{Name: "templates/job.yaml", Data: []byte(job)},
			{Name: "templates/svc.yaml", Data: []byte(svc)},
			{Name: "templates/cm.yaml", Data: []byte(configMapTemplate)},
			{Name: "templates/dropped.yaml", Data: []byte(droppedTemplate)},
		},
	}
}

// droppedTemplate is a ConfigMap only install renders: the upgrade must
// still delete it after recreating what it refused.
const droppedTemplate = `{{- if .Values.headless }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-dropped
{{- end }}
`

// uids reads the UIDs of the chart's three objects.
func uids(t *testing.T, cs kubernetes.Interface, ns, name string) (job, svc, cm types.UID) {
	t.Helper()
	ctx := context.Background()
	j, err := cs.BatchV1().Jobs(ns).Get(ctx, name+"-migrate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cs.CoreV1().Services(ns).Get(ctx, name+"-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name+"-cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j.UID, s.UID, c.UID
}

func TestAgainstAPIServerRecreate(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	createNamespaces(t, cs, "recreate")
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		force     string // the annotation's value; "" for none
		gate      bool
		specForce bool
		helm3     bool // client-side apply
		// wantErr are the parts of the upgrade's error; none means the
		// upgrade recreates the Job and the Service.
		wantErr []string
	}{
		{name: "no annotation", wantErr: []string{"Job/recreate/noann-migrate", "spec.template", "field is immutable",
			"annotate it helm.toolkit.fluxcd.io/force: enabled (or turn on the RecreateImmutableResources feature gate)", "Service/recreate/noann-svc"}},
		{name: "annotated", force: "enabled"},
		{name: "annotated client-side", force: "enabled", helm3: true},
		{name: "no annotation client-side", helm3: true, wantErr: []string{"Job/recreate/csa-migrate", "spec.template", "field is immutable"}},
		{name: "gate", gate: true},
		{name: "gate opted out", gate: true, force: "disabled", wantErr: []string{"Job/recreate/optout-migrate", "opts out"}},
		// force is Helm's force, as upstream: it recreates nothing.
		{name: "upgrade.force", specForce: true, wantErr: []string{"Job/recreate/force-migrate", "spec.template", "field is immutable"}},
		{name: "upgrade.force client-side", specForce: true, helm3: true, wantErr: []string{"Job/recreate/forcecsa-migrate", "field is immutable"}},
	}
	names := []string{"noann", "ann", "anncsa", "csa", "gate", "optout", "force", "forcecsa"}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := names[i]
			obj := newHR(func(o *v2.HelmRelease) {
				o.Name, o.Namespace = name, "recreate"
				o.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
				o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{DisableWait: true, Force: tt.specForce}}
				o.Spec.Rollback = &v2.Rollback{Rollback: helmv2.Rollback{DisableWait: true}}
			})
			cfg, err := factory.Build("recreate", "recreate", withLogger(testr.New(t)))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var heard []string
			opts := asked{config: Config{UseHelm3Defaults: tt.helm3, RecreateImmutable: tt.gate}, observer: hearing{recreated: func(r recreate.Recreated) {
				mu.Lock()
				defer mu.Unlock()
				heard = append(heard, r.Object+" "+string(r.Propagation))
			}}}
			values := func(image string, headless bool) map[string]any {
				v := map[string]any{"image": image, "headless": headless, "foo": "x"}
				if tt.force != "" {
					v["force"] = tt.force
				}
				return v
			}
			if _, err := Install(ctx, cfg, obj, immutableChart("1.0.0"), values("migrate:1", true), planned(t, nil, obj, plan.Install, opts)); err != nil {
				t.Fatalf("install: %v", err)
			}
			job, svc, cm := uids(t, cs, "recreate", name)
			finishJob(t, cs, "recreate", name+"-migrate")

			_, err = Upgrade(ctx, cfg, obj, immutableChart("1.1.0"), values("migrate:2", false), planned(t, cfg, obj, plan.Upgrade, opts))
			job2, svc2, cm2 := uids(t, cs, "recreate", name)
			if cm2 != cm {
				t.Error("the ConfigMap was recreated")
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("upgrade succeeded, want it refused")
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				for _, part := range tt.wantErr {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not contain %q", err, part)
					}
				}
				if job2 != job || svc2 != svc {
					t.Error("an object was recreated though it may not be")
				}
				if len(heard) > 0 {
					t.Errorf("observer heard %v", heard)
				}
				return
			}
			if err != nil {
				t.Fatalf("upgrade: %v", err)
			}
			if job2 == job || svc2 == svc {
				t.Errorf("Job recreated: %v, Service recreated: %v; want both", job2 != job, svc2 != svc)
			}
			j, err := cs.BatchV1().Jobs("recreate").Get(ctx, name+"-migrate", metav1.GetOptions{})
			if err != nil || j.Spec.Template.Spec.Containers[0].Image != "migrate:2" {
				t.Errorf("Job after upgrade: %v", err)
			}
			s, err := cs.CoreV1().Services("recreate").Get(ctx, name+"-svc", metav1.GetOptions{})
			if err != nil || s.Spec.Type != "NodePort" || s.Spec.ClusterIP == "None" {
				t.Errorf("Service after upgrade: type %s clusterIP %s (%v)", s.Spec.Type, s.Spec.ClusterIP, err)
			}
			if _, err := cs.CoreV1().ConfigMaps("recreate").Get(ctx, name+"-dropped", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the ConfigMap the upgrade drops: %v, want not found", err)
			}
			if tt.force == "enabled" || tt.gate {
				// The rollback meets the same refusals the other way.
				finishJob(t, cs, "recreate", name+"-migrate")
				opts.toVersion = 1
				if err := Rollback(ctx, cfg, obj, 1, planned(t, cfg, obj, plan.Rollback, opts)); err != nil {
					t.Fatalf("rollback: %v", err)
				}
				j, err := cs.BatchV1().Jobs("recreate").Get(ctx, name+"-migrate", metav1.GetOptions{})
				if err != nil || j.Spec.Template.Spec.Containers[0].Image != "migrate:1" || j.UID == job2 {
					t.Errorf("Job after rollback: %v (recreated %v)", err, err == nil && j.UID != job2)
				}
				s, err := cs.CoreV1().Services("recreate").Get(ctx, name+"-svc", metav1.GetOptions{})
				if err != nil || s.Spec.ClusterIP != "None" {
					t.Errorf("Service after rollback: clusterIP %s (%v)", s.Spec.ClusterIP, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string{"Job/recreate/" + name + "-migrate Background", "Service/recreate/" + name + "-svc Background"}
			for _, w := range want {
				found := false
				for _, h := range heard {
					found = found || h == w
				}
				if !found {
					t.Errorf("observer heard %v, want %q", heard, w)
				}
			}
		})
	}
}

// An install that takes over a Job left in the cluster (replace after a
// failed install, an object kept by an earlier release) updates it, and
// recreates it when annotated.
func TestAgainstAPIServerInstallAdoptionRecreates(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	createNamespaces(t, cs, "adopt")
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, force, wantErr string
	}{
		{name: "adopted", force: "enabled"},
		{name: "refused", wantErr: "Job/adopt/refused-migrate: spec.template: field is immutable; annotate it helm.toolkit.fluxcd.io/force: enabled (or turn on the RecreateImmutableResources feature gate) to let"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			left := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: tt.name + "-migrate", Namespace: "adopt"},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "migrate", Image: "left:0"}},
				}}},
			}
			left, err := cs.BatchV1().Jobs("adopt").Create(ctx, left, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			finishJob(t, cs, "adopt", left.Name)
			obj := newHR(func(o *v2.HelmRelease) {
				o.Name, o.Namespace = tt.name, "adopt"
				o.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
			})
			cfg, err := factory.Build("adopt", "adopt", withLogger(testr.New(t)))
			if err != nil {
				t.Fatal(err)
			}
			values := map[string]any{"image": "migrate:1", "headless": true, "foo": "x"}
			if tt.force != "" {
				values["force"] = tt.force
			}
			_, err = Install(ctx, cfg, obj, immutableChart("1.0.0"), values, planned(t, nil, obj, plan.Install, asked{}))
			job, getErr := cs.BatchV1().Jobs("adopt").Get(ctx, tt.name+"-migrate", metav1.GetOptions{})
			if getErr != nil {
				t.Fatal(getErr)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("install = %v, want an error containing %q", err, tt.wantErr)
				}
				if job.UID != left.UID {
					t.Error("the Job was recreated without the annotation")
				}
				return
			}
			if err != nil {
				t.Fatalf("install: %v", err)
			}
			if job.UID == left.UID || job.Spec.Template.Spec.Containers[0].Image != "migrate:1" {
				t.Errorf("Job: recreated %v, image %s; want the chart's Job", job.UID != left.UID, job.Spec.Template.Spec.Containers[0].Image)
			}
		})
	}
}
